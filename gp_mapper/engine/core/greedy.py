"""Incremental pivoted Cholesky: the greedy-variance order of inducing points.

The selection order of VIPS (Pescador-Barrios et al. 2024, App. B.1, after Burt et al. 2020),
built incrementally here where the authors recompute the bound for every added point.

Adding the point of largest conditional prior variance ``k(x, x) − k_bᵀ K_bb⁻¹ k_b`` is one step
of a pivoted Cholesky of the kernel matrix over a column set. The rows it builds are exactly
``L_b⁻¹ K(b, columns)``, which the bound needs, so no step is ever recomputed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import NumericalError
from .kernels import Kernel
from .linalg import Jitter, cholesky_with_jitter, jitter_scale, solve_lower

# A candidate whose conditional variance is below this fraction of the largest prior variance
# carries no new information (a duplicate, or a stationary robot): never add it, or K_bb
# becomes singular. Matches the smallest jitter rung so every pivot is above the jitter.
CONDITIONAL_VARIANCE_FLOOR = 1e-8


class PivotedCholesky:
    """Greedy-variance selection over ``columns`` with an optional forced prefix.

    Args:
        kernel: the kernel (its θ is held fixed during selection).
        columns: every input the rows are computed against [C, D].
        candidates: boolean mask [C] of columns that may be chosen as pivots.
        jitter: the jitter added to each pivot's variance (as in chol(K_bb + εI)); a float is
            relative.
        prefix_L: chol of the kernel over a forced prefix [M_a, M_a], whose inputs are
            ``prefix_Z`` [M_a, D]; the rows start as ``prefix_L⁻¹ K(prefix_Z, columns)``. If
            ``columns`` ends with ``prefix_Z``, those last columns are the prefix's own
            variables (their rows are ``prefix_Lᵀ``).
        max_new: the most pivots that will be added (sizes the row buffer).
    """

    def __init__(
        self,
        kernel: Kernel,
        columns: Tensor,
        candidates: Tensor,
        jitter: float | Jitter,
        prefix_Z: Tensor | None = None,
        prefix_L: Tensor | None = None,
        max_new: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.columns = columns
        self.prior_diag = kernel.K_diag(columns)
        # From the diagonal alone: the same ε as cholesky_with_jitter adds to K_bb.
        scale = float(jitter_scale(self.prior_diag.detach()))
        self._eps = float(Jitter.coerce(jitter).amount(scale))
        self._floor = CONDITIONAL_VARIANCE_FLOOR * float(self.prior_diag.detach().max())
        self.candidates = candidates.clone()
        self.available = candidates.clone()
        new = int(candidates.sum()) if max_new is None else min(int(candidates.sum()), max_new)
        num_prefix = 0 if prefix_Z is None else prefix_Z.shape[0]
        self._capacity = new + num_prefix
        # The buffer grows by doubling: most sequences stop far short of the capacity.
        self._rows = columns.new_zeros((min(self._capacity, num_prefix + 64), columns.shape[0]))
        self.pivots: list[int] = []
        self.num_prefix = 0
        self.diag = self.prior_diag.clone()
        if prefix_Z is not None and prefix_Z.shape[0] > 0:
            R = solve_lower(prefix_L, kernel.K(prefix_Z, columns))
            # Columns ending in the prefix points are those inducing variables, jitter and all
            # (bound.factors): their covariance with the prefix is prefix_L prefix_Lᵀ, so their
            # rows here are exactly prefix_Lᵀ. Only there: a reading at an inducing point's
            # place is f there, without the jitter.
            M_a = prefix_Z.shape[0]
            if columns.shape[0] >= M_a and torch.equal(columns[-M_a:], prefix_Z):
                R[:, -M_a:] = prefix_L.mT
            self.num_prefix = prefix_Z.shape[0]
            self._rows[: self.num_prefix] = R
            self.diag = self.diag - (R * R).sum(0)

    @property
    def size(self) -> int:
        """Rows built so far: the forced prefix plus the pivots chosen."""
        return self.num_prefix + len(self.pivots)

    def rows(self, size: int | None = None) -> Tensor:
        """``L_b⁻¹ K(b, columns)`` for the first ``size`` inducing points [size, C]."""
        return self._rows[: self.size if size is None else size]

    def saturated_rows(self, num_columns: int | None = None) -> Tensor | None:
        """Rows ``L_b⁻¹ K(b, columns)`` for b = the prefix plus every candidate, jitter included,
        over the first ``num_columns`` columns (all by default: a caller that needs only the
        data's columns saves the solve over the candidates').

        The bound at these rows is the most the greedy sequence can reach under this jitter: L*
        as the authors compute it (the SGPR bound with Z = X, in their code). Built from the Schur
        complement of the prefix, so O(C³ + C² M_a) and independent of the pivots taken; None if
        that complement is not positive definite even with the jitter ladder.
        """
        idx = torch.nonzero(self.candidates).squeeze(-1)
        R_p = self._rows[: self.num_prefix]
        cross = self.kernel.K(self.columns[idx], self.columns) - R_p[:, idx].mT @ R_p
        schur = cross[:, idx] + self._eps * torch.eye(
            idx.shape[0], dtype=cross.dtype, device=cross.device
        )
        try:
            L_s, _ = cholesky_with_jitter(0.5 * (schur + schur.mT), jitter=0.0)
        except NumericalError:
            return None
        end = cross.shape[1] if num_columns is None else num_columns
        return torch.cat([R_p[:, :end], solve_lower(L_s, cross[:, :end])])

    def residual_trace(self) -> float:
        """Σ over candidate columns of the conditional variance: tr(K_ff − Q_ff) on the pool."""
        return float(torch.clamp(self.diag[self.available], min=0.0).sum())

    def next_pivot(self) -> int | None:
        """The available column of largest conditional variance, or None if none is informative."""
        if self.diag.numel() == 0:
            return None
        scores = torch.where(self.available, self.diag, torch.full_like(self.diag, -torch.inf))
        best, j = torch.max(scores, 0)
        # One read from the device per pivot (on a GPU each read waits for the queue).
        value, j = torch.stack([best, j.to(best.dtype)]).tolist()
        if value <= self._floor:  # -inf where no column is left
            return None
        return int(j)

    def add(self, j: int) -> None:
        """Append column ``j`` to the inducing set (one rank-one Cholesky step)."""
        m = self.size
        if m == self._rows.shape[0]:
            grown = self._rows.new_zeros((min(self._capacity, 2 * m), self._rows.shape[1]))
            grown[:m] = self._rows
            self._rows = grown
        ell = self._rows[:m, j]
        s = torch.sqrt(torch.clamp(self.diag[j], min=0.0) + self._eps)
        k_col = self.kernel.K(self.columns, self.columns[j : j + 1])[:, 0]
        e = (k_col - self._rows[:m].mT @ ell) / s
        self._rows[m] = e
        self.diag = self.diag - e * e
        self.available[j] = False
        self.pivots.append(j)

    def extend_to(self, size: int) -> int:
        """Add greedy pivots until ``size`` rows exist or no informative candidate is left."""
        while self.size < min(size, self._capacity):
            j = self.next_pivot()
            if j is None:
                break
            self.add(j)
        return self.size
