"""Each posterior form's ELBO against the dense textbook ELBO of its q(U).

The forms of Adam, Durrande & John 2018 (Sec. 3.2, Sec. 4 and App. C).
"""

from __future__ import annotations

import pytest
import torch

from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.gam import optimal_alpha, precision_elbo, whitened_elbo, whitened_features
from gp_mapper.engine.gam.precision import precision_core, precision_marginals

from .conftest import DTYPE, Problem, dense_elbo

RANK = 5


def random_precision_q(p: Problem, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    alpha = [torch.randn(m, generator=g, dtype=DTYPE) for m in p.sizes]
    B = [0.7 * torch.randn(m, RANK, generator=g, dtype=DTYPE) for m in p.sizes]
    return alpha, B


@torch.no_grad()
def test_precision_elbo_equals_the_dense_elbo(problem: Problem) -> None:
    alpha, B = random_precision_q(problem, 1)
    Kuu = torch.block_diag(*problem.blocks.Kuu)
    Bs = torch.cat(B, 0)
    mu_U = Kuu @ torch.cat(alpha)
    Sigma_U = torch.linalg.inv(torch.linalg.inv(Kuu) + Bs @ Bs.mT)
    expected = dense_elbo(problem, mu_U, Sigma_U, Kuu)
    got = precision_elbo(problem.blocks, alpha, B, problem.y, problem.noise)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


@torch.no_grad()
def test_summed_and_pairwise_variances_agree(problem: Problem) -> None:
    """σ²_sum from one solve of Σ_c B_cᵀk_c equals the paper's double sum over (c, c')."""
    alpha, B = random_precision_q(problem, 2)
    b = problem.blocks
    L_A = precision_core(b.Kuu, B)
    _, var = precision_marginals(b, alpha, B, L_A)
    V = [
        torch.linalg.solve_triangular(L_A, B_c.mT @ K, upper=False)
        for B_c, K in zip(B, b.Kux, strict=True)
    ]
    pairwise = sum(b.kdiag) - sum((Vc * Vd).sum(0) for Vc in V for Vd in V)
    torch.testing.assert_close(var, pairwise, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mean_field", [False, True])
@torch.no_grad()
def test_whitened_elbo_equals_the_dense_elbo(problem: Problem, mean_field: bool) -> None:
    g = torch.Generator().manual_seed(3)
    L, W = whitened_features(problem.blocks, Jitter())
    M = W.shape[0]
    mean = torch.randn(M, generator=g, dtype=DTYPE)
    if mean_field:
        parts = [torch.randn(m, m, generator=g, dtype=DTYPE) for m in problem.sizes]
        L_P = torch.block_diag(
            *(torch.tril(P, -1) + torch.diag(1.0 + P.diag().abs()) for P in parts)
        )
    else:
        P = torch.randn(M, M, generator=g, dtype=DTYPE)
        L_P = torch.tril(P, -1) + torch.diag(1.0 + P.diag().abs())
    # The whitened forms' prior is K_UU with the jitter its factors carry: L Lᵀ.
    L_U = torch.block_diag(*L)
    Kuu = L_U @ L_U.mT
    mu_U = L_U @ mean
    Sigma_U = L_U @ torch.linalg.inv(L_P @ L_P.mT) @ L_U.mT
    expected = dense_elbo(problem, mu_U, Sigma_U, Kuu)
    got = whitened_elbo(W, problem.blocks.kdiag, mean, L_P, problem.y, problem.noise)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-8)


def test_gradient_in_B_vanishes_at_zero(problem: Problem) -> None:
    """B = 0 is a stationary point: never start there."""
    alpha, _ = random_precision_q(problem, 4)
    B = [torch.zeros(m, RANK, dtype=DTYPE, requires_grad=True) for m in problem.sizes]
    with torch.no_grad():
        blocks = problem.blocks
    precision_elbo(blocks, alpha, B, problem.y, problem.noise).backward()
    assert max(float(b.grad.abs().max()) for b in B) == 0.0


def test_closed_form_alpha_is_the_optimum(problem: Problem) -> None:
    with torch.no_grad():
        blocks = problem.blocks
        alpha = optimal_alpha(blocks, problem.y, problem.noise)
    _, B = random_precision_q(problem, 5)

    def largest_gradient(alpha: list[torch.Tensor]) -> float:
        alpha = [a.clone().requires_grad_(True) for a in alpha]
        precision_elbo(blocks, alpha, B, problem.y, problem.noise).backward()
        return max(float(a.grad.abs().max()) for a in alpha)

    # Zero but for the solve's first jitter rung (1e-8 of the system's mean diagonal).
    assert largest_gradient(list(alpha)) < 1e-6 * largest_gradient(
        [torch.zeros_like(a) for a in alpha]
    )
