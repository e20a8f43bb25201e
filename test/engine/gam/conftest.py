"""A tiny additive problem and the dense quantities the GAM's ELBOs are checked against.

Three components on two inputs (a constant, an SE on x0, a zero-mean SE on x1), each with
its own few inducing points; N = 14, so every reference forms its matrices densely and
inverts them, which the model itself never does with K_UU.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch

from gp_mapper.engine.core.kernels import Constant, SquaredExponential
from gp_mapper.engine.gam import Component, ZeroMeanSE, grid_inducing
from gp_mapper.engine.gam.blocks import Blocks, kernel_blocks

DTYPE = torch.float64
N = 14
INPUT_DIM = 2
NOISE = 0.3
LOG_2PI = math.log(2.0 * math.pi)


class Problem(NamedTuple):
    components: list[Component]
    X: torch.Tensor  # [N, 2]
    y: torch.Tensor  # [N]
    noise: torch.Tensor  # σ²

    @property
    def blocks(self) -> Blocks:
        return kernel_blocks(self.components, self.X)

    @property
    def sizes(self) -> list[int]:
        return [c.num_inducing for c in self.components]


def toy_components() -> list[Component]:
    z0 = torch.linspace(0.0, 1.0, 4, dtype=DTYPE)[:, None]
    z1 = torch.tensor([[0.1], [0.5], [0.8]], dtype=DTYPE)
    return [
        Component("offset", Constant(2.0), torch.zeros(1, INPUT_DIM, dtype=DTYPE)),
        Component("a", SquaredExponential(1.5, 0.4, active_dims=(0,)), grid_inducing(z0, [0], 2)),
        Component("b", ZeroMeanSE(0.8, 0.3, (1,)), grid_inducing(z1, [1], 2)),
    ]


@pytest.fixture
def problem() -> Problem:
    g = torch.Generator().manual_seed(20181)
    X = torch.rand(N, INPUT_DIM, generator=g, dtype=DTYPE)
    y = (
        1.0
        + torch.sin(5.0 * X[:, 0])
        + (X[:, 1] - 0.5)
        + 0.3 * torch.randn(N, generator=g, dtype=DTYPE)
    )
    return Problem(toy_components(), X, y, torch.tensor(NOISE, dtype=DTYPE))


def dense_elbo(
    p: Problem, mu_U: torch.Tensor, Sigma_U: torch.Tensor, Kuu: torch.Tensor
) -> torch.Tensor:
    """ELBO of q(U) = N(mu_U, Sigma_U), prior N(0, Kuu): textbook forms, explicit inverses."""
    b = p.blocks
    Kfu = torch.cat(b.Kux, 0).mT  # [N, M_tot]
    Kinv = torch.linalg.inv(Kuu)
    A = Kfu @ Kinv
    mean = A @ mu_U
    cov = sum(b.kdiag) - torch.einsum("nm,mk,nk->n", A, Kuu - Sigma_U, A)
    noise = p.noise
    ell = (-0.5 * LOG_2PI - 0.5 * torch.log(noise) - ((p.y - mean) ** 2 + cov) / (2 * noise)).sum()
    M = Kuu.shape[0]
    kl = 0.5 * (
        torch.trace(Kinv @ Sigma_U)
        + mu_U @ Kinv @ mu_U
        - M
        + torch.logdet(Kuu)
        - torch.logdet(Sigma_U)
    )
    return ell - kl


def dense_titsias(p: Problem, Kuu: torch.Tensor) -> torch.Tensor:
    """log N(y | 0, Q + σ²I) − tr(K − Q)/2σ², Q = K_fU K_UU⁻¹ K_Uf, all N × N."""
    b = p.blocks
    Kfu = torch.cat(b.Kux, 0).mT
    Q = Kfu @ torch.linalg.solve(Kuu, Kfu.mT)
    C = Q + p.noise * torch.eye(N, dtype=DTYPE)
    log_density = torch.distributions.MultivariateNormal(torch.zeros(N, dtype=DTYPE), C).log_prob(
        p.y
    )
    return log_density - 0.5 * (sum(b.kdiag).sum() - torch.trace(Q)) / p.noise
