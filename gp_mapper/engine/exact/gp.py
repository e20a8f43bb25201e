"""Exact GP regression: the full-batch reference the continual engine is measured against."""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from ..core.fit import FitResult, fit_hyperparameters
from ..core.kernels import Kernel
from ..core.linalg import cholesky_with_jitter, gaussian_log_density, solve_lower
from ..core.noise import GaussianNoise


class ExactGP:
    """``y ~ N(0, K + σ²I)`` on all data at once; O(N³).

    Args:
        kernel: prior covariance (copied; its values are the initial θ).
        noise_variance: initial σ².
        X: inputs [N, D]; y: targets [N].
    """

    def __init__(self, kernel: Kernel, noise_variance: float, X: Tensor, y: Tensor) -> None:
        self.kernel = copy.deepcopy(kernel).to(dtype=X.dtype, device=X.device)
        self.noise = GaussianNoise(noise_variance).to(dtype=X.dtype, device=X.device)
        self.X, self.y = X, y

    def log_marginal_likelihood(self) -> Tensor:
        K = self.kernel.K(self.X)
        eye = torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
        return gaussian_log_density(self.y, torch.zeros_like(self.y), K + self.noise.variance * eye)

    def fit(self, max_iterations: int = 200) -> FitResult:
        params = [*self.kernel.parameters(), *self.noise.parameters()]
        n = self.X.shape[0]
        return fit_hyperparameters(
            lambda: -self.log_marginal_likelihood() / n, params, max_iterations
        )

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at Xs [S, D]."""
        K = self.kernel.K(self.X)
        eye = torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
        L, _ = cholesky_with_jitter(K + self.noise.variance * eye, jitter=0.0)
        Kxs = self.kernel.K(self.X, Xs)
        A = solve_lower(L, Kxs)
        mean = A.mT @ solve_lower(L, self.y)
        var = self.kernel.K_diag(Xs) - (A * A).sum(0)
        return mean, torch.clamp(var, min=0.0)
