"""The SVGP / SOLVE / ODVGP bound: its reductions and dense references.

Sections and equations are those of Shi, Titsias & Mnih 2020 (SOLVE-GP).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import SquaredExponential
from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.core.noise import GaussianNoise
from gp_mapper.engine.solvegp.svgp import (
    Variational,
    VariationalParameters,
    WhitenedQ,
    elbo,
    evaluate,
    full_elbo,
    marginals,
    optimal_q,
    prior_factors,
)

from .conftest import (
    DTYPE,
    TINY_JITTER,
    Toy,
    dense,
    dense_prior,
    exact_lml,
    gauss_logpdf,
    make_toy,
    titsias_bound,
)

WHITEN = (False, True)


def random_q(M: int, M2: int, seed: int = 3) -> WhitenedQ:
    g = torch.Generator().manual_seed(seed)

    def factor(n: int) -> torch.Tensor:
        L = 0.2 * torch.tril(torch.randn(n, n, generator=g, dtype=DTYPE), -1)
        return L + torch.diag(0.3 + 0.5 * torch.rand(n, generator=g, dtype=DTYPE))

    return WhitenedQ(
        torch.randn(M, generator=g, dtype=DTYPE),
        factor(M),
        torch.randn(M2, generator=g, dtype=DTYPE),
        factor(M2),
    )


def with_q(
    toy: Toy, family: str, whiten: bool, q: WhitenedQ, Z: torch.Tensor, Zo: torch.Tensor
) -> tuple[VariationalParameters, Variational]:
    variational = Variational(family, whiten)  # type: ignore[arg-type]
    params = VariationalParameters.at_prior(toy.kernel, Z, Zo, variational, TINY_JITTER)
    factors = prior_factors(toy.kernel, params.Z, params.Zo, TINY_JITTER)
    params.set_whitened(q, factors, variational)
    return params, variational


def bound(toy: Toy, params: VariationalParameters, variational: Variational) -> float:
    return float(
        full_elbo(toy.kernel, toy.noise, params, variational, toy.X, toy.y, TINY_JITTER).value
    )


def block_diag(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.block_diag(a, b)


@pytest.mark.parametrize("whiten", WHITEN)
def test_solve_with_q_v_at_the_prior_is_svgp_on_z(toy: Toy, whiten: bool) -> None:
    """Sec. 3.3: m_v = 0, S_v = C_vv gives SVGP(Z) exactly, and O empty is SVGP(Z) itself."""
    q = random_q(5, 4)
    at_prior = WhitenedQ(q.m_u, q.L_u, torch.zeros(4, dtype=DTYPE), torch.eye(4, dtype=DTYPE))
    u_only = WhitenedQ(q.m_u, q.L_u, q.m_v[:0], q.L_v[:0, :0])
    solve, var_solve = with_q(toy, "solve", whiten, at_prior, toy.Z, toy.Zo)
    svgp, var_svgp = with_q(toy, "full", whiten, u_only, toy.Z, toy.Zo[:0])
    no_o, var_no_o = with_q(toy, "solve", whiten, u_only, toy.Z, toy.Zo[:0])
    reference = bound(toy, svgp, var_svgp)
    assert bound(toy, solve, var_solve) == pytest.approx(reference, rel=1e-10)
    assert bound(toy, no_o, var_no_o) == pytest.approx(reference, rel=1e-12)


@pytest.mark.parametrize("whiten", WHITEN)
def test_solve_is_svgp_on_the_union_with_block_diagonal_whitened_q(toy: Toy, whiten: bool) -> None:
    """Sec. 3.3 (structured covariance), whitened: SOLVE ≡ SVGP on [Z; O] with
    q(w̃) = N(m̃, blockdiag(S̃_u, S̃_v)).
    """
    q = random_q(5, 4)
    solve, var_solve = with_q(toy, "solve", whiten, q, toy.Z, toy.Zo)
    union_q = WhitenedQ(
        torch.cat([q.m_u, q.m_v]), block_diag(q.L_u, q.L_v), q.m_v[:0], q.L_v[:0, :0]
    )
    union, var_union = with_q(toy, "full", whiten, union_q, toy.Z, toy.Zo)
    assert union.num_inducing == 9 and union.num_orthogonal == 0
    assert bound(toy, solve, var_solve) == pytest.approx(bound(toy, union, var_union), rel=1e-10)
    with torch.no_grad():
        a = marginals(toy.kernel, solve, evaluate(toy.kernel, solve, var_solve, TINY_JITTER), toy.X)
        b = marginals(toy.kernel, union, evaluate(toy.kernel, union, var_union, TINY_JITTER), toy.X)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(a.var, b.var, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("whiten", WHITEN)
def test_odvgp_is_solve_with_s_v_frozen_to_c_vv(toy: Toy, whiten: bool) -> None:
    """Sec. 5: ODVGP is SOLVE with S_v = C_vv (whitened S̃_v = I), whatever m_v."""
    q = random_q(5, 4)
    frozen = WhitenedQ(q.m_u, q.L_u, q.m_v, torch.eye(4, dtype=DTYPE))
    solve, var_solve = with_q(toy, "solve", whiten, frozen, toy.Z, toy.Zo)
    odvgp, var_odvgp = with_q(toy, "odvgp", whiten, frozen, toy.Z, toy.Zo)
    assert odvgp.L_v.shape == (0, 0)
    assert bound(toy, odvgp, var_odvgp) == pytest.approx(bound(toy, solve, var_solve), rel=1e-10)


def test_unwhitened_bound_is_the_papers_eq_8(toy: Toy) -> None:
    """The bound against Sec. 3.3 eq. 8 written densely (μ(x), σ²(x), KL_u, KL_v)."""
    q = random_q(5, 4)
    params, variational = with_q(toy, "solve", False, q, toy.Z, toy.Zo)
    P = dense_prior(toy)
    m_u, m_v = dense(params.m_u), dense(params.m_v)
    L_u, L_v = np.tril(dense(params.L_u)), np.tril(dense(params.L_v))
    S_u, S_v = L_u @ L_u.T, L_v @ L_v.T
    E = np.linalg.solve(P.Kuu, P.Kuf)
    G = np.linalg.solve(P.Cvv, P.Cvf)
    mu = E.T @ m_u + G.T @ m_v
    var = (
        np.einsum("mn,mk,kn->n", E, S_u, E)
        + np.diag(P.Cff)
        + np.einsum("mn,mk,kn->n", G, S_v - P.Cvv, G)
    )
    s2 = float(toy.noise)
    y = dense(toy.y)
    ell = np.sum(-0.5 * np.log(2 * np.pi * s2) - ((y - mu) ** 2 + var) / (2 * s2))

    def kl(m: np.ndarray, S: np.ndarray, K: np.ndarray) -> float:
        return 0.5 * (
            np.linalg.slogdet(K)[1]
            - np.linalg.slogdet(S)[1]
            - len(m)
            + np.trace(np.linalg.solve(K, S))
            + m @ np.linalg.solve(K, m)
        )

    reference = ell - kl(m_u, S_u, P.Kuu) - kl(m_v, S_v, P.Cvv)
    assert bound(toy, params, variational) == pytest.approx(reference, rel=1e-7)


def test_bound_equals_a_monte_carlo_estimate() -> None:
    """Sample u, v⊥, then f⊥ | v⊥ (Sec. 3.3's generative form); average log p(y|f) and log q/p."""
    toy = make_toy(seed=11, n=8, m=3, m2=2)
    q = random_q(3, 2, seed=5)
    params, variational = with_q(toy, "solve", False, q, toy.Z, toy.Zo)
    P = dense_prior(toy)
    m_u, m_v = dense(params.m_u), dense(params.m_v)
    L_u, L_v = np.tril(dense(params.L_u)), np.tril(dense(params.L_v))
    rng = np.random.default_rng(2024)
    S = 200_000
    u = m_u + rng.standard_normal((S, 3)) @ L_u.T
    v = m_v + rng.standard_normal((S, 2)) @ L_v.T
    cond_mean = P.Cvf.T @ np.linalg.inv(P.Cvv)  # [N, M2], a dense reference may invert
    cond_cov = P.Cff - cond_mean @ P.Cvf
    L_c = np.linalg.cholesky(cond_cov + 1e-10 * np.eye(len(cond_cov)))
    f = u @ np.linalg.solve(P.Kuu, P.Kuf) + v @ cond_mean.T + rng.standard_normal((S, 8)) @ L_c.T
    s2, y = float(toy.noise), dense(toy.y)
    log_lik = (-0.5 * np.log(2 * np.pi * s2) - (y - f) ** 2 / (2 * s2)).sum(1)

    def log_ratio(x: np.ndarray, m: np.ndarray, L: np.ndarray, K: np.ndarray) -> np.ndarray:
        r_q = np.linalg.solve(L, (x - m).T)
        L_K = np.linalg.cholesky(K)
        r_p = np.linalg.solve(L_K, x.T)
        return (
            -0.5 * (r_q * r_q).sum(0)
            - np.log(np.abs(np.diag(L))).sum()
            + 0.5 * (r_p * r_p).sum(0)
            + np.log(np.diag(L_K)).sum()
        )

    samples = log_lik - log_ratio(u, m_u, L_u, P.Kuu) - log_ratio(v, m_v, L_v, P.Cvv)
    estimate, stderr = samples.mean(), samples.std() / np.sqrt(S)
    assert abs(bound(toy, params, variational) - estimate) < 4.0 * stderr


def test_full_with_z_equal_x_and_optimal_q_is_the_exact_evidence() -> None:
    toy = make_toy(seed=3, n=15)
    variational = Variational("full", False)
    params = VariationalParameters.at_prior(toy.kernel, toy.X, toy.X[:0], variational, TINY_JITTER)
    factors = prior_factors(toy.kernel, params.Z, params.Zo, TINY_JITTER)
    q = optimal_q(toy.kernel, toy.noise, params.Z, params.Zo, factors, variational, toy.X, toy.y)
    params.set_whitened(q, factors, variational)
    assert bound(toy, params, variational) == pytest.approx(exact_lml(toy), rel=1e-8)


def collapsed_solve(toy: Toy) -> float:
    """L_c* of App. C (the optimal collapsed SOLVE bound), densely."""
    P = dense_prior(toy)
    s2, y = float(toy.noise), dense(toy.y)
    A = P.Qff + s2 * np.eye(len(y))
    Cfv_Cvv_inv = np.linalg.solve(P.Cvv, P.Cvf).T
    inner = P.Cvv + P.Cvf @ np.linalg.solve(A, P.Cvf.T)
    m_v = P.Cvv @ np.linalg.solve(inner, P.Cvf @ np.linalg.solve(A, y))
    S_v = P.Cvv @ np.linalg.solve(P.Cvv + P.Cvf @ P.Cvf.T / s2, P.Cvv)
    B = Cfv_Cvv_inv @ P.Cvf
    trace = np.trace(P.Cff - B @ np.linalg.solve(B + s2 * np.eye(len(y)), B))
    kl = 0.5 * (
        np.linalg.slogdet(P.Cvv)[1]
        - np.linalg.slogdet(S_v)[1]
        - len(m_v)
        + np.trace(np.linalg.solve(P.Cvv, S_v))
        + m_v @ np.linalg.solve(P.Cvv, m_v)
    )
    return gauss_logpdf(y, Cfv_Cvv_inv @ m_v, A) - trace / (2 * s2) - kl


@pytest.mark.parametrize("whiten", WHITEN)
def test_optimal_q_gives_the_collapsed_bound_and_the_sandwich(toy: Toy, whiten: bool) -> None:
    """App. C: uncollapsed at q* = L_c*, and SGPR(Z) ≤ SOLVE* ≤ SGPR(Z∪O) ≤ log p(y)."""
    variational = Variational("solve", whiten)
    params = VariationalParameters.at_prior(toy.kernel, toy.Z, toy.Zo, variational, TINY_JITTER)
    factors = prior_factors(toy.kernel, params.Z, params.Zo, TINY_JITTER)
    q = optimal_q(toy.kernel, toy.noise, toy.Z, toy.Zo, factors, variational, toy.X, toy.y)
    params.set_whitened(q, factors, variational)
    solve = bound(toy, params, variational)
    assert solve == pytest.approx(collapsed_solve(toy), rel=1e-8)
    union = torch.cat([toy.Z, toy.Zo])
    assert titsias_bound(toy, toy.Z) < solve < titsias_bound(toy, union) < exact_lml(toy)


def test_odvgp_at_its_optimum_is_eq_10(toy: Toy) -> None:
    """Eq. 10: S_v = C_vv and q(u) optimal give log N(y | C_fv C_vv⁻¹ m_v, A) − tr/2σ² − KL."""
    variational = Variational("odvgp", False)
    params = VariationalParameters.at_prior(toy.kernel, toy.Z, toy.Zo, variational, TINY_JITTER)
    factors = prior_factors(toy.kernel, params.Z, params.Zo, TINY_JITTER)
    q = optimal_q(toy.kernel, toy.noise, toy.Z, toy.Zo, factors, variational, toy.X, toy.y)
    params.set_whitened(q, factors, variational)
    P = dense_prior(toy)
    # Unwhitened ODVGP holds Salimbeni et al.'s dual weights a = C_vv⁻¹ m_v.
    s2, y, m_v = float(toy.noise), dense(toy.y), P.Cvv @ dense(params.m_v)
    mean = np.linalg.solve(P.Cvv, P.Cvf).T @ m_v
    eq10 = (
        gauss_logpdf(y, mean, P.Qff + s2 * np.eye(len(y)))
        - np.trace(P.Kff - P.Qff) / (2 * s2)
        - 0.5 * m_v @ np.linalg.solve(P.Cvv, m_v)
    )
    assert bound(toy, params, variational) == pytest.approx(eq10, rel=1e-8)


@pytest.mark.parametrize("family", ["full", "solve", "odvgp"])
@pytest.mark.parametrize("whiten", WHITEN)
def test_optimal_q_is_a_stationary_point(toy: Toy, family: str, whiten: bool) -> None:
    variational = Variational(family, whiten)  # type: ignore[arg-type]
    params = VariationalParameters.at_prior(toy.kernel, toy.Z, toy.Zo, variational, TINY_JITTER)
    factors = prior_factors(toy.kernel, params.Z, params.Zo, TINY_JITTER)
    q = optimal_q(toy.kernel, toy.noise, params.Z, params.Zo, factors, variational, toy.X, toy.y)
    params.set_whitened(q, factors, variational)
    terms = elbo(toy.kernel, toy.noise, params, variational, toy.X, toy.y, 40, TINY_JITTER)
    terms.value.backward()
    for name in ("m_u", "L_u", "m_v", "L_v"):
        grad = getattr(params, name).grad
        if grad is not None and grad.numel():
            assert float(grad.abs().max()) < 1e-6, name


@pytest.mark.parametrize("family", ["full", "solve", "odvgp"])
@pytest.mark.parametrize("whiten", WHITEN)
def test_gradients_reach_z_o_and_theta(toy: Toy, family: str, whiten: bool) -> None:
    kernel = toy.kernel
    noise = GaussianNoise(0.05).to(DTYPE)
    variational = Variational(family, whiten)  # type: ignore[arg-type]
    params = VariationalParameters.at_prior(kernel, toy.Z, toy.Zo, variational, TINY_JITTER)
    factors = prior_factors(kernel, params.Z, params.Zo, TINY_JITTER)
    params.set_whitened(random_q(params.num_inducing, params.num_orthogonal), factors, variational)
    terms = elbo(
        kernel, noise.variance, params, variational, toy.X[:16], toy.y[:16], 40, TINY_JITTER
    )
    terms.value.backward()
    tensors = {"Z": params.Z, "m_u": params.m_u, "noise": noise.raw_variance}
    tensors.update({f"kernel.{n}": p for n, p in kernel.named_parameters()})
    if family != "full":
        tensors["O"] = params.Zo
    for name, t in tensors.items():
        assert t.grad is not None and torch.isfinite(t.grad).all(), name
        assert float(t.grad.abs().max()) > 0.0, name


def optimal_bound(toy: Toy, Zo: torch.Tensor, jitter: Jitter) -> float:
    variational = Variational("solve", False)
    params = VariationalParameters.at_prior(toy.kernel, toy.Z, Zo, variational, jitter)
    factors = prior_factors(toy.kernel, toy.Z, Zo, jitter)
    q = optimal_q(toy.kernel, toy.noise, toy.Z, Zo, factors, variational, toy.X, toy.y)
    params.set_whitened(q, factors, variational)
    return float(full_elbo(toy.kernel, toy.noise, params, variational, toy.X, toy.y, jitter).value)


def test_o_on_top_of_z_factors_with_the_relative_jitter(toy: Toy) -> None:
    """A point of O on a point of Z makes C_vv singular; the jitter relative to the kernel
    variance (not to C_vv's vanishing diagonal) keeps it factorable, and the copy adds nothing."""
    jitter = Jitter()  # the engine's default first rung
    Zo = torch.cat([toy.Z[:2], toy.Zo])
    with torch.no_grad():
        factors = prior_factors(toy.kernel, toy.Z, Zo, jitter)
    assert torch.isfinite(factors.L_v).all()
    assert float(torch.diagonal(factors.L_v).min()) > 0.0
    with_copies = optimal_bound(toy, Zo, jitter)
    assert with_copies == pytest.approx(optimal_bound(toy, toy.Zo, jitter), rel=1e-6)


def test_unwhitened_odvgp_with_many_orthogonal_points_fits() -> None:
    """ODVGP with 5 + 95 points on 100 data (the paper's Snelson setting), q at the prior, Adam:
    its mean weights are the dual a (m̃_v = L_vᵀ a), so a step is not amplified by L_v⁻¹ and the
    fit converges as the whitened one does. With m̃_v = L_v⁻¹ m_v the first epoch's mean ELBO
    was −560 nats/point and 20 epochs ended 0.7 nats/point below the whitened fit."""
    from gp_mapper.engine.solvegp import SolveGP

    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0.0, 6.0, 100))[:, None]
    y = np.sin(1.6 * X[:, 0]) + 0.3 * rng.standard_normal(100)
    final = {}
    for whiten in WHITEN:
        model = SolveGP(
            SquaredExponential(1.0, 1.0), 0.1, num_inducing=5, num_orthogonal=95,
            family="odvgp", whiten=whiten, batch_size=20, epochs=20, validation=0.0,
            warm_start=False, standardise="none", prefit_points=0, device="cpu",
        )  # fmt: skip
        assert model.fit(X, y).accepted
        final[whiten] = model.report.details["elbo_per_point"]
        assert model.elbo_history[0] / 100 > -20.0  # no blow-up in the first epoch
    assert final[False] == pytest.approx(final[True], abs=0.2)
