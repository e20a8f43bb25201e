"""Mean-field and full coupled posteriors, whitened: ``U_c = L_c V_c`` with ``L_c = chol(K_c)``.

``q(V) = N(m, P⁻¹)`` over the stacked whitened values, parameterised by the factor ``L_P`` of
its precision P: full (``full_coupled``, Adam 2017) or block-diagonal by component
(``mean_field``, Saul et al. 2016). For a Gaussian likelihood both optima are closed form:
``P = I + σ⁻² W Wᵀ`` (the full matrix, or its diagonal blocks) and ``m = σ⁻² P_full⁻¹ W y``,
``W = L⁻¹ K_Uρ``; the full one gives Titsias' collapsed bound (Titsias 2009).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, pairwise

import torch
from torch import Tensor

from ..core.linalg import (
    LOG_2PI,
    Jitter,
    cholesky_with_jitter,
    logdet_from_cholesky,
    solve_lower,
    solve_upper_t,
)
from .blocks import Blocks
from .likelihood import gaussian_expected_log_likelihood


def whitened_features(blocks: Blocks, jitter: Jitter) -> tuple[tuple[Tensor, ...], Tensor]:
    """``L_c = chol(K_c)`` (jitter ladder) and the stacked ``W = L⁻¹ K_Uρ`` [M_tot, N].

    Raises:
        NumericalError: a K_c is not positive definite even with the jitter ladder.
    """
    L = tuple(cholesky_with_jitter(K, jitter)[0] for K in blocks.Kuu)
    W = torch.cat([solve_lower(L_c, Kux) for L_c, Kux in zip(L, blocks.Kux, strict=True)], 0)
    return L, W


def whitened_marginals(
    W: Tensor, kdiag: Sequence[Tensor], mean: Tensor, L_P: Tensor
) -> tuple[Tensor, Tensor]:
    """Mean and variance [N] of ρ(x): ``Σ_c k_c − ‖W‖² + ‖L_P⁻¹ W‖²`` per column."""
    G = solve_lower(L_P, W)
    var = sum(kdiag) - (W * W).sum(0) + (G * G).sum(0)
    return W.mT @ mean, var


def whitened_kl(mean: Tensor, L_P: Tensor) -> Tensor:
    """``KL[N(m, P⁻¹) ‖ N(0, I)] = ½[tr(P⁻¹) + mᵀm − M + log|P|]``."""
    M = mean.shape[0]
    eye = torch.eye(M, dtype=mean.dtype, device=mean.device)
    trace_inv = solve_lower(L_P, eye).square().sum()
    return 0.5 * (trace_inv + mean @ mean - M + logdet_from_cholesky(L_P))


def whitened_elbo(
    W: Tensor, kdiag: Sequence[Tensor], mean: Tensor, L_P: Tensor, y: Tensor, noise_variance: Tensor
) -> Tensor:
    """The ELBO of a whitened Gaussian q(V) with a Gaussian likelihood [nats]."""
    mu, var = whitened_marginals(W, kdiag, mean, L_P)
    return gaussian_expected_log_likelihood(y, mu, var, noise_variance) - whitened_kl(mean, L_P)


def optimal_whitened_q(
    W: Tensor, sizes: Sequence[int], y: Tensor, noise_variance: Tensor, mean_field: bool
) -> tuple[Tensor, Tensor]:
    """The ELBO's optimum (m, L_P) for a Gaussian likelihood.

    Args:
        W: [M_tot, N] whitened features.
        sizes: M_c per component (the blocks of the mean-field precision).
        mean_field: block-diagonal precision (each block its own optimum) instead of the full.

    The mean is the same for both families: with a Gaussian likelihood the ELBO's mean and
    covariance terms separate.
    """
    M = W.shape[0]
    P = torch.eye(M, dtype=W.dtype, device=W.device) + (W @ W.mT) / noise_variance
    L_full, _ = cholesky_with_jitter(P, 0.0)  # P ⪰ I: the ladder only guards round-off
    mean = solve_upper_t(L_full, solve_lower(L_full, W @ y)) / noise_variance
    if not mean_field:
        return mean, L_full
    edges = [0, *accumulate(sizes)]
    diag_factors = [cholesky_with_jitter(P[a:b, a:b], 0.0)[0] for a, b in pairwise(edges)]
    return mean, torch.block_diag(*diag_factors)


def titsias_bound(W: Tensor, kdiag: Sequence[Tensor], y: Tensor, noise_variance: Tensor) -> Tensor:
    """``log N(y | 0, Q + σ²I) − tr(K − Q)/2σ²`` with ``Q = Wᵀ W`` (Woodbury, O(N M²))."""
    N, M = y.shape[0], W.shape[0]
    P = torch.eye(M, dtype=W.dtype, device=W.device) + (W @ W.mT) / noise_variance
    L_P, _ = cholesky_with_jitter(P, 0.0)
    c = solve_lower(L_P, W @ y) / noise_variance
    quad = (y @ y) / noise_variance - c @ c
    logdet = N * torch.log(noise_variance) + logdet_from_cholesky(L_P)
    trace = (sum(kdiag) - (W * W).sum(0)).sum()
    return -0.5 * (N * LOG_2PI + logdet + quad) - 0.5 * trace / noise_variance
