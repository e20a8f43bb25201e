"""The CaGP training loss: the ELBO of Wenger et al. 2024, eq. 11, in a stable form.

The stable form is ours, the same value as eq. 11 when the actions have orthonormal columns.

For actions with orthonormal columns (``SᵀS = I``, as every :class:`~.actions.Actions` has),
with ``G = SᵀK̂S = SᵀKS + σ²I = LLᵀ``, ``z = Sᵀ(y − μ)``, ``ṽ = G⁻¹z`` and
``A = L⁻¹(KS)ᵀ``::

    ℓ_ELBO = ½ [ (‖y − μ − KSṽ‖² + tr K − ‖A‖_F²)/σ²
                 + (N − I) log σ² + N log 2π
                 + zᵀṽ − σ²‖ṽ‖²                 (= ṽᵀSᵀKSṽ)
                 − I + σ² ‖L⁻¹‖_F²               (= −tr(G⁻¹SᵀKS))
                 + 2 Σ log L_jj ]                 (log det SᵀS = 0)

ℓ_ELBO = −E_q log p(y | f) + KL(q ‖ p(f)) ≥ −log p(y | θ), with equality when S has rank N (Sec. 3,
Lemma S3). It has an explicit squared error on all of y, which is why it trains well; the
projected-data NLL −log N(Sᵀy; ·) (eq. 9; Figs. S1–S2) generalises badly and is deliberately not
offered.

The i × i Gram is factored in float64 whatever the working dtype (the reference code's
practice), with the engine's jitter ladder.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import (
    JITTER_LADDER,
    LOG_2PI,
    Jitter,
    cholesky_with_jitter,
    solve_lower,
    solve_upper_t,
)
from .actions import Actions
from .kernel_actions import DEFAULT_CHUNK

GRAM_DTYPE = torch.float64


class Elbo(NamedTuple):
    """The loss and the factors the posterior reuses.

    Attributes:
        loss: ℓ_ELBO [nats] (a scalar; ≥ −log p(y | θ)); divide by N for the per-datum loss.
        L: chol(SᵀK̂S) [I, I], float64.
        v_tilde: ṽ = (SᵀK̂S)⁻¹Sᵀ(y − μ) [I], float64.
        jitter: the jitter the factorisation needed.
    """

    loss: Tensor
    L: Tensor
    v_tilde: Tensor
    jitter: Jitter


def gram_factor(
    StKS: Tensor, noise_variance: Tensor, jitter: float | Jitter = JITTER_LADDER[0]
) -> tuple[Tensor, Jitter]:
    """chol(SᵀKS + σ²I) in float64, symmetrised first (KS is computed in chunks).

    Raises:
        NumericalError: not positive definite on any rung of the jitter ladder.
    """
    G = StKS.to(GRAM_DTYPE)
    G = 0.5 * (G + G.mT)
    eye = torch.eye(G.shape[0], dtype=GRAM_DTYPE, device=G.device)
    return cholesky_with_jitter(G + noise_variance.to(GRAM_DTYPE) * eye, jitter)


def cagp_elbo(
    KS: Tensor,
    StKS: Tensor,
    z: Tensor,
    residual: Tensor,
    trace_K: Tensor,
    noise_variance: Tensor,
    jitter: float | Jitter = JITTER_LADDER[0],
) -> Elbo:
    """ℓ_ELBO(θ, S) of eq. 11, stable form (the module docstring), for ``SᵀS = I``.

    Args:
        KS: K S [N, I].
        StKS: Sᵀ K S [I, I].
        z: Sᵀ(y − μ) [I].
        residual: y − μ [N].
        trace_K: tr K = Σ_j k(x_j, x_j) (a scalar).
        noise_variance: σ² (a scalar tensor).
        jitter: first jitter of the Gram's Cholesky.

    Returns:
        The loss in nats (float64) with the Gram factor and ṽ.

    Raises:
        NumericalError: the Gram is not positive definite.
    """
    n, i = KS.shape
    L, used = gram_factor(StKS, noise_variance, jitter)
    s2 = noise_variance.to(GRAM_DTYPE)
    KS64 = KS.to(GRAM_DTYPE)
    z64 = z.to(GRAM_DTYPE)
    v_tilde = solve_upper_t(L, solve_lower(L, z64))
    misfit = residual.to(GRAM_DTYPE) - KS64 @ v_tilde
    A = solve_lower(L, KS64.mT)
    eye = torch.eye(i, dtype=GRAM_DTYPE, device=L.device)
    L_inv = solve_lower(L, eye)  # ‖L⁻¹‖_F² = tr G⁻¹, by a triangular solve, no inverse
    expected_fit = (misfit @ misfit + trace_K.to(GRAM_DTYPE) - (A * A).sum()) / s2
    loss = 0.5 * (
        expected_fit
        + (n - i) * torch.log(s2)
        + n * LOG_2PI
        + z64 @ v_tilde
        - s2 * (v_tilde @ v_tilde)
        - i
        + s2 * (L_inv * L_inv).sum()
        + 2.0 * torch.log(torch.diagonal(L)).sum()
    )
    return Elbo(loss, L, v_tilde, used)


def evaluate_elbo(
    kernel: Kernel,
    noise_variance: Tensor,
    X: Tensor,
    y: Tensor,
    actions: Actions,
    *,
    chunk: int = DEFAULT_CHUNK,
    jitter: float | Jitter = JITTER_LADDER[0],
) -> Elbo:
    """ℓ_ELBO for a zero prior mean (model an offset with a constant kernel part).

    One chunked ``K S``; everything else is O(N·I) or O(I³). Differentiable in θ and in the
    action entries.

    Args:
        kernel: prior kernel.
        noise_variance: σ² (a scalar tensor).
        X: inputs [N, D]; y: targets [N].
        actions: S with orthonormal columns.
        chunk: rows per kernel block of the product.
        jitter: first jitter of the Gram's Cholesky.
    """
    KS = actions.kernel_product(kernel, X, chunk)
    StKS = actions.transpose_apply(KS)
    z = actions.transpose_apply(y)
    trace_K = kernel.K_diag(X).sum()
    return cagp_elbo(KS, StKS, z, y, trace_K, noise_variance, jitter)
