"""At their Gaussian-likelihood optima the posterior forms give Titsias' collapsed bound."""

from __future__ import annotations

import pytest
import torch

from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.gam import (
    AdditiveGP,
    optimal_alpha,
    optimal_whitened_q,
    precision_elbo,
    titsias_bound,
    whitened_elbo,
    whitened_features,
)

from .conftest import DTYPE, NOISE, Problem, dense_titsias


def one_component(problem: Problem) -> Problem:
    return problem._replace(components=problem.components[1:2])


@torch.no_grad()
def test_one_component_precision_optimum_is_the_svgp_bound(problem: Problem) -> None:
    """One component, R = M, α and B at the optimum: the ordinary SVGP (Titsias) bound."""
    p = one_component(problem)
    b = p.blocks
    K, Phi = b.Kuu[0], b.Kux[0]
    # Optimal BBᵀ = σ⁻² K⁻¹ Φ Φᵀ K⁻¹ (spec eq 6 with λ² = σ⁻²): explicit in the test only.
    B = torch.linalg.solve(K, torch.linalg.cholesky(Phi @ Phi.mT)) / p.noise.sqrt()
    alpha = optimal_alpha(b, p.y, p.noise)
    got = precision_elbo(b, alpha, [B], p.y, p.noise)
    torch.testing.assert_close(got, dense_titsias(p, K), rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("mean_field", [False, True])
@torch.no_grad()
def test_whitened_optimum_of_one_component_is_the_svgp_bound(
    problem: Problem, mean_field: bool
) -> None:
    p = one_component(problem)
    L, W = whitened_features(p.blocks, Jitter())
    mean, L_P = optimal_whitened_q(W, p.sizes, p.y, p.noise, mean_field)
    got = whitened_elbo(W, p.blocks.kdiag, mean, L_P, p.y, p.noise)
    reference = dense_titsias(p, L[0] @ L[0].mT)
    torch.testing.assert_close(got, reference, rtol=1e-9, atol=1e-8)
    torch.testing.assert_close(titsias_bound(W, p.blocks.kdiag, p.y, p.noise), reference)


@torch.no_grad()
def test_full_coupled_optimum_is_titsias_over_the_stacked_set(problem: Problem) -> None:
    L, W = whitened_features(problem.blocks, Jitter())
    mean, L_P = optimal_whitened_q(W, problem.sizes, problem.y, problem.noise, False)
    got = whitened_elbo(W, problem.blocks.kdiag, mean, L_P, problem.y, problem.noise)
    L_U = torch.block_diag(*L)
    torch.testing.assert_close(got, dense_titsias(problem, L_U @ L_U.mT), rtol=1e-9, atol=1e-8)


@torch.no_grad()
def test_mean_field_optimum_is_below_the_coupled_one(problem: Problem) -> None:
    _, W = whitened_features(problem.blocks, Jitter())
    bounds = []
    for mean_field in (False, True):
        mean, L_P = optimal_whitened_q(W, problem.sizes, problem.y, problem.noise, mean_field)
        bounds.append(whitened_elbo(W, problem.blocks.kdiag, mean, L_P, problem.y, problem.noise))
    assert bounds[1] < bounds[0]


def test_fitted_precision_form_reaches_the_coupled_optimum(problem: Problem) -> None:
    """L-BFGS on B alone (θ fixed, R = M_tot) closes the gap to Titsias' bound."""
    model = AdditiveGP(problem.components, NOISE, rank=sum(problem.sizes), iterations=300,
                       learn_hyperparameters=False, device="cpu", dtype=DTYPE)  # fmt: skip
    report = model.fit(problem.X, problem.y)
    assert report.accepted, report.reason
    with torch.no_grad():
        _, W = whitened_features(problem.blocks, Jitter(0.0))
        bound = float(titsias_bound(W, problem.blocks.kdiag, problem.y, problem.noise))
    assert report.lower == pytest.approx(bound, abs=1e-4)
