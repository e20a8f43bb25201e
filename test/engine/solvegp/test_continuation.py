"""A fitted SOLVE / SVGP posterior continues as the streaming model (our extension)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import OnlineSparseGP, SquaredExponential
from gp_mapper.engine.solvegp import (
    SolveGP,
    min_carried_precision,
    project,
    to_carried,
    to_online_sgp,
    to_streaming_state,
)
from gp_mapper.engine.solvegp.svgp import lower_factor_of_inverse

from .test_model import QUICK, TEST_POINTS, data, kernel

# The required tolerance: the continuation predicts as the fit did, to 1e-6 of the prior variance.
REL_TOL = 1e-6


def fitted(**settings: object) -> SolveGP:
    model = SolveGP(kernel(), 0.05, **{**QUICK, "epochs": 4, **settings})  # type: ignore[arg-type]
    X, y = data()
    assert model.fit(X, y).accepted
    return model


@pytest.mark.parametrize("family", ["solve", "full", "odvgp"])
@pytest.mark.parametrize("whiten", [False, True])
def test_the_stream_predicts_as_the_fit_before_new_data(family: str, whiten: bool) -> None:
    model = fitted(family=family, whiten=whiten)
    stream = to_online_sgp(model)
    assert isinstance(stream, OnlineSparseGP)
    assert stream.num_inducing == model.posterior.support.shape[0]
    prior = float(model.posterior.kernel.K_diag(TEST_POINTS[:1])[0]) * model.scale**2
    mean, var = model.predict(TEST_POINTS)
    mean_s, var_s = stream.predict(TEST_POINTS)
    assert float((mean - mean_s).abs().max()) < REL_TOL * prior
    assert float((var - var_s).abs().max()) < REL_TOL * prior
    theta = stream.hyperparameters()
    # The stream adds no pass noise to the fit's (the engine's default, 0): the same θ.
    assert theta.pop("pass_noise_variance") == 0.0
    assert theta == pytest.approx(model.hyperparameters())


def test_carried_blocks_match_the_joint_q_of_z_and_o() -> None:
    """q(a) over [Z; O] from the carried form equals SOLVE's structured q(u, v).

    The structured q of Shi, Titsias & Mnih 2020, Sec. 3.3.
    """
    model = fitted(family="solve", standardise="none")
    carried = to_carried(model.posterior)
    m_a, S_a = carried.mean_and_cov()
    f, q = model.posterior.factors, model.posterior.q
    M = model.posterior.num_inducing
    L_W = torch.zeros_like(carried.L)
    L_W[:M, :M], L_W[M:, :M], L_W[M:, M:] = f.L_u, f.A.mT, f.L_v
    S_w = torch.block_diag(q.L_u @ q.L_u.mT, q.L_v @ q.L_v.mT)
    torch.testing.assert_close(m_a, L_W @ torch.cat([q.m_u, q.m_v]), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(S_a, L_W @ S_w @ L_W.mT, rtol=1e-8, atol=1e-10)
    K = model.posterior.kernel.K(carried.Z)
    torch.testing.assert_close(carried.L @ carried.L.mT, K, rtol=1e-6, atol=1e-6)


def test_at_the_optimum_the_carried_precision_is_positive() -> None:
    model = fitted(epochs=0, optimal_q=True)
    assert min_carried_precision(to_carried(model.posterior)) > -1e-10


def test_the_stream_continues_with_new_data() -> None:
    model = fitted()
    state = to_streaming_state(model, fit_iterations=2)
    stream = OnlineSparseGP.from_state(state, device="cpu")
    # θ was fitted on the whole log: the health check holds the stream to it, not to a guess.
    assert stream.theta_fitted
    X, y = data(seed=5)
    report = stream.update(X[:30] + 1.0, y[:30])
    assert report.accepted, report.reason
    assert stream.num_updates == 2
    count = model.target_stats[0]
    assert stream.stats.count == count + 30


def test_a_centred_fit_is_refused() -> None:
    model = fitted(standardise="centre")
    with pytest.raises(ValueError, match="centred"):
        to_streaming_state(model)
    np.testing.assert_equal(model.shift != 0.0, True)


def test_the_inverse_factor_does_not_square_the_condition_number() -> None:
    """G Gᵀ = (L Lᵀ)⁻¹ for a factor of condition 1e7: Lᵀ G is orthogonal to working precision.

    A Cholesky of L Lᵀ (condition 1e14) keeps about two digits of it."""
    g = torch.Generator().manual_seed(11)
    n = 12
    unit = torch.eye(n, dtype=torch.float64)
    unit += 0.3 * torch.tril(torch.randn(n, n, generator=g, dtype=torch.float64), -1)
    L = unit @ torch.diag(torch.logspace(0.0, -7.0, n, dtype=torch.float64))
    assert float(torch.linalg.cond(L)) < 1e8
    G, used = lower_factor_of_inverse(L)
    assert used.value == 0.0
    assert torch.equal(G, torch.tril(G)) and bool((torch.diagonal(G) > 0).all())
    Q = L.mT @ G
    torch.testing.assert_close(Q.mT @ Q, torch.eye(n, dtype=torch.float64), rtol=0.0, atol=1e-8)


def test_a_singular_factor_climbs_the_jitter_ladder() -> None:
    L = torch.diag(torch.tensor([1.0, 0.5, 0.0], dtype=torch.float64))
    G, used = lower_factor_of_inverse(L)
    assert used.value > 0.0 and bool(torch.isfinite(G).all())
    S = L @ L.mT + used.value * (L * L).sum() / 3 * torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(G @ G.mT @ S, torch.eye(3, dtype=torch.float64), rtol=0, atol=1e-8)


def near_collinear_fit() -> SolveGP:
    """Z and O well apart (0.4 between neighbours) under a lengthscale of 3: their kernel columns
    are nearly collinear, so one epoch of Adam on the unwhitened q leaves cond(L̃) ~ 3e9 (a
    Cholesky of L̃ L̃ᵀ fails) and whitened directions far wider than the prior."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0.0, 10.0, 200))[:, None]
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(200)
    model = SolveGP(
        SquaredExponential(1.0, 3.0), 0.01, num_inducing=24, num_orthogonal=24, epochs=1,
        batch_size=32, device="cpu", train_hyperparameters=False, train_inducing=False,
        validation=0.0, standardise="none", prefit_points=0,
    )  # fmt: skip
    assert model.fit(X, y).accepted
    return model


