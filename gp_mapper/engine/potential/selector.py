"""Choosing the inducing variables of the field: VIPS over potential points, or every reading.

VIPS (``PotentialVips``) runs the rule of Pescador-Barrios et al. 2024 unchanged over the 3N scalar
observations: the greedy sequence, L*, the threshold and the doubling/bisection search are the
scalar model's (``vips.selectors.vips_search``). What differs is the candidate set and its order:

- candidates are four potential points around each reading, at the vertices of a regular
  tetrahedron of radius ``h = offset · ℓ``. φ at a reading's own position carries nothing
  about B there (∂k vanishes at Δp = 0): on a path, points on it pin only the component along
  it, and on a planar path nothing pins B_z. Differences across a stencil pin all three. On
  the Aalto data (374 readings, θ fixed) the bound with every candidate came within 7 nats of
  the exact evidence with the tetrahedron at 0.25 ℓ, 130 nats with ±h along z alone, 1000+
  with points on the path; six points (±h on each axis) did no better than four;
- the greedy score of a reading is the residual variance of its three components, summed;
  the reading of largest score gives the next pivot, its candidate of largest residual
  potential variance (the side not yet covered).

``FieldReadings`` takes every reading's three components as inducing variables: the exact
vector GP at fixed θ, O((3N)³), for tests and small logs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core.greedy import CONDITIONAL_VARIANCE_FLOOR, PivotedCholesky
from ..core.linalg import Jitter, cholesky_with_jitter
from ..vips.bound import whitened_bound_prefixes
from ..vips.selectors import (
    GREEDY_REFERENCE_FRACTION,
    REFERENCE_PIVOTS,
    Selection,
    SelectionProblem,
    data_side_reference,
    register_selector,
    vips_search,
)
from .functionals import earth_rows, hard_iron_rows, is_global, potential_rows
from .kernel import SPATIAL_DIMS, CurlFreeKernel
from .settings import check, default

# Vertices of a regular tetrahedron (times 1/√3: unit radius), the stencil around a reading.
TETRAHEDRON = ((1.0, 1.0, 1.0), (1.0, -1.0, -1.0), (-1.0, 1.0, -1.0), (-1.0, -1.0, 1.0))


class FieldPivots(PivotedCholesky):
    """Greedy pivots among potential candidates, scored by their readings' three components.

    Columns are ``[readings' field rows (n); candidates (C)]``; ``reading``
    [n] gives each field row's reading, ``owner`` [C] each candidate's reading.
    """

    def __init__(
        self,
        kernel: CurlFreeKernel,
        columns: Tensor,
        candidates: Tensor,
        reading: Tensor,
        owner: Tensor,
        num_readings: int,
        jitter: float | Jitter,
        prefix_Z: Tensor,
        prefix_L: Tensor,
        max_new: int,
    ) -> None:
        super().__init__(kernel, columns, candidates, jitter, prefix_Z, prefix_L, max_new)
        self._reading = reading
        self._owner = owner
        self._candidate_index = torch.nonzero(candidates).squeeze(-1)
        self._num_readings = num_readings
        self._num_rows = reading.shape[0]
        # Uninformative means: below the floor of the potential's own prior variance (the
        # field rows' variance, in other units, must not set it).
        self._floor = CONDITIONAL_VARIANCE_FLOOR * float(kernel.potential_variance().detach())

    def next_pivot(self) -> int | None:
        cand = self._candidate_index
        if cand.numel() == 0:
            return None
        usable = self.available[cand] & (self.diag[cand] > self._floor)
        residual = torch.clamp(self.diag[: self._num_rows], min=0.0)
        score = residual.new_zeros(self._num_readings).index_add_(0, self._reading, residual)
        # No boolean indexing and one read from the device per pivot: each would wait for it.
        usable_count = score.new_zeros(self._num_readings).index_add_(
            0, self._owner, usable.to(score.dtype)
        )
        best = torch.argmax(torch.where(usable_count > 0, score, -torch.inf))
        own = torch.where(usable & (self._owner == best), self.diag[cand], -torch.inf)
        any_usable, j = torch.stack([usable.any().to(cand.dtype), cand[torch.argmax(own)]]).tolist()
        return int(j) if any_usable else None


def _readings(X: Tensor) -> tuple[Tensor, Tensor]:
    """Distinct reading positions [R, 3] and each field row's reading [n]."""
    positions, reading = torch.unique(X[:, :SPATIAL_DIMS], dim=0, return_inverse=True)
    return positions, reading


def global_rows(kernel: CurlFreeKernel, like: Tensor) -> Tensor:
    """The map-wide inducing variables: the uniform field, and the offset where it is modelled."""
    E = earth_rows(like, kernel.row_width)
    return torch.cat([E, hard_iron_rows(like)]) if kernel.has_hard_iron else E


def _prefix(problem: SelectionProblem) -> tuple[Tensor, Tensor]:
    """The forced prefix and its factor: the old inducing variables, or the map-wide ones."""
    old = problem.old
    if old is not None and old.num_inducing > 0:
        return old.Z, old.L
    assert isinstance(problem.kernel, CurlFreeKernel)
    E = global_rows(problem.kernel, problem.X)
    L, _ = cholesky_with_jitter(problem.kernel.K(E), problem.jitter)
    return E, L


@dataclass(frozen=True)
class PotentialVips:
    """VIPS over potential points on a stencil around each reading (module docstring).

    Args:
        delta: VIPS's tolerance δ, as for the scalar model.
        offset: the stencil's radius, in lengthscales.
    """

    delta: float = default("vips.delta")
    offset: float = default("potential.offset")
    name: str = "potential_vips"

    def __post_init__(self) -> None:
        check("vips.delta", self.delta)
        check("potential.offset", self.offset)

    def to_spec(self) -> dict[str, Any]:
        return {"type": "potential_vips", "delta": self.delta, "offset": self.offset}

    def select(self, problem: SelectionProblem) -> Selection:
        kernel = problem.kernel
        if not isinstance(kernel, CurlFreeKernel):
            raise TypeError(f"potential VIPS needs the curl-free kernel; got {type(kernel)}")
        X, y, old = problem.X, problem.y, problem.old
        n = X.shape[0]
        positions, reading = _readings(X)
        R = positions.shape[0]
        h = self.offset * float(kernel.lengthscale.detach()[0])
        stencil = torch.tensor(TETRAHEDRON, dtype=X.dtype, device=X.device) * (h / math.sqrt(3))
        candidates_P = potential_rows(
            (positions[None, :, :] + stencil[:, None, :]).reshape(-1, 3), kernel.row_width
        )
        C = candidates_P.shape[0]
        prefix_Z, prefix_L = _prefix(problem)
        has_old = old is not None and old.num_inducing > 0
        # No columns at Z_a: the rows begin with the old variables (whitened_bound_prefixes).
        columns = torch.cat([X, candidates_P])
        mask = torch.zeros(columns.shape[0], dtype=torch.bool, device=X.device)
        mask[n : n + C] = True
        owner = torch.arange(R, device=X.device).repeat(len(TETRAHEDRON))
        pc = FieldPivots(
            kernel, columns, mask, reading, owner, R,
            old.jitter if has_old else problem.jitter,
            prefix_Z, prefix_L, min(C, REFERENCE_PIVOTS),
        )  # fmt: skip
        kff = kernel.K_diag(X)

        def bounds_of(rows: Tensor) -> Tensor:
            # First batch: the uniform field's rows are new inducing variables like the rest.
            return whitened_bound_prefixes(
                rows[:, :n], None, y, kff, problem.noise_variance, old if has_old else None
            )

        # The greedy pivots towards L* are worth it while they are cheaper than the Schur
        # complement over the C candidates; a pivot here is a Hessian-kernel column, so the
        # budget is R / GREEDY_REFERENCE_FRACTION (the scalar model's for R readings, without
        # its floor): on a window of 59 readings the floor's 64 pivots cost three times the
        # complement over 236 candidates.
        budget = R // GREEDY_REFERENCE_FRACTION
        # L* needs the readings' columns only, not the candidates'.
        saturated = data_side_reference(
            y, kff, problem.noise_variance, old if has_old else None, num_columns=n
        )
        found = vips_search(
            pc, problem, C, bounds_of, self.delta, budget, saturated_bound=saturated
        )
        chosen = [j - n for j in pc.pivots[: found.num_added]]
        Z = torch.cat([prefix_Z, candidates_P[chosen]])
        return Selection(Z, found.num_added, found.reason, found.bound, found.reference,
                         found.threshold)  # fmt: skip


@dataclass(frozen=True)
class FieldReadings:
    """Every reading's three field components as inducing variables (the exact vector GP)."""

    name: str = "field_readings"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "field_readings"}

    def select(self, problem: SelectionProblem) -> Selection:
        old_Z = problem.old.Z if problem.old is not None else problem.X[:0]
        return Selection(torch.cat([old_Z, problem.X]), problem.X.shape[0], "all_readings")


def potential_support(Z: Tensor, input_dim: int) -> Tensor:
    """The map positions [M, input_dim] the inducing variables rest on (distinct ones)."""
    rows = Z[~is_global(Z)]
    return torch.unique(rows[:, :input_dim], dim=0)


def num_potential(Z: Tensor) -> int:
    """Inducing variables other than the map-wide ones (the uniform field, the offset)."""
    return int((~is_global(Z)).sum())


register_selector("potential_vips", PotentialVips)
register_selector("field_readings", FieldReadings)
