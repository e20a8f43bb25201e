"""Rows of functionals for the curl-free kernel: readings, potential points, the uniform field
and the magnetometer's offset.

Every function takes the kernel's row ``width``: 4, or 7 where the kernel holds the offset
(``kernel.py``); the rotation columns of every row but a reading's are zero.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .kernel import EARTH, FIELD, HARD_IRON, POTENTIAL, ROW_WIDTHS, SPATIAL_DIMS, TAG_COLUMN


def spatial(X: Tensor) -> Tensor:
    """Positions [N, 3] from map inputs [N, D], D = 2 (z = 0, a planar robot) or 3."""
    if X.shape[1] == SPATIAL_DIMS:
        return X
    if X.shape[1] == 2:
        return torch.cat([X, X.new_zeros((X.shape[0], 1))], dim=1)
    raise ValueError(f"positions must be [N, 2] or [N, 3]; got {tuple(X.shape)}")


def tagged(P: Tensor, tag: int, width: int = ROW_WIDTHS[0]) -> Tensor:
    """[N, width] rows of one functional at positions P [N, 3] (rotation columns zero)."""
    n = P.shape[0]
    pad = P.new_zeros((n, width - SPATIAL_DIMS - 1))
    return torch.cat([P, P.new_full((n, 1), float(tag)), pad], dim=1)


def field_rows(P: Tensor, rotation: Tensor | None = None, width: int = ROW_WIDTHS[0]) -> Tensor:
    """The three field components at positions P [N, 3], component-major: [3N, width].

    Rows ``c·N + i`` are component c of reading i, so each component's rows keep the path's
    order (the outlier screen's agreement test and the health check read neighbours).
    ``rotation`` [N, 3, 3], each reading's device-to-map rotation, fills a seven-column row's
    loadings on the offset with row c of it (the reading's component c); without it they are
    zero: the field alone.
    """
    rows = torch.cat([tagged(P, tag, width) for tag in FIELD])
    if rotation is not None:
        if width != ROW_WIDTHS[1]:
            raise ValueError("a rotation needs rows of seven columns (a kernel with the offset)")
        rows[:, TAG_COLUMN + 1 :] = rotation.transpose(0, 1).reshape(-1, 3)
    return rows


def rotation_matrices(quaternion_xyzw: Tensor) -> Tensor:
    """Rotation matrices [N, 3, 3] of quaternions (x, y, z, w) [N, 4], normalised first."""
    q = quaternion_xyzw / quaternion_xyzw.norm(dim=1, keepdim=True)
    x, y, z, w = q.unbind(1)
    return torch.stack(
        [
            torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], 1),
            torch.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], 1),
            torch.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], 1),
        ],
        1,
    )


def field_targets(B: Tensor) -> Tensor:
    """Readings [N, 3] as the targets of :func:`field_rows`: [3N]."""
    return B.mT.reshape(-1)


def potential_rows(P: Tensor, width: int = ROW_WIDTHS[0]) -> Tensor:
    """Potential inducing variables at positions P [M, 3]: [M, width]."""
    return tagged(P, POTENTIAL, width)


def _global_rows(tags: tuple[int, ...], like: Tensor, width: int) -> Tensor:
    """Rows of map-wide variables (the position unused: zero) [len(tags), width]."""
    origin = like.new_zeros((1, SPATIAL_DIMS))
    return torch.cat([tagged(origin, tag, width) for tag in tags])


def earth_rows(like: Tensor, width: int = ROW_WIDTHS[0]) -> Tensor:
    """The uniform field's three components as inducing variables [3, width] (dtype of
    ``like``)."""
    return _global_rows(EARTH, like, width)


def hard_iron_rows(like: Tensor) -> Tensor:
    """The offset's three device-frame components as inducing variables [3, 7]."""
    return _global_rows(HARD_IRON, like, ROW_WIDTHS[1])


def is_global(rows: Tensor) -> Tensor:
    """[M] bool: the rows of the map-wide variables (the uniform field, the offset)."""
    return rows[:, TAG_COLUMN].round() >= EARTH[0]
