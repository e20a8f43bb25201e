"""The blocked, row-wise Cholesky of K + σ²I that stops once the evidence is pinned down.

Bartels et al. 2023 (ACGP), Algorithm 1 and Sec. 3.5. Rows of the kernel matrix are evaluated
only when their block is reached, so unprocessed data are never touched; the factor grows
geometrically instead of being preallocated at N_max² as in the paper (our choice: memory for the
points actually kept). After each block's downdate, and
before its factorisation (the least parallel step, skipped if the run stops there), the bounds of
:mod:`.bounds` are evaluated. After a stop the last block is still factorised, so the retained
exact subset is every point seen, M = t (the experiments' model code does the same).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import LOG_2PI, Jitter, jitter_scale
from ..errors import NumericalError
from .bounds import (
    MIN_BLOCK_FOR_BOUNDS,
    BlockBounds,
    block_statistics,
    evaluate_bounds,
    should_stop,
)

# The factor's storage starts at this many times the first check's size (m0 + m) and doubles when
# full: O(M²) memory for the points actually processed, not O(N_max²).
INITIAL_CAPACITY_BLOCKS = 2


class StoppedCholesky(NamedTuple):
    """The outcome of one run of :func:`stopped_cholesky`.

    Attributes:
        num_points: M, the points factorised (the retained exact subset is X[:M], y[:M]).
        stopped: the stopping rule fired (False: all materialised points were used).
        n_total: N, the data-set size the bounds extrapolate to.
        logdet: D_M = log det(K_M + σ²I) = 2 Σ log L_ii.
        quad: Q_M = y_Mᵀ(K_M + σ²I)⁻¹y_M = ‖α‖².
        log_density: log p(y_{:M}) = −½(D_M + Q_M + M log 2π), nats.
        history: the bounds at each checked block, in order.
        L: lower Cholesky factor of K_M + σ²I (+ any jitter) [M, M].
        alpha: L⁻¹ y_M [M].
        diag_jitter: what was added to each diagonal entry [M] (zeros unless a block needed it).
    """

    num_points: int
    stopped: bool
    n_total: int
    logdet: float
    quad: float
    log_density: float
    history: tuple[BlockBounds, ...]
    L: Tensor
    alpha: Tensor
    diag_jitter: Tensor

    @property
    def exact(self) -> bool:
        """Every one of the N points was factorised: D_M, Q_M are the full-data values."""
        return self.num_points == self.n_total

    @property
    def last_bounds(self) -> BlockBounds | None:
        return self.history[-1] if self.history else None


def _factor_block(B: Tensor, scale: Tensor, jitter: Jitter) -> tuple[Tensor, float]:
    """Cholesky of a downdated block B [m, m]; the jitter ladder only on failure.

    Args:
        B: the symmetric block (k_s + σ²I).
        scale: mean of the block's prior diagonal, which a relative jitter multiplies.
        jitter: the first rung (0 by default: the noise already keeps B positive definite).

    Returns:
        (the lower factor [m, m], the amount added to the diagonal).

    Raises:
        NumericalError: B is non-finite or not positive definite at any rung.
    """
    if not torch.isfinite(B).all():
        raise NumericalError(f"downdated block of size {B.shape[0]} has non-finite entries")
    eye = torch.eye(B.shape[0], dtype=B.dtype, device=B.device)
    rungs = jitter.rungs()
    for rung in rungs:
        amount = float(rung.amount(scale))
        L, info = torch.linalg.cholesky_ex(B + amount * eye if amount else B)
        if int(info) == 0:
            return L, amount
    raise NumericalError(
        f"downdated block of size {B.shape[0]} is not positive definite even with {rungs[-1]}"
    )


def stopped_cholesky(
    kernel: Kernel,
    noise_variance: float,
    X: Tensor,
    y: Tensor,
    block_size: int,
    *,
    initial_block_size: int | None = None,
    rel_tol: float = 0.01,
    abs_tol: float = 0.0,
    max_points: int | None = None,
    n_total: int | None = None,
    jitter: Jitter | None = None,
) -> StoppedCholesky:
    """Factorise K + σ²I block by block over randomly ordered data until the bounds meet.

    The data must already be in random order (the bounds assume i.i.d. points); the caller keeps the
    permutation fixed so that subsets are nested across calls (as the authors' code does). No
    gradient flows through this function: it is evaluated under ``torch.no_grad``.

    Args:
        kernel: prior covariance k.
        noise_variance: σ² (> 0).
        X: inputs [N_rows, D], permuted.
        y: targets [N_rows] (zero prior mean: subtract a mean first).
        block_size: m, the points per block and the sample size of the bound estimators (≥ 2).
        initial_block_size: m0, factorised before the first check (default m); the smallest
            possible subset is m0 + m.
        rel_tol: r, the target relative error of the evidence (0: never stop on it).
        abs_tol: stop when 𝓤 − 𝓛 is below this (nats; 0: never).
        max_points: N_max, the most points to factorise (default all rows).
        n_total: N, the size the bounds extrapolate to (default N_rows). It may exceed the rows
            given, as in the paper's synthetic experiment (N = 10¹² with 10⁴ rows materialised).
        jitter: first jitter of each block's factorisation; larger rungs on failure (default: no
            jitter first, then the relative ladder of ``core.linalg``).

    Returns:
        :class:`StoppedCholesky`.

    Raises:
        ValueError: bad shapes or settings.
        NumericalError: a block stayed non-positive-definite through the jitter ladder.
    """
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"expected X [N, D] and y [N]; got {tuple(X.shape)}, {tuple(y.shape)}")
    rows = X.shape[0]
    m = int(block_size)
    m0 = m if initial_block_size is None else int(initial_block_size)
    N = rows if n_total is None else int(n_total)
    n_max = rows if max_points is None else min(int(max_points), rows)
    if m < MIN_BLOCK_FOR_BOUNDS:
        raise ValueError(f"block_size must be at least {MIN_BLOCK_FOR_BOUNDS}, got {m}")
    if m0 < 1:
        raise ValueError(f"initial_block_size must be at least 1, got {m0}")
    if n_max > N:
        raise ValueError(f"n_total {N} is smaller than the {n_max} points to factorise")
    if n_max < 1:
        raise ValueError("no points to factorise")
    if not (noise_variance > 0.0 and math.isfinite(noise_variance)):
        raise ValueError(f"noise_variance must be positive and finite, got {noise_variance}")
    if rel_tol < 0.0 or abs_tol < 0.0:
        raise ValueError(f"tolerances must be non-negative, got r={rel_tol}, abs={abs_tol}")
    jitter = Jitter(0.0) if jitter is None else jitter
    with torch.no_grad():
        return _run(kernel, noise_variance, X, y, m, m0, N, n_max, rel_tol, abs_tol, jitter)


def _run(
    kernel: Kernel,
    s2: float,
    X: Tensor,
    y: Tensor,
    m: int,
    m0: int,
    N: int,
    n_max: int,
    rel_tol: float,
    abs_tol: float,
    jitter: Jitter,
) -> StoppedCholesky:
    dtype, device = X.dtype, X.device
    capacity = min(n_max, INITIAL_CAPACITY_BLOCKS * (m0 + m))
    A = torch.zeros(capacity, capacity, dtype=dtype, device=device)
    alpha = torch.zeros(capacity, dtype=dtype, device=device)
    added = torch.zeros(n_max, dtype=dtype, device=device)

    def block_prior(lo: int, hi: int) -> tuple[Tensor, Tensor]:
        K = kernel.K(X[lo:hi])
        diag = torch.diagonal(K)
        return K + s2 * torch.eye(hi - lo, dtype=dtype, device=device), jitter_scale(diag + s2)

    # The first block: factorised without a check (there is nothing to condition on).
    t = min(m0, n_max)
    B, scale = block_prior(0, t)
    L0, amount = _factor_block(B, scale, jitter)
    A[:t, :t] = L0
    added[:t] = amount
    alpha[:t] = torch.linalg.solve_triangular(L0, y[:t, None], upper=False)[:, 0]
    logdet = 2.0 * float(torch.log(torch.diagonal(L0)).sum())
    quad = float((alpha[:t] ** 2).sum())
    s = t
    history: list[BlockBounds] = []
    stopped = False
    while s < n_max:
        t = min(s + m, n_max)
        if t > A.shape[0]:
            A, alpha = _grow(A, alpha, min(n_max, max(t, 2 * A.shape[0])))
        L_s = A[:s, :s]
        # T = k(X[s:t], X[:s]) L_s⁻ᵀ: the block's rows of the factor (TRSM).
        T = torch.linalg.solve_triangular(L_s.mT, kernel.K(X[s:t], X[:s]), upper=True, left=False)
        B, scale = block_prior(s, t)
        B = B - T @ T.mT  # the downdate: k_s(X_b, X_b) + σ²I
        e = y[s:t] - T @ alpha[:s]  # residuals y_j − m_s(x_j)
        A[s:t, :s] = T
        if t - s >= MIN_BLOCK_FOR_BOUNDS:
            stats = block_statistics(torch.diagonal(B), torch.diagonal(B, -1), e, s2)
            bounds = evaluate_bounds(stats, s, t, logdet, quad, s2, N)
            history.append(bounds)
            stopped = should_stop(bounds, rel_tol, abs_tol)
        L_b, amount = _factor_block(B, scale, jitter)
        A[s:t, s:t] = L_b
        added[s:t] = amount
        alpha[s:t] = torch.linalg.solve_triangular(L_b, e[:, None], upper=False)[:, 0]
        logdet += 2.0 * float(torch.log(torch.diagonal(L_b)).sum())
        quad += float((alpha[s:t] ** 2).sum())
        s = t
        if stopped:
            break
    log_density = -0.5 * (logdet + quad + s * LOG_2PI)
    if not math.isfinite(log_density):
        raise NumericalError(f"log density of the {s}-point subset is not finite")
    return StoppedCholesky(
        s,
        stopped,
        N,
        logdet,
        quad,
        log_density,
        tuple(history),
        A[:s, :s].clone() if s < A.shape[0] else A,
        alpha[:s].clone() if s < alpha.shape[0] else alpha,
        added[:s].clone(),
    )


def _grow(A: Tensor, alpha: Tensor, capacity: int) -> tuple[Tensor, Tensor]:
    """Copy the factor and α into larger zeroed storage [capacity, capacity], [capacity]."""
    n = A.shape[0]
    bigger = torch.zeros(capacity, capacity, dtype=A.dtype, device=A.device)
    bigger[:n, :n] = A
    longer = torch.zeros(capacity, dtype=alpha.dtype, device=alpha.device)
    longer[:n] = alpha
    return bigger, longer
