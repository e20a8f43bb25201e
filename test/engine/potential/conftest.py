"""A curl-free test field: a uniform field plus magnetic dipoles under the floor."""

from __future__ import annotations

import torch

DTYPE = torch.float64
UNIFORM = (-22.0, -2.5, -43.0)  # µT, about the Aalto room's mean field
SOURCES = ((1.0, 1.0, -0.8), (2.4, 0.6, -0.7), (0.6, 2.2, -0.9))
MOMENTS = ((3.0, 1.0, 5.0), (-2.0, 4.0, 1.0), (1.0, -3.0, -4.0))


def dipole_field(P: torch.Tensor) -> torch.Tensor:
    """B [N, 3] at positions P [N, 3]: (3(m·r̂)r̂ − m)/|r|³ per dipole, plus the uniform field.

    A dipole's field is the gradient of a harmonic potential away from its source: exactly
    curl-free on the floor.
    """
    B = torch.tensor(UNIFORM, dtype=DTYPE).expand(P.shape[0], 3).clone()
    for source, moment in zip(SOURCES, MOMENTS, strict=True):
        r = P - torch.tensor(source, dtype=DTYPE)
        dist = r.norm(dim=1, keepdim=True)
        unit = r / dist
        m = torch.tensor(moment, dtype=DTYPE)
        B = B + (3.0 * (unit @ m)[:, None] * unit - m) / dist**3
    return B


def lawnmower(n: int, rows: int = 6, size: float = 3.0) -> torch.Tensor:
    """A planar back-and-forth path of n positions [n, 2] over a size × size square."""
    t = torch.linspace(0.0, 1.0, n, dtype=DTYPE) * rows
    row = torch.clamp(t.floor(), max=rows - 1)
    along = t - row
    x = torch.where(row % 2 == 0, along, 1.0 - along) * size
    return torch.stack([x, (row + 0.5) * size / rows], dim=1)
