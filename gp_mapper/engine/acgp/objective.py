"""Estimators of log p(y) from a stopped Cholesky, and the differentiable fitting objective.

Bartels et al. 2023 (ACGP), App. B.2 and Remark 4. For hyperparameter fitting the evidence of
all N points is estimated by the linear extrapolation (N/M)·log p(y_{:M}) (the authors'
``ALL_POINTS``; App. B.2 and Remark 4 print (N − M)·log p(y_{:M})/M, which drops the processed
part). Its gradient at a fixed M comes from a custom backward, ∂φ/∂K_M = K_M⁻¹ − ββᵀ with
β = K_M⁻¹ y_M, reusing the factor the stopped Cholesky already computed, instead of autograd
through the blocked factorisation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import LOG_2PI, cholesky_with_jitter
from .bounds import BlockBounds


def extrapolated_log_evidence(log_density_subset: float, num_points: int, n_total: int) -> float:
    """(N/M)·log p(y_{:M}): the "biased" estimator used for fitting (App. B.2).

    Args:
        log_density_subset: log p(y_{:M}) of the first M (randomly ordered) points, nats.
        num_points: M.
        n_total: N.
    """
    return n_total / num_points * log_density_subset


def midpoint_log_evidence(bounds: BlockBounds) -> float:
    """(𝓤 + 𝓛)/2: the estimator of the theory (Thm. 3, Lemma 21)."""
    return bounds.midpoint


class SubsetDataFit(torch.autograd.Function):
    """φ = log det K_M + y_Mᵀ K_M⁻¹ y_M from a given Cholesky factor, with the closed-form backward.

    ``forward(K, y, L)``: K [M, M] the (differentiable) matrix, y [M] the targets, L [M, M] its
    lower Cholesky factor (not differentiated). The backward returns
    ``g·(K⁻¹ − ββᵀ)`` for K and ``2g·β`` for y (β = K⁻¹y); K⁻¹ is the maths here, formed by
    ``cholesky_inverse`` from L. Cost ≈ one more factorisation (App. B.2: about 2× the forward).
    """

    @staticmethod
    def forward(ctx: Any, K: Tensor, y: Tensor, L: Tensor) -> Tensor:
        beta = torch.cholesky_solve(y[:, None], L)[:, 0]
        ctx.save_for_backward(L, beta)
        return 2.0 * torch.log(torch.diagonal(L)).sum() + y @ beta

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        L, beta = ctx.saved_tensors
        grad_K = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_K = grad * (torch.cholesky_inverse(L) - torch.outer(beta, beta))
        if ctx.needs_input_grad[1]:
            grad_y = 2.0 * grad * beta
        return grad_K, grad_y, None


def subset_data_fit(K: Tensor, y: Tensor, L: Tensor | None = None) -> Tensor:
    """φ(K, y) through :class:`SubsetDataFit`; L = chol(K) is computed if not given.

    Args:
        K: symmetric positive definite [M, M] (its graph receives ∂φ/∂K).
        y: targets [M].
        L: lower Cholesky factor of K [M, M], e.g. from the stopped Cholesky.

    Returns:
        φ, a scalar tensor.
    """
    if L is None:
        L, _ = cholesky_with_jitter(K.detach(), jitter=0.0)
    return SubsetDataFit.apply(K, y, L.detach())


def subset_matrix(
    kernel: Kernel, noise_variance: Tensor, X: Tensor, diag_jitter: Tensor | None = None
) -> Tensor:
    """K_M = k(X_M, X_M) + σ²I (+ the stopped Cholesky's per-point jitter) [M, M], differentiable.

    Args:
        kernel: k(θ).
        noise_variance: σ², a scalar tensor (differentiable).
        X: the retained inputs [M, D].
        diag_jitter: what the factorisation added to each diagonal entry [M] (constant).
    """
    diag = noise_variance.expand(X.shape[0])
    if diag_jitter is not None:
        diag = diag + diag_jitter
    return kernel.K(X) + torch.diag(diag)


def acgp_objective(phi: Tensor, num_points: int, n_total: int) -> Tensor:
    """−(N/M)·φ/2 − (N/2) log 2π: the estimate of log p(y) that the fit maximises (App. B.2)."""
    return -(n_total / num_points) * 0.5 * phi - 0.5 * n_total * LOG_2PI
