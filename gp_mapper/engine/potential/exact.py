"""The exact vector GP of the curl-free kernel: the reference the streaming map is checked on.

Dense over the 3N component observations, O((3N)³): for tests and for the largest subset of
a log that fits in memory (``benchmarks/vector_field.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.fit import FitResult, fit_hyperparameters
from ..core.linalg import Jitter, cholesky_with_jitter, gaussian_log_density, solve_lower
from ..core.noise import GaussianNoise
from .functionals import field_rows, field_targets, spatial
from .kernel import CurlFreeKernel
from .posterior import norm_moments


class ExactFieldGP:
    """The exact posterior of B given readings y [N, 3] at map inputs X [N, D].

    Args:
        kernel: the curl-free kernel (its θ is fitted in place by :meth:`fit`).
        noise_variance: initial noise variance of each component [µT²].
        X: map inputs [N, D], D = 2 (z = 0) or 3 [m].
        y: readings [N, 3] in map_frame [µT].
        jitter: the first jitter of the Cholesky (relative by default).
    """

    def __init__(
        self,
        kernel: CurlFreeKernel,
        noise_variance: float,
        X: Tensor,
        y: Tensor,
        jitter: float | Jitter = 1e-8,
    ) -> None:
        if y.shape != (X.shape[0], 3):
            raise ValueError(f"expected y [N, 3]; got {tuple(y.shape)} for X {tuple(X.shape)}")
        self.kernel = kernel
        self.noise = GaussianNoise(noise_variance).to(dtype=X.dtype, device=X.device)
        self.input_dim = X.shape[1]
        self.rows = field_rows(spatial(X))
        self.targets = field_targets(y)
        self.jitter = Jitter.coerce(jitter)

    def _gram(self) -> Tensor:
        eye = torch.eye(self.rows.shape[0], dtype=self.rows.dtype, device=self.rows.device)
        return self.kernel.K(self.rows) + self.noise.variance * eye

    def log_marginal_likelihood(self) -> Tensor:
        return gaussian_log_density(self.targets, torch.zeros_like(self.targets), self._gram())

    def fit(self, iterations: int) -> FitResult:
        """Maximise the evidence over θ and σ² by L-BFGS (restored on failure)."""
        params = [*self.kernel.parameters(), *self.noise.parameters()]
        for p in params:
            p.requires_grad_(True)
        n = self.targets.shape[0]
        result = fit_hyperparameters(
            lambda: -self.log_marginal_likelihood() / n, params, iterations
        )
        for p in params:
            p.requires_grad_(False)
        return result

    @torch.no_grad()
    def predict_field(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent field mean [S, 3] and covariance [S, 3, 3] at map inputs Xs [S, D]."""
        L, _ = cholesky_with_jitter(self._gram(), self.jitter)
        S = Xs.shape[0]
        rows = field_rows(spatial(Xs))
        Ksx = self.kernel.K(rows, self.rows)
        alpha = torch.cholesky_solve(self.targets[:, None], L)[:, 0]
        mean = (Ksx @ alpha).reshape(3, S).mT
        V = solve_lower(L, Ksx.mT).reshape(-1, 3, S).permute(2, 1, 0)  # [S, 3, 3N]
        prior = torch.diag_embed(self.kernel.K_diag(rows).reshape(3, S).mT)
        return mean, prior - V @ V.mT

    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """‖B‖ mean and variance [S] (delta method, as ``FieldPosterior.predict``)."""
        return norm_moments(*self.predict_field(Xs))
