"""The window's neighbourhood: where θ is fitted once the map is large.

Every evaluation of the online bound costs O(N M² + M³), so on a map of thousands of inducing
points one L-BFGS fit of θ takes many minutes, during which a live stream piles up. With a
stationary kernel of finite range, a window's data only correlate with the inducing points
near it. The fit then runs on the bound of a smaller problem: the new inducing points within
the kernel's range of the window, and the carried posterior's *marginal* over the old points
within that range (exact: marginalising a Gaussian is a sub-block of its moments). The far
points' share of the bound, the old data's evidence there under the new θ, is left out: θ is
fitted on the data near the window, old and new. The committed posterior still uses every
inducing point at the fitted θ.

The marginal is brought back to the whitened natural form of :class:`CarriedPosterior` once
per fit, O(M² S + S³) for S local points, so each bound evaluation of the fit costs
O(N S² + S³).

The neighbourhood is capped: when it holds more than half the map, or more points than the
threshold itself, the fit takes the threshold's number of points nearest the window (the
whole map while it is no larger). A fit therefore never costs more than a whole-map fit at the
threshold, whatever θ it starts from: a lengthscale grown long (the kernel's range tens of
metres) would otherwise make most of a large map "near" every window.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import cholesky_with_jitter, solve_lower
from .posterior import CarriedPosterior

# Inducing points whose correlation with every reading of the window is below this fraction of
# the kernel variance stay out of the fit's problem (Matérn-5/2: ~4.3 lengthscales).
LOCAL_FIT_CUTOFF = 1e-3
# A neighbourhood holding more than this fraction of the map saves too little: the fit takes
# the points nearest the window, as many as the threshold (the whole map up to it).
LOCAL_FIT_MAX_FRACTION = 0.5
# Distances are computed against this many readings at a time (memory, not accuracy).
_CHUNK = 4096


class FitProblem(NamedTuple):
    """The inducing inputs and carried posterior the fit's bound is evaluated on."""

    Z: Tensor  # [S_b, D]
    old: CarriedPosterior | None
    local: bool  # False: the whole map (the neighbourhood would not have been smaller)

    @property
    def empty(self) -> bool:
        """No inducing point within the kernel's range of the window: nothing near it for θ
        to be fitted on (a map at its cap where the robot walks on beyond its points)."""
        return self.local and self.Z.shape[0] == 0


def distance_to(points: Tensor, X: Tensor) -> Tensor:
    """Distance [P] from each of ``points`` to its nearest row of X (Euclidean, all columns)."""
    out = torch.full((points.shape[0],), torch.inf, dtype=points.dtype, device=points.device)
    if points.shape[0] == 0:
        return out
    for start in range(0, X.shape[0], _CHUNK):
        d = torch.cdist(points, X[start : start + _CHUNK])
        out = torch.minimum(out, d.min(1).values)
    return out


def marginal(old: CarriedPosterior, keep: Tensor) -> CarriedPosterior | None:
    """The carried posterior's marginal over the inducing points ``keep`` (a mask [M_a]).

    ``q(a) = N(L D⁻¹ v, L D⁻¹ Lᵀ)`` gives the block's moments ``m_S = L_S D⁻¹ v`` and
    ``Σ_S = L_S D⁻¹ L_Sᵀ`` (L_S: L's rows S). The old prior over a_S is ``L_S L_Sᵀ``, the
    block of K + εI, so ``L' = chol(L_S L_Sᵀ)`` needs no kernel. Then ``D' = L'ᵀ Σ_S⁻¹ L'``
    (⪰ I: the posterior is tighter than the prior) and ``v' = D' L'⁻¹ m_S``.

    Returns:
        The marginal, or None if ``keep`` is empty.
    """
    idx = torch.nonzero(keep).squeeze(-1)
    if idx.numel() == 0:
        return None
    L_S = old.L[idx]  # [S, M]
    B = solve_lower(old.L_D, L_S.mT)  # L_D⁻¹ L_Sᵀ [M, S]
    w = solve_lower(old.L_D, old.v)
    mean = B.mT @ w
    cov = B.mT @ B
    prior = L_S @ L_S.mT
    L_new, _ = cholesky_with_jitter(0.5 * (prior + prior.mT), jitter=0.0)
    L_cov, _ = cholesky_with_jitter(0.5 * (cov + cov.mT), old.jitter)
    G = solve_lower(L_cov, L_new)  # L_Σ⁻¹ L'
    D = G.mT @ G
    D = 0.5 * (D + D.mT)
    # Round-off can leave D a little below I along directions the data never reached.
    eye = torch.eye(D.shape[0], dtype=D.dtype, device=D.device)
    evals, evecs = torch.linalg.eigh(D - eye)
    P = (evecs * torch.clamp(evals, min=0.0)) @ evecs.mT
    P = 0.5 * (P + P.mT)
    L_D, _ = cholesky_with_jitter(eye + P, jitter=0.0)
    v = (eye + P) @ solve_lower(L_new, mean)
    return CarriedPosterior(old.Z[idx], L_new, P, v, L_D, old.jitter)


def local_fit_problem(
    kernel: Kernel, Z: Tensor, X: Tensor, old: CarriedPosterior | None, min_inducing: int
) -> FitProblem:
    """The problem θ is fitted on: the window's neighbourhood once the map has
    ``min_inducing`` points (0: never) and the kernel has a finite range, else everything;
    at most ``min_inducing`` points of each set, the nearest the window (module docstring).

    Args:
        kernel: the kernel at the θ the fit starts from (sets the range).
        Z: the window's new inducing inputs [M_b, D].
        X: the window's inputs [N, D].
        old: the carried posterior before the window.
        min_inducing: the map size from which the neighbourhood is used, and the most points
            it holds [points].
    """
    whole = FitProblem(Z, old, False)
    if min_inducing <= 0 or Z.shape[0] < min_inducing:
        return whole
    radius = kernel.negligible_distance(LOCAL_FIT_CUTOFF)
    if radius is None:
        return whole
    d_b = distance_to(Z, X)
    near_b = d_b <= radius
    num_near = int(near_b.sum())
    if num_near == 0:
        # Not the whole map: its far points' evidence is what a local fit leaves out, and at
        # a map's cap that fit is O(M³) per step (minutes at M 2000) for a window it cannot use.
        return FitProblem(Z[near_b], None, True)
    capped = num_near > LOCAL_FIT_MAX_FRACTION * Z.shape[0] or num_near > min_inducing
    if capped and Z.shape[0] <= min_inducing:
        return whole
    local_old = None
    if old is not None and old.num_inducing > 0:
        d_a = distance_to(old.Z, X)
        local_old = marginal(old, nearest(d_a, min_inducing) if capped else d_a <= radius)
    return FitProblem(Z[nearest(d_b, min_inducing) if capped else near_b], local_old, True)


def nearest(distance: Tensor, k: int) -> Tensor:
    """Mask [P] of the ``k`` smallest ``distance`` (ties in index order: inducing points on the
    window's own readings are all at 0)."""
    order = torch.sort(distance, stable=True).indices[:k]
    mask = torch.zeros(distance.shape[0], dtype=torch.bool, device=distance.device)
    mask[order] = True
    return mask
