"""Inducing variables of the streaming additive model: VIPS for the map, fixed rules for the rest.

Our streaming design for the additive model (Adam, Durrande & John 2018 is batch only), each
component in its own input space:

- ``map``: VIPS (Pescador-Barrios et al. 2024), unchanged (``vips.selectors.vips_search``): the
  greedy sequence over map candidates, one at each reading's position, its L* and threshold. The set
  grows with the explored area; old map points are kept.
- ``heading``: the four headings at which the rank-4 compass-deviation kernel is represented
  exactly (:data:`.heading.HEADING_INDUCING_RAD`), from the first window on.
- ``run``: one value per run seen after the first, the reference (runs are independent a
  priori: an old run's value costs one row and keeps what was learnt of it).
- ``drift``: times on a grid of ``spacing`` seconds over the last ``window`` seconds, but not
  time 0, where the anchored drift is zero; older ones leave the set (the Bui bound projects
  what they carried onto the new set).

The nuisance rows are a forced prefix of the greedy sequence, after the old map points, so the
bound VIPS compares is always the whole model's. With ``map`` alone there is no prefix to add
and the selection is the plain :class:`~..vips.selectors.Vips`, call for call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core.greedy import PivotedCholesky
from ..core.linalg import cholesky_with_jitter
from ..vips.bound import whitened_bound_prefixes
from ..vips.selectors import (
    REFERENCE_PIVOTS,
    Selection,
    SelectionProblem,
    Vips,
    register_selector,
    vips_search,
)
from .block_kernel import COMPONENT_TAGS, OBSERVATION, BlockKernel, tags_of
from .heading import HEADING_INDUCING_RAD
from .settings import check, default


def retagged(rows: Tensor, tag: int) -> Tensor:
    """``rows`` [N, W] with every tag set to ``tag`` (a copy)."""
    out = rows.clone()
    out[:, -1] = float(tag)
    return out


@dataclass(frozen=True)
class AdditiveVips:
    """VIPS over the map's candidates with the nuisance inducing rows forced (module docstring).

    Args:
        delta: VIPS's tolerance δ, as for the scalar model.
        drift_spacing: seconds between the drift's inducing times.
        drift_window: how far back [s] from the newest reading the drift keeps inducing times.
    """

    delta: float = default("vips.delta")
    drift_spacing: float = default("gam.drift_spacing")
    drift_window: float = default("gam.drift_window")
    name: str = "additive_vips"

    def __post_init__(self) -> None:
        check("vips.delta", self.delta)
        check("gam.drift_spacing", self.drift_spacing)
        check("gam.drift_window", self.drift_window)

    def to_spec(self) -> dict[str, Any]:
        return {
            "type": "additive_vips",
            "delta": self.delta,
            "drift_spacing": self.drift_spacing,
            "drift_window": self.drift_window,
        }

    def select(self, problem: SelectionProblem) -> Selection:
        kernel = problem.kernel
        if not isinstance(kernel, BlockKernel):
            raise TypeError(f"additive VIPS needs the additive block kernel; got {type(kernel)}")
        X = problem.X
        if bool((tags_of(X) != OBSERVATION).any()):
            raise ValueError("additive VIPS selects from observation rows only")
        if kernel.single:
            # An observation is its map value: the plain VIPS, its chosen rows tagged as map.
            chosen = Vips(self.delta).select(problem)
            Z = chosen.Z.clone()
            Z[:, -1] = float(COMPONENT_TAGS["map"])
            return chosen._replace(Z=Z)
        return self._select_with_nuisance(problem, kernel)

    def _select_with_nuisance(self, problem: SelectionProblem, kernel: BlockKernel) -> Selection:
        X, y, old = problem.X, problem.y, problem.old
        n = X.shape[0]
        has_old = old is not None and old.num_inducing > 0
        old_Z = old.Z if has_old else X[:0]
        prefix_Z, keep_all = self._prefix(kernel, X, old_Z)
        # The same rows: the old factor (θ_o) serves, and the rows begin with the old
        # variables, so they need no columns at them (whitened_bound_prefixes, U=None).
        begins_with_old = has_old and keep_all and prefix_Z.shape[0] == old_Z.shape[0]
        if begins_with_old:
            prefix_L = old.L
        else:
            prefix_L, _ = cholesky_with_jitter(kernel.K(prefix_Z), problem.jitter)
        candidates = retagged(X, COMPONENT_TAGS["map"])
        columns = torch.cat([X, candidates, X[:0] if begins_with_old else old_Z])
        mask = torch.zeros(columns.shape[0], dtype=torch.bool, device=X.device)
        mask[n : 2 * n] = True
        pc = PivotedCholesky(
            kernel, columns, mask, old.jitter if has_old else problem.jitter,
            prefix_Z, prefix_L, min(n, REFERENCE_PIVOTS),
        )  # fmt: skip
        kff = kernel.K_diag(X)

        def bounds_of(rows: Tensor) -> Tensor:
            return whitened_bound_prefixes(
                rows[:, :n], None if begins_with_old else rows[:, 2 * n :], y, kff,
                problem.noise_variance, old if has_old else None,
            )  # fmt: skip

        found = vips_search(pc, problem, n, bounds_of, self.delta)
        chosen = [j - n for j in pc.pivots[: found.num_added]]
        Z = torch.cat([prefix_Z, candidates[chosen]])
        return Selection(Z, found.num_added, found.reason, found.bound, found.reference,
                         found.threshold)  # fmt: skip

    def _prefix(self, kernel: BlockKernel, X: Tensor, old_Z: Tensor) -> tuple[Tensor, bool]:
        """The forced rows: the old ones still wanted (in their order), then the new nuisance
        rows; and whether every old row was kept."""
        old_tags = tags_of(old_Z)
        keep = torch.ones(old_Z.shape[0], dtype=torch.bool, device=X.device)
        new_rows = []
        d = kernel.input_dim
        zeros = X.new_zeros((1, d))
        if "heading" in kernel.names and not bool((old_tags == COMPONENT_TAGS["heading"]).any()):
            angles = torch.tensor(HEADING_INDUCING_RAD, dtype=X.dtype, device=X.device)
            new_rows.append(_rows(zeros, "heading", yaw=angles))
        if "run" in kernel.names:
            seen = old_Z[old_tags == COMPONENT_TAGS["run"], d + 1].round()
            runs = torch.unique(X[:, d + 1].round())
            # The first run is the reference: it has no offset of its own (block_kernel.py).
            fresh = runs[~torch.isin(runs, seen) & (runs != 0)]
            if fresh.numel():
                new_rows.append(_rows(zeros, "run", run=fresh))
        if "drift" in kernel.names:
            is_drift = old_tags == COMPONENT_TAGS["drift"]
            times = self.drift_times(X[:, d + 2])
            kept_times = old_Z[is_drift, d + 2]
            # Old times outside the window leave; those inside stay where they are.
            inside = kept_times >= float(times[0]) - 0.5 * self.drift_spacing
            keep[torch.nonzero(is_drift).squeeze(-1)[~inside]] = False
            fresh = times[~_isclose_any(times, kept_times[inside], 0.5 * self.drift_spacing)]
            if fresh.numel():
                new_rows.append(_rows(zeros, "drift", time=fresh))
        prefix = torch.cat([old_Z[keep], *new_rows]) if new_rows else old_Z[keep]
        return prefix, bool(keep.all())

    def drift_times(self, t: Tensor) -> Tensor:
        """The drift's inducing times [K] for a window of readings at times t [N] (seconds):
        the grid points from the window's start (or ``drift_window`` before its end, the
        later) to one step past its end."""
        t_hi = float(t.max())
        t_lo = max(float(t.min()), t_hi - self.drift_window)
        first = math.floor(t_lo / self.drift_spacing)
        last = math.ceil(t_hi / self.drift_spacing)
        # Before the window's start too, so that the earliest readings have a point either side.
        k = torch.arange(first - 1, last + 1, dtype=t.dtype, device=t.device)
        # The drift is anchored at 0 (the first reading): a point there has no variance.
        return k[k != 0] * self.drift_spacing


def _rows(
    positions: Tensor,
    name: str,
    yaw: Tensor | None = None,
    run: Tensor | None = None,
    time: Tensor | None = None,
) -> Tensor:
    """Inducing rows of one nuisance component at the given inputs (the others zero)."""
    given = next(v for v in (yaw, run, time) if v is not None)
    k = given.shape[0]
    zero = given.new_zeros(k)
    aux = [v if v is not None else zero for v in (yaw, run, time)]
    tag = given.new_full((k,), float(COMPONENT_TAGS[name]))
    return torch.cat([positions.expand(k, -1), torch.stack([*aux, tag], dim=1)], dim=1)


def _isclose_any(values: Tensor, reference: Tensor, tol: float) -> Tensor:
    """[K] whether each value is within ``tol`` of some reference value."""
    if reference.numel() == 0:
        return torch.zeros_like(values, dtype=torch.bool)
    return ((values[:, None] - reference[None, :]).abs() < tol).any(1)


register_selector("additive_vips", AdditiveVips)
