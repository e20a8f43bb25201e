"""The CaGP posterior: exact at I = N, never below the exact variance, monotone in nested actions
(Wenger et al. 2024, Prop. S1), CaGP-CG's mean is CG's iterate (Sec. 4), and the variance
split."""

from __future__ import annotations

import torch

from gp_mapper.engine import Constant, Matern52
from gp_mapper.engine.cagp import Actions, BlockSparseActions, CaGPPosterior, cg_actions

from .conftest import DTYPE, N, Problem, exact_variance, make_problem

TOL = {"rtol": 1e-7, "atol": 1e-9}


def query_points(seed: int = 11) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(50, 2, dtype=DTYPE, generator=g) * 4.0 - 0.5  # inside and around the data


def posterior(p: Problem, actions: Actions, chunk: int = 64) -> CaGPPosterior:
    return CaGPPosterior.build(p.kernel, float(p.noise), p.X, p.y, actions, chunk=chunk, jitter=0.0)


def orthonormal(S: torch.Tensor) -> Actions:
    return Actions(torch.linalg.qr(S)[0], None)


def test_with_n_actions_it_is_the_exact_gp(problem: Problem) -> None:
    Xs = query_points()
    blocks = BlockSparseActions.random(N, N, torch.Generator().manual_seed(0))
    mean, var = posterior(problem, blocks()).predict(Xs)
    K_hat = problem.kernel.K(problem.X) + problem.noise * torch.eye(N, dtype=DTYPE)
    with torch.no_grad():
        mean_ref = problem.kernel.K(Xs, problem.X) @ torch.linalg.solve(K_hat, problem.y)
    torch.testing.assert_close(mean, mean_ref, **TOL)
    torch.testing.assert_close(var, exact_variance(problem, Xs), **TOL)


def test_variance_is_above_exact_and_falls_with_nested_actions(problem: Problem) -> None:  # (e)
    Xs = torch.cat([query_points(), problem.X[:20]])
    exact = exact_variance(problem, Xs)
    S = torch.randn(N, 120, dtype=DTYPE, generator=torch.Generator().manual_seed(3))
    previous = problem.kernel.K_diag(Xs)
    for i in (5, 20, 60, 120):  # nested: each S is the first i columns of the next
        _, var = posterior(problem, orthonormal(S[:, :i])).predict(Xs)
        assert torch.all(var >= exact - 1e-10)
        assert torch.all(var <= previous + 1e-10)
        previous = var
    assert float((previous - exact).max()) > 1e-4  # still strictly above at I < N


def test_chunked_prediction_equals_one_chunk(problem: Problem) -> None:
    Xs = query_points()
    actions = BlockSparseActions.random(N, 24, torch.Generator().manual_seed(1))()
    one = posterior(problem, actions, chunk=1000).predict(Xs)
    many = posterior(problem, actions, chunk=7).predict(Xs)
    torch.testing.assert_close(many, one, rtol=1e-12, atol=1e-13)


def dense_cg(A: torch.Tensor, b: torch.Tensor, steps: int) -> torch.Tensor:
    """Textbook CG from 0, a reference independent of the engine's."""
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    for _ in range(steps):
        Ap = A @ p
        alpha = (r @ r) / (p @ Ap)
        x = x + alpha * p
        r_new = r - alpha * Ap
        p = r_new + (r_new @ r_new) / (r @ r) * p
        r = r_new
    return x


def test_cagp_cg_mean_is_the_cg_iterate(problem: Problem) -> None:  # (f)
    # An identity of exact arithmetic: it holds to round-off while CG's residuals stay
    # orthogonal, which at this conditioning (κ(K̂) ≈ 1.5e3) is the first ~10 steps.
    steps = 8
    result = cg_actions(problem.kernel, problem.noise, problem.X, problem.y, steps, tolerance=0.0)
    assert result.iterations == steps and result.actions.num_actions == steps
    Q = result.actions.values
    torch.testing.assert_close(Q.mT @ Q, torch.eye(steps, dtype=DTYPE), rtol=0, atol=1e-12)
    with torch.no_grad():
        K_hat = problem.kernel.K(problem.X) + problem.noise * torch.eye(N, dtype=DTYPE)
        v = dense_cg(K_hat, problem.y, steps)
        Xs = query_points()
        mean_ref = problem.kernel.K(Xs, problem.X) @ v
    mean, _ = posterior(problem, result.actions).predict(Xs)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(result.solution, v, rtol=1e-8, atol=1e-10)


def test_layers_split_the_variance_into_exact_and_computational(problem: Problem) -> None:
    Xs = query_points()
    actions = BlockSparseActions.random(N, 24, torch.Generator().manual_seed(2))()
    post = posterior(problem, actions)
    layers = post.variance_parts(Xs)
    mean, var = post.predict(Xs)
    torch.testing.assert_close(layers["mean"], mean)
    torch.testing.assert_close(layers["variance"], var)
    torch.testing.assert_close(layers["predictive_variance"], var + float(problem.noise))
    torch.testing.assert_close(layers["mathematical_variance"], exact_variance(problem, Xs), **TOL)
    torch.testing.assert_close(
        layers["mathematical_variance"] + layers["computational_variance"], var, **TOL
    )
    assert torch.all(layers["computational_variance"] >= 0.0)
    grid_layers = post.layers(Xs)  # what the map draws: the two shares, no clash with mean
    assert set(grid_layers) == {"mathematical_variance", "computational_variance"}
    torch.testing.assert_close(
        grid_layers["computational_variance"], layers["computational_variance"]
    )


def test_prior_variance_counts_what_the_projections_tell_of_the_offset() -> None:
    p = make_problem(120)
    kernel = (Constant(4.0) + Matern52(1.0, 0.5)).to(DTYPE)
    p = p._replace(kernel=kernel, y=p.y + 3.0)
    blocks = BlockSparseActions.random(120, 120, torch.Generator().manual_seed(4))
    post = posterior(p, blocks())
    far = torch.full((1, 2), 1.0e4, dtype=DTYPE)
    _, var_far = post.predict(far)
    torch.testing.assert_close(post.prior_variance(far), var_far, rtol=1e-8, atol=1e-10)
    assert float(post.prior_variance(far)) < float(kernel.K_diag(far).detach())
