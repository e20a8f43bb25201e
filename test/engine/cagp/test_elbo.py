"""The CaGP ELBO (Wenger et al. 2024, eq. 11, in our stable form) against dense references.

It is the exact NLL at full rank, a bound for any actions, invariant to their column scaling,
and eq. 11 is −E_q log p(y | f) + KL(q ‖ p) computed by brute force.
"""

from __future__ import annotations

import math

import pytest
import torch

from gp_mapper.engine.cagp import Actions, BlockSparseActions, evaluate_elbo

from .conftest import DTYPE, N, Problem, brute_force_elbo, eq11, exact_nll

# A small block layout: I = 24 blocks of k = 10 on N = 240 points.
NUM_ACTIONS = 24
# Float64 sums of a few hundred terms of size ~N; the bound and the NLL are O(100) nats.
REL = 1e-9


def elbo(p: Problem, actions: Actions) -> float:
    with torch.no_grad():
        return float(evaluate_elbo(p.kernel, p.noise, p.X, p.y, actions, jitter=0.0).loss)


def dense_actions(S: torch.Tensor) -> Actions:
    """Orthonormal columns with the span of S (the posterior depends only on the span)."""
    Q, _ = torch.linalg.qr(S)
    return Actions(Q, None)


def random_dense(n: int, i: int, seed: int) -> torch.Tensor:
    return torch.randn(n, i, dtype=DTYPE, generator=torch.Generator().manual_seed(seed))


def test_elbo_with_n_actions_is_the_exact_nll(problem: Problem) -> None:  # (a)
    nll = exact_nll(problem)
    blocks = BlockSparseActions.random(N, N, torch.Generator().manual_seed(0))
    assert elbo(problem, blocks()) == pytest.approx(nll, rel=REL)
    assert elbo(problem, dense_actions(random_dense(N, N, 1))) == pytest.approx(nll, rel=REL)


@pytest.mark.parametrize("seed", range(4))
def test_elbo_bounds_the_exact_nll_for_random_actions(problem: Problem, seed: int) -> None:  # (b)
    nll = exact_nll(problem)
    blocks = BlockSparseActions.random(N, NUM_ACTIONS, torch.Generator().manual_seed(seed))
    assert elbo(problem, blocks()) > nll
    assert elbo(problem, dense_actions(random_dense(N, NUM_ACTIONS, seed))) > nll


def test_elbo_is_invariant_to_column_scaling(problem: Problem) -> None:  # (c)
    blocks = BlockSparseActions.random(N, NUM_ACTIONS, torch.Generator().manual_seed(2))
    before = elbo(problem, blocks())
    scale = torch.exp(3.0 * torch.randn(NUM_ACTIONS, 1, generator=torch.Generator().manual_seed(9)))
    with torch.no_grad():
        blocks.raw.mul_(scale.to(DTYPE))
    assert elbo(problem, blocks()) == pytest.approx(before, rel=REL)
    # Eq. 11 as printed (its Σ log‖s_j‖² term, the July-2025 fix) is itself invariant, and the
    # stable form equals it; the earlier log(Σ‖s_j‖²) would not be.
    S = blocks().dense(N)
    diagonal = torch.diag(scale[:, 0].to(DTYPE))
    assert eq11(problem, S @ diagonal) == pytest.approx(before, rel=REL)
    assert eq11(problem, S) == pytest.approx(before, rel=REL)


def test_eq11_equals_the_brute_force_expected_loglik_plus_kl(problem: Problem) -> None:  # (d)
    S = random_dense(N, NUM_ACTIONS, 5)
    brute = brute_force_elbo(problem, S)
    assert eq11(problem, S) == pytest.approx(brute, rel=1e-7)
    assert elbo(problem, dense_actions(S)) == pytest.approx(brute, rel=1e-7)
    blocks = BlockSparseActions.random(N, NUM_ACTIONS, torch.Generator().manual_seed(6))()
    assert elbo(problem, blocks) == pytest.approx(
        brute_force_elbo(problem, blocks.dense(N)), rel=1e-7
    )


