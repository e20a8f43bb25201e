"""The coupled posterior in precision form, ``Σ_U⁻¹ = K_UU⁻¹ + B Bᵀ``, ``μ_U = K_UU α``.

Adam, Durrande & John 2018, Sec. 4 eq. 7 and App. C. The paper's App. C.1 prints
``A = I + Bᵀ K_FF B``; it is ``A = I_R + Bᵀ K_UU B`` (B has the inducing values' rows, and
the line above it, Σ_U = K_UU − K_UU B (I + Bᵀ K_UU B)⁻¹ Bᵀ K_UU, has K_UU). Nothing here
factors or inverts K_UU: the only factorisation is of A, and A ⪰ I.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..core.linalg import cholesky_with_jitter, logdet_from_cholesky, solve_lower, solve_upper_t
from .blocks import Blocks
from .likelihood import gaussian_expected_log_likelihood


def precision_core(Kuu: Sequence[Tensor], B: Sequence[Tensor]) -> Tensor:
    """``L_A = chol(I_R + Σ_c B_cᵀ K_c B_c)`` [R, R].

    Raises:
        NumericalError: A is not positive definite even with the jitter ladder (only on
            non-finite inputs or round-off: A ⪰ I in exact arithmetic).
    """
    R = B[0].shape[1]
    A = torch.eye(R, dtype=B[0].dtype, device=B[0].device)
    for K_c, B_c in zip(Kuu, B, strict=True):
        A = A + B_c.mT @ (K_c @ B_c)
    # A ⪰ I: try no jitter first; the ladder only guards round-off.
    L_A, _ = cholesky_with_jitter(A, 0.0)
    return L_A


def precision_kl(Kuu: Sequence[Tensor], alpha: Sequence[Tensor], L_A: Tensor) -> Tensor:
    """``KL[q(U) ‖ p(U)] = ½[log|A| + Σ_c α_cᵀ K_c α_c − R + tr(A⁻¹)]`` (App. C.2, in our form)."""
    R = L_A.shape[0]
    eye = torch.eye(R, dtype=L_A.dtype, device=L_A.device)
    trace_inv = solve_lower(L_A, eye).square().sum()  # tr(A⁻¹) = ‖L_A⁻¹‖²_F
    quad = sum((a @ (K @ a) for K, a in zip(Kuu, alpha, strict=True)), torch.zeros_like(trace_inv))
    return 0.5 * (logdet_from_cholesky(L_A) + quad - R + trace_inv)


def precision_marginals(
    blocks: Blocks, alpha: Sequence[Tensor], B: Sequence[Tensor], L_A: Tensor
) -> tuple[Tensor, Tensor]:
    """Mean and variance [N] of ρ(x) = Σ_c f_c(x): the solve is of the summed ``Σ_c B_cᵀ k_c``."""
    mean = sum(Kux.mT @ a for Kux, a in zip(blocks.Kux, alpha, strict=True))
    w = sum(B_c.mT @ Kux for B_c, Kux in zip(B, blocks.Kux, strict=True))
    V = solve_lower(L_A, w)
    var = sum(blocks.kdiag) - (V * V).sum(0)
    return mean, var


def precision_elbo(
    blocks: Blocks,
    alpha: Sequence[Tensor],
    B: Sequence[Tensor],
    y: Tensor,
    noise_variance: Tensor,
) -> Tensor:
    """The ELBO of q(U) = N(K_UU α, (K_UU⁻¹ + BBᵀ)⁻¹) with a Gaussian likelihood [nats]."""
    L_A = precision_core(blocks.Kuu, B)
    mean, var = precision_marginals(blocks, alpha, B, L_A)
    ell = gaussian_expected_log_likelihood(y, mean, var, noise_variance)
    return ell - precision_kl(blocks.Kuu, alpha, L_A)


def optimal_alpha(blocks: Blocks, y: Tensor, noise_variance: Tensor) -> tuple[Tensor, ...]:
    """α maximising the ELBO for a Gaussian likelihood (independent of B).

    ``(σ² K_UU + K_Uρ K_ρU) α = K_Uρ y`` (our derivation, scaled by σ²): a Cholesky of an
    M_tot × M_tot matrix that contains K_UU but is not K_UU; no inverse of K_UU is formed.

    Raises:
        NumericalError: the system is not positive definite even with the jitter ladder.
    """
    Phi = torch.cat(blocks.Kux, 0)  # [M_tot, N]
    S = noise_variance * torch.block_diag(*blocks.Kuu) + Phi @ Phi.mT
    L, _ = cholesky_with_jitter(S)
    alpha = solve_upper_t(L, solve_lower(L, Phi @ y))
    return tuple(torch.split(alpha, [K.shape[0] for K in blocks.Kuu]))


def default_rank(sizes: Sequence[int]) -> int:
    """R = min(M_tot, 2 · max_c M_c).

    The paper (Sec. 4) fixes R = M, but the optimal update (its eq. 6) has rank up to
    min(N, M_tot). In our measurements, on the paper's own example (Sec. 7) R = M left the ELBO
    27 nats short of the optimum and R = 2M none; on a confounded corridor R = M lost 2000.
    """
    return min(sum(sizes), 2 * max(sizes))
