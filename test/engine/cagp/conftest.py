"""A seeded 2-D regression problem for the CaGP tests, and the dense quantities to compare with.

The problem is shaped as our first NumPy check of the CaGP ELBO (N = 240, D = 2, Matérn-3/2, I = 24
blocks of 10); its data are ours, so the exact NLL is computed here rather than quoted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pytest
import torch

from gp_mapper.engine import Kernel, Matern32

DTYPE = torch.float64
N = 240
INPUT_DIM = 2
NOISE = 0.05
LOG_2PI = math.log(2.0 * math.pi)


class Problem(NamedTuple):
    kernel: Kernel
    noise: torch.Tensor  # σ², a scalar
    X: torch.Tensor  # [N, 2]
    y: torch.Tensor  # [N]


def make_problem(n: int = N, seed: int = 20240601, ard: bool = True) -> Problem:
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.uniform(0.0, 3.0, (n, INPUT_DIM)), dtype=DTYPE)
    y = torch.sin(2.0 * X[:, 0]) * torch.cos(1.5 * X[:, 1]) + 0.3 * X[:, 1]
    y = y + math.sqrt(NOISE) * torch.as_tensor(rng.standard_normal(n), dtype=DTYPE)
    lengthscale = [0.7, 0.9] if ard else 0.8
    kernel = Matern32(1.2, lengthscale, ard_dims=INPUT_DIM if ard else 0).to(DTYPE)
    return Problem(kernel, torch.tensor(NOISE, dtype=DTYPE), X, y)


@pytest.fixture(autouse=True)
def one_cpu_thread() -> Iterator[None]:
    """One torch thread per test, restored afterwards: at a few hundred points the matrices are
    too small to share out, and on a busy machine idle OpenMP threads spin-wait against the
    others (``core.device.set_cpu_threads`` says the same of the node)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def problem() -> Problem:
    return make_problem()


def exact_nll(p: Problem) -> float:
    """−log N(y; 0, K + σ²I), dense."""
    with torch.no_grad():
        K_hat = p.kernel.K(p.X) + p.noise * torch.eye(p.X.shape[0], dtype=DTYPE)
        L = torch.linalg.cholesky(K_hat)
        a = torch.linalg.solve_triangular(L, p.y[:, None], upper=False)[:, 0]
        logdet = 2.0 * torch.log(torch.diagonal(L)).sum()
        return float(0.5 * (a @ a + logdet + p.y.shape[0] * LOG_2PI))


def eq11(p: Problem, S: torch.Tensor) -> float:
    """ℓ_ELBO by eq. 11 as printed, dense, for any full-rank S [N, I] (no normalisation)."""
    with torch.no_grad():
        n, i = S.shape
        K = p.kernel.K(p.X)
        s2 = p.noise
        G = S.mT @ K @ S + s2 * (S.mT @ S)
        v = torch.linalg.solve(G, S.mT @ p.y)
        mean = K @ S @ v
        KS = K @ S
        trace_Ki = torch.trace(K) - torch.trace(KS @ torch.linalg.solve(G, KS.mT))
        value = (
            ((p.y - mean) @ (p.y - mean) + trace_Ki) / s2
            + (n - i) * torch.log(s2)
            + n * LOG_2PI
            + v @ (S.mT @ K @ S) @ v
            - torch.trace(torch.linalg.solve(G, S.mT @ K @ S))
            + torch.logdet(G)
            - torch.logdet(S.mT @ S)
        )
        return float(0.5 * value)


def brute_force_elbo(p: Problem, S: torch.Tensor) -> float:
    """−E_q log p(y | f) + KL(q ‖ p(f)) with q = N(μ_I(X), K_I(X, X)), all dense."""
    with torch.no_grad():
        n = S.shape[0]
        K = p.kernel.K(p.X)
        G = S.mT @ (K + p.noise * torch.eye(n, dtype=DTYPE)) @ S
        C = S @ torch.linalg.solve(G, S.mT)
        mean = K @ C @ p.y
        cov = K - K @ C @ K
        cov = 0.5 * (cov + cov.mT)
        s2 = p.noise
        expected = 0.5 * (
            ((p.y - mean) @ (p.y - mean) + torch.trace(cov)) / s2 + n * torch.log(s2) + n * LOG_2PI
        )
        L_K = torch.linalg.cholesky(K)
        L_q = torch.linalg.cholesky(cov)
        M = torch.linalg.solve_triangular(L_K, L_q, upper=False)
        a = torch.linalg.solve_triangular(L_K, mean[:, None], upper=False)[:, 0]
        kl = 0.5 * (
            (M * M).sum()
            + a @ a
            - n
            + 2.0 * torch.log(torch.diagonal(L_K)).sum()
            - 2.0 * torch.log(torch.diagonal(L_q)).sum()
        )
        return float(expected + kl)


def exact_variance(p: Problem, Xs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        K_hat = p.kernel.K(p.X) + p.noise * torch.eye(p.X.shape[0], dtype=DTYPE)
        L = torch.linalg.cholesky(K_hat)
        B = torch.linalg.solve_triangular(L, p.kernel.K(p.X, Xs), upper=False)
        return p.kernel.K_diag(Xs) - (B * B).sum(0)