def clipped(L: torch.Tensor) -> torch.Tensor:
    """S̃ = L Lᵀ with its eigenvalues above the prior's (1) set to 1: the q the stream carries.

    Dense and only for a reference: the large eigenvalues, the ones clipped, are accurate."""
    eigenvalues, vectors = torch.linalg.eigh(L @ L.mT)
    return (vectors * eigenvalues.clamp(max=1.0)) @ vectors.mT


def test_a_near_collinear_fit_converts_exactly() -> None:
    """The carried posterior of an ill-conditioned q predicts as SOLVE-GP does, with S̃ clipped
    to the prior where SGD left it wider: the mean (which the clip keeps) and the variance to
    1e-7 of the prior variance in factored form (the jitter the ladder puts on this singular S̃,
    1e-8 of the prior, is the difference), to 1e-3 through the stream's cache."""
    model = near_collinear_fit()
    posterior = model.posterior
    q = posterior.q
    assert float(torch.linalg.cond(q.L_u)) > 1e9  # the case this guards
    carried = to_carried(posterior)
    Xs = torch.linspace(-1.0, 11.0, 61, dtype=torch.float64)[:, None]
    kernel = model.kernel
    with torch.no_grad():
        A = torch.linalg.solve_triangular(carried.L, kernel.K(carried.Z, Xs), upper=False)
        B = torch.linalg.solve_triangular(carried.L_D, A, upper=False)
        w = torch.linalg.solve_triangular(carried.L_D, carried.v[:, None], upper=False)[:, 0]
        mean_c = B.mT @ w
        var_c = kernel.K_diag(Xs) - (A * A).sum(0) + (B * B).sum(0)
        # Dense reference: Shi et al. 2020, App. D.2 in the whitened coordinates with the clipped S̃.
        Bu, Dv = project(kernel, posterior.Z, posterior.Zo, posterior.factors, Xs)
        var_ref = kernel.K_diag(Xs) - (Bu * Bu).sum(0) - (Dv * Dv).sum(0)
        var_ref += (Bu * (clipped(q.L_u) @ Bu)).sum(0) + (Dv * (clipped(q.L_v) @ Dv)).sum(0)
    mean, _ = model.predict(Xs)
    prior = 1.0  # the kernel variance
    assert float((mean - mean_c).abs().max()) < 1e-7 * prior
    assert float((var_ref - var_c).abs().max()) < 1e-7 * prior
    mean_s, var_s = to_online_sgp(model).predict(Xs)
    # The stream caches W = L⁻ᵀ (I − D⁻¹) L⁻¹, whose entries grow with cond(K_WW) ~ 4e4 here.
    assert float((mean - mean_s).abs().max()) < 1e-3 * prior
    assert float((var_ref - var_s).abs().max()) < 1e-3 * prior
