"""The exact GP posterior on a set of kept data points, as a frozen prediction cache.

Used by every model whose map is an exact GP on some of the data: the exact GP itself (all of
it) and ACGP (the M points its stopped Cholesky kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import cholesky_with_jitter, solve_lower, solve_upper_t
from ..model import ScalarOutputs

# Predictive variances are differences of large terms; clamp the round-off below zero.
VARIANCE_CLAMP = 0.0


@dataclass(frozen=True)
class ExactPosterior(ScalarOutputs):
    """``f | y`` for ``y = f(X) + ε`` on the kept points X [M, D].

    ``mean(x) = k_xX α`` with ``α = (K + σ²I)⁻¹ y`` and ``var(x) = k(x, x) − ‖L⁻¹ k_Xx‖²`` with
    ``L = chol(K + σ²I)``: one kernel block and one triangular solve per prediction, O(S M²).

    Attributes:
        kernel: the kernel at the θ the posterior was formed with (never trained again).
        X: the kept inputs [M, D] (the posterior's support).
        L: chol(K(X, X) + σ²I) [M, M].
        alpha: (K + σ²I)⁻¹ y [M].
        noise_variance: σ² (for the predictive of y).
        ones_solved: ‖L⁻¹ 1‖², what the data say of a constant kernel part.
    """

    kernel: Kernel
    X: Tensor
    L: Tensor
    alpha: Tensor
    noise_variance: float
    ones_solved: float

    @classmethod
    def from_data(
        cls, kernel: Kernel, X: Tensor, y: Tensor, noise_variance: float
    ) -> ExactPosterior:
        """Factor ``K(X, X) + σ²I`` (jitter ladder on failure) and cache the solves.

        Raises:
            NumericalError: the matrix stayed non-positive-definite after the ladder.
        """
        with torch.no_grad():
            K = kernel.K(X)
            eye = torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
            L, _ = cholesky_with_jitter(K + noise_variance * eye, jitter=0.0)
            return cls.from_factor(kernel, X, L, y, noise_variance)

    @classmethod
    def from_factor(
        cls, kernel: Kernel, X: Tensor, L: Tensor, y: Tensor, noise_variance: float
    ) -> ExactPosterior:
        """The cache from a factor ``L = chol(K(X, X) + σ²I)`` already at hand (ACGP's)."""
        with torch.no_grad():
            alpha = solve_upper_t(L, solve_lower(L, y[:, None]))[:, 0]
            ones = solve_lower(L, torch.ones_like(y)[:, None])
            return cls(kernel, X, L, alpha, float(noise_variance), float((ones * ones).sum()))

    @property
    def support(self) -> Tensor:
        """The inputs the posterior rests on [M, D]: here the kept data."""
        return self.X

    @property
    def num_support(self) -> int:
        return int(self.X.shape[0])

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at Xs [S, D]; add ``noise_variance`` for y."""
        Kxs = self.kernel.K(self.X, Xs)
        A = solve_lower(self.L, Kxs)
        mean = Kxs.mT @ self.alpha
        var = self.kernel.K_diag(Xs) - (A * A).sum(0)
        return mean, torch.clamp(var, min=VARIANCE_CLAMP)

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (the grid calls this per tile)."""
        return self.predict(Xs)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """Variance of f far from all data: k(x, x) less what the data tell of the offset.

        With a constant part c in the kernel, every datum informs the offset wherever it is:
        far away ``var = k(x, x) − c² 1ᵀ(K + σ²I)⁻¹1``.
        """
        c = self.kernel.constant_variance()
        return self.kernel.K_diag(Xs) - c * c * self.ones_solved
