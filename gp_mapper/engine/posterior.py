"""What one batch hands to the next, and the immutable cache that prediction reads.

The carried posterior is the "whitened natural" form of q(a) (spec seed000 §2.6): with
``L = chol(K_θ(Z, Z) + εI)`` at the θ of the batch that produced it, ``q(a) = N(L D⁻¹ v, L D⁻¹ Lᵀ)``
where ``D = I + P``. ``P`` is PSD by construction, so no difference of two large precisions is
ever formed (the fragility of the paper's ``S_a⁻¹ − K'_aa⁻¹``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from .kernels import Kernel
from .linalg import solve_lower, solve_upper_t

# Predictive variances are differences of large terms; clamp the round-off below zero.
VARIANCE_CLAMP = 0.0


class CarriedPosterior(NamedTuple):
    """q(a) over the function values at the inducing inputs Z, in whitened natural form.

    Attributes:
        Z: inducing inputs [M, D].
        L: chol(K_θ(Z, Z) + εI) [M, M] under the θ that produced it (the "old" prior factor).
        P: D − I [M, M], PSD: the data's precision in the whitened basis.
        v: L⁻¹ c [M], the whitened natural mean.
        L_D: chol(I + P) [M, M].
        jitter: the relative jitter used in L.
    """

    Z: Tensor
    L: Tensor
    P: Tensor
    v: Tensor
    L_D: Tensor
    jitter: float

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    def mean_and_cov(self) -> tuple[Tensor, Tensor]:
        """``(m_a [M], S_a [M, M])`` of q(a), for tests and export."""
        w = torch.cholesky_solve(self.v[:, None], self.L_D)[:, 0]
        m = self.L @ w
        B = solve_lower(self.L_D, self.L.mT)  # L_D⁻¹ Lᵀ
        return m, B.mT @ B


@dataclass(frozen=True)
class Posterior:
    """Immutable prediction cache of the sparse posterior q(f) (GPflow's SGPRPosterior idea).

    ``mean(x) = k_xb α`` and ``var(x) = k(x, x) − k_xb W k_bx`` with
    ``α = L_b⁻ᵀ D⁻¹ v`` and ``W = L_b⁻ᵀ (I − D⁻¹) L_b⁻¹``, so a prediction is one kernel block and
    one matrix product: O(S M²) for S test points.

    Attributes:
        kernel: the kernel at the final θ of the last batch (never trained again).
        Z: inducing inputs [M, D].
        noise_variance: σ² (for the predictive of y).
        alpha: [M].
        W: [M, M].
    """

    kernel: Kernel
    Z: Tensor
    noise_variance: float
    alpha: Tensor
    W: Tensor

    @classmethod
    def from_carried(
        cls, kernel: Kernel, carried: CarriedPosterior, noise_variance: float
    ) -> Posterior:
        eye = torch.eye(carried.num_inducing, dtype=carried.L.dtype, device=carried.L.device)
        D_inv = torch.cholesky_solve(eye, carried.L_D)
        alpha = solve_upper_t(carried.L, D_inv @ carried.v)
        inner = eye - D_inv
        W = solve_upper_t(carried.L, solve_upper_t(carried.L, inner).mT)
        return cls(kernel, carried.Z, noise_variance, alpha, 0.5 * (W + W.mT))

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance at test inputs.

        Args:
            Xs: test inputs [S, D] on this posterior's device and dtype.

        Returns:
            (mean [S], variance [S]) of f(Xs); add ``noise_variance`` for y.
        """
        Ksb = self.kernel.K(Xs, self.Z)
        mean = Ksb @ self.alpha
        var = self.kernel.K_diag(Xs) - ((Ksb @ self.W) * Ksb).sum(-1)
        return mean, torch.clamp(var, min=VARIANCE_CLAMP)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """Variance of f where no data are near: k(x, x) less what the data tell of the offset.

        A constant kernel part models the field's mean offset, which every datum informs,
        wherever it is; far from all data only that part is known. Comparing the predictive
        variance with this value says whether the *local* field is known.

        Args:
            Xs: inputs [S, D].

        Returns:
            [S].
        """
        c = self.kernel.constant_variance()
        ones = torch.ones(self.num_inducing, dtype=self.W.dtype, device=self.W.device)
        offset_info = c * c * (ones @ self.W @ ones)
        return self.kernel.K_diag(Xs) - offset_info