def test_ragged_blocks_keep_every_point_and_equal_eq11(problem: Problem) -> None:
    num = 23  # 240 = 23·10 + 10: ten blocks of 11 points, thirteen of 10
    blocks = BlockSparseActions.random(N, num, torch.Generator().manual_seed(7))
    index, mask = blocks.index, blocks.mask
    assert sorted(index[mask].tolist()) == list(range(N))
    assert sorted(mask.sum(1).tolist()) == [10] * 13 + [11] * 10
    S = blocks().dense(N)
    torch.testing.assert_close(S.mT @ S, torch.eye(num, dtype=DTYPE))
    assert elbo(problem, blocks()) == pytest.approx(eq11(problem, S), rel=REL)


def test_gradients_reach_theta_noise_and_action_entries(problem: Problem) -> None:
    blocks = BlockSparseActions.random(N, 23, torch.Generator().manual_seed(8))  # ragged
    assert (~blocks.mask).sum() == 13
    raw_noise = torch.log(problem.noise).clone().requires_grad_(True)
    loss = evaluate_elbo(problem.kernel, torch.exp(raw_noise), problem.X, problem.y, blocks()).loss
    loss.backward()
    for p in (*problem.kernel.parameters(), raw_noise, blocks.raw):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    # Padding entries never move.
    assert torch.all(blocks.raw.grad[~blocks.mask] == 0)


def test_top_eigenvector_actions_give_a_tighter_bound_than_random_ones(problem: Problem) -> None:
    # Lemma S5: the top-I eigenvectors of K̂ are the information-optimal actions (767.8 vs
    # 1410.4 in our first NumPy check of a problem of this shape).
    with torch.no_grad():
        K_hat = problem.kernel.K(problem.X) + problem.noise * torch.eye(N, dtype=DTYPE)
        eigenvectors = torch.linalg.eigh(K_hat).eigenvectors[:, -NUM_ACTIONS:]
    nll = exact_nll(problem)
    eigen = elbo(problem, Actions(eigenvectors, None))
    random = elbo(problem, dense_actions(random_dense(N, NUM_ACTIONS, 0)))
    assert nll < eigen < random


def test_refuses_impossible_block_layouts() -> None:
    with pytest.raises(ValueError, match="number of actions"):
        BlockSparseActions.random(10, 11, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="number of actions"):
        BlockSparseActions.random(10, 0, torch.Generator().manual_seed(0))


def test_elbo_gradients_equal_dense_autograd_of_eq11(problem: Problem) -> None:
    blocks = BlockSparseActions.random(N, 23, torch.Generator().manual_seed(10))
    raw_noise = torch.log(problem.noise).clone().requires_grad_(True)
    params = [*problem.kernel.parameters(), raw_noise, blocks.raw]

    def dense_eq11() -> torch.Tensor:
        # Eq. 11 as printed, on dense K and S (this S has SᵀS = I, so its last term is 0).
        S = blocks().dense(N)
        K = problem.kernel.K(problem.X)
        s2 = torch.exp(raw_noise)
        StKS = S.mT @ K @ S
        G = StKS + s2 * torch.eye(S.shape[1], dtype=DTYPE)
        v = torch.linalg.solve(G, S.mT @ problem.y)
        KS = K @ S
        misfit = problem.y - KS @ v
        trace_Ki = torch.trace(K) - torch.trace(KS @ torch.linalg.solve(G, KS.mT))
        n, i = S.shape
        return 0.5 * (
            (misfit @ misfit + trace_Ki) / s2
            + (n - i) * torch.log(s2)
            + n * math.log(2.0 * math.pi)
            + v @ StKS @ v
            - torch.trace(torch.linalg.solve(G, StKS))
            + torch.logdet(G)
        )

    ours = evaluate_elbo(
        problem.kernel, torch.exp(raw_noise), problem.X, problem.y, blocks(), jitter=0.0
    ).loss
    grads = torch.autograd.grad(ours, params)
    reference = dense_eq11()
    grads_ref = torch.autograd.grad(reference, params)
    assert float(ours.detach()) == pytest.approx(float(reference.detach()), rel=REL)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(g, g_ref, rtol=1e-7, atol=1e-9)
