"""Cholesky factorisation with a jitter ladder, and the triangular solves built on it.

No explicit inverses: every ``A⁻¹ B`` is a triangular or Cholesky solve.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .errors import NumericalError

# Relative jitters tried in turn, each times mean(diag K). The first rung is always added, so that
# the factor is a smooth function of the hyperparameters during a fit; it is about the authors'
# absolute 1e-6 for a kernel of variance ~500 (the magnetometer model). Later rungs only on failure.
LOG_2PI = math.log(2.0 * math.pi)

JITTER_LADDER: tuple[float, ...] = (1e-8, 1e-6, 1e-4)


def jitter_scale(K: Tensor) -> Tensor:
    """The scale the relative jitters multiply: mean(diag K), floored at 1 for an all-zero K."""
    if K.shape[-1] == 0:
        return torch.ones((), dtype=K.dtype, device=K.device)
    return torch.clamp(torch.diagonal(K, dim1=-2, dim2=-1).mean(), min=torch.finfo(K.dtype).tiny)


def cholesky_with_jitter(K: Tensor, jitter: float = JITTER_LADDER[0]) -> tuple[Tensor, float]:
    """Lower Cholesky factor of ``K + j·mean(diag K)·I``, climbing the ladder from ``jitter``.

    Args:
        K: symmetric matrix [M, M].
        jitter: the first relative jitter to try; larger rungs of JITTER_LADDER follow on failure.

    Returns:
        (L, relative jitter used), L [M, M] lower triangular.

    Raises:
        NumericalError: K has non-finite entries or is not positive definite at any rung.
    """
    M = K.shape[-1]
    if M == 0:
        return K.clone(), jitter
    if not torch.isfinite(K).all():
        raise NumericalError(f"matrix of size {M} has non-finite entries")
    scale = jitter_scale(K).detach()
    eye = torch.eye(M, dtype=K.dtype, device=K.device)
    rungs = (jitter, *tuple(j for j in JITTER_LADDER if j > jitter))
    for rung in rungs:
        L, info = torch.linalg.cholesky_ex(K + (rung * scale) * eye)
        if int(info) == 0:
            return L, rung
    raise NumericalError(
        f"matrix of size {M} is not positive definite even with relative jitter {rungs[-1]:g}"
    )


def solve_lower(L: Tensor, B: Tensor) -> Tensor:
    """``L⁻¹ B`` for lower-triangular L [M, M] and B [M, K] (or [M])."""
    if B.ndim == 1:
        return torch.linalg.solve_triangular(L, B[:, None], upper=False)[:, 0]
    return torch.linalg.solve_triangular(L, B, upper=False)


def solve_upper_t(L: Tensor, B: Tensor) -> Tensor:
    """``L⁻ᵀ B`` for lower-triangular L [M, M] and B [M, K] (or [M])."""
    if B.ndim == 1:
        return torch.linalg.solve_triangular(L.mT, B[:, None], upper=True)[:, 0]
    return torch.linalg.solve_triangular(L.mT, B, upper=True)


def logdet_from_cholesky(L: Tensor) -> Tensor:
    """``log|L Lᵀ|`` from its Cholesky factor."""
    return 2.0 * torch.log(torch.diagonal(L)).sum()


def gaussian_log_density(y: Tensor, mean: Tensor, cov: Tensor) -> Tensor:
    """``log N(y; mean, cov)`` for a full covariance [N, N] (jittered Cholesky)."""
    L, _ = cholesky_with_jitter(cov, jitter=0.0)
    r = solve_lower(L, y - mean)
    n = y.shape[0]
    return -0.5 * (n * LOG_2PI + r @ r) - torch.log(torch.diagonal(L)).sum()
