"""GP-sampled toy data for the ACGP tests, with the dense exact quantities to compare against."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytest
import torch

from gp_mapper.engine import SquaredExponential

DTYPE = torch.float64
NOISE = 0.1
# The synthetic kernel of Bartels et al. 2023, Sec. 4.1: SE, log ℓ = −2, variance 1 on x ~ U[0, 1].
LENGTHSCALE = math.exp(-2.0)


class GpSample(NamedTuple):
    """y = f(X) + ε drawn from the model itself, and its exact log det and quadratic form."""

    kernel: SquaredExponential
    X: torch.Tensor  # [N, 1]
    y: torch.Tensor  # [N]
    logdet: float  # log det(K + σ²I)
    quad: float  # yᵀ(K + σ²I)⁻¹y

    @property
    def log_density(self) -> float:
        return -0.5 * (self.logdet + self.quad + self.y.shape[0] * math.log(2.0 * math.pi))


def gp_sample(n: int, seed: int, lengthscale: float = LENGTHSCALE) -> GpSample:
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.uniform(0.0, 1.0, (n, 1)), dtype=DTYPE)
    kernel = SquaredExponential(1.0, lengthscale).to(DTYPE)
    for p in kernel.parameters():
        p.requires_grad_(False)
    K = kernel.K(X) + NOISE * torch.eye(n, dtype=DTYPE)
    L = torch.linalg.cholesky(K)
    y = L @ torch.as_tensor(rng.standard_normal(n), dtype=DTYPE)
    a = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    return GpSample(kernel, X, y, float(torch.logdet(K)), float(a @ a))


@pytest.fixture(scope="module")
def sample() -> GpSample:
    return gp_sample(600, seed=1058390)
