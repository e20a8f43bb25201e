"""The stopped Cholesky against dense references: exactness with r = 0, collapse of the bounds
to the exact values at s = N and their order, the bounds in expectation (Bartels et al. 2023,
Thm. 2), the stop itself and the virtual N."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from gp_mapper.engine.acgp import stopped_cholesky

from .conftest import DTYPE, NOISE, GpSample, gp_sample

EXACT_RTOL = 1e-10  # with r = 0 the factor is exact: float64 round-off only


@pytest.mark.parametrize(("m0", "m"), [(1, 2), (7, 50), (100, 100), (300, 128), (600, 10)])
def test_no_stop_reproduces_exact_logdet_and_quadratic_form(
    sample: GpSample, m0: int, m: int
) -> None:
    result = stopped_cholesky(
        sample.kernel, NOISE, sample.X, sample.y, m, initial_block_size=m0, rel_tol=0.0
    )
    assert result.num_points == 600 and not result.stopped and result.exact
    assert result.logdet == pytest.approx(sample.logdet, rel=EXACT_RTOL)
    assert result.quad == pytest.approx(sample.quad, rel=EXACT_RTOL)
    assert result.log_density == pytest.approx(sample.log_density, rel=EXACT_RTOL)
    K = sample.kernel.K(sample.X) + NOISE * torch.eye(600, dtype=DTYPE)
    torch.testing.assert_close(result.L @ result.L.mT, K, rtol=0.0, atol=1e-12)
    # Every block after the first is checked, at its start s, ending at t.
    assert [b.s for b in result.history] == list(range(m0, 600, m))[: len(result.history)]
    assert all(b.t - b.s >= 2 for b in result.history)


def test_bounds_are_ordered_at_every_block(sample: GpSample) -> None:
    for n_total in (600, 10**6, 10**12):
        result = stopped_cholesky(
            sample.kernel, NOISE, sample.X, sample.y, 50, rel_tol=0.0, n_total=n_total
        )
        for b in result.history:
            assert b.L_D <= b.U_D and b.L_Q <= b.U_Q and b.lower <= b.upper
            assert all(math.isfinite(v) for v in b)


def test_bounds_are_ordered_where_data_are_dense() -> None:
    # Many near-duplicate inputs and a long lengthscale: k_s ≈ 0, so v_j ≈ σ² within round-off.
    dense = gp_sample(800, seed=3, lengthscale=5.0)
    result = stopped_cholesky(
        dense.kernel, NOISE, dense.X, dense.y, 100, rel_tol=0.0, n_total=10**12
    )
    for b in result.history:
        assert b.L_D <= b.U_D and b.L_Q <= b.U_Q


def test_bounds_in_expectation_bracket_the_exact_values() -> None:
    """Thm. 2: the mean over random permutations of each bound at a fixed s brackets the truth."""
    data = gp_sample(1000, seed=7)
    s, m, permutations = 200, 100, 150
    rng = np.random.default_rng(11)
    rows = []
    for _ in range(permutations):
        perm = torch.as_tensor(rng.permutation(1000))
        result = stopped_cholesky(
            data.kernel,
            NOISE,
            data.X[perm],
            data.y[perm],
            m,
            initial_block_size=s,
            rel_tol=0.0,
            max_points=s + m,
            n_total=1000,
        )
        (b,) = result.history
        rows.append((b.L_D, b.U_D, b.L_Q, b.U_Q))
    L_D, U_D, L_Q, U_Q = np.mean(rows, axis=0)
    assert L_D <= data.logdet <= U_D
    assert L_Q <= data.quad <= U_Q


def test_stop_keeps_the_last_block_and_its_exact_subset() -> None:
    data = gp_sample(2000, seed=5)
    m0, m = 200, 200
    result = stopped_cholesky(
        data.kernel, NOISE, data.X, data.y, m, initial_block_size=m0, rel_tol=0.01
    )
    assert result.stopped
    M = result.num_points
    assert m0 + m <= M < 2000 and (M - m0) % m == 0
    assert result.history[-1].t == M  # the stopping block was factorised too
    last = result.history[-1]
    assert last.relative_gap < 0.01
    assert all(b.relative_gap >= 0.01 for b in result.history[:-1])
    X_M, y_M = data.X[:M], data.y[:M]
    K = data.kernel.K(X_M) + NOISE * torch.eye(M, dtype=DTYPE)
    L = torch.linalg.cholesky(K)
    a = torch.linalg.solve_triangular(L, y_M[:, None], upper=False)[:, 0]
    exact = -0.5 * (float(torch.logdet(K)) + float(a @ a) + M * math.log(2.0 * math.pi))
    assert result.log_density == pytest.approx(exact, rel=EXACT_RTOL)
    torch.testing.assert_close(result.alpha, a, rtol=1e-9, atol=1e-10)


def test_virtual_n_without_a_stop_is_flagged(sample: GpSample) -> None:
    result = stopped_cholesky(
        sample.kernel, NOISE, sample.X, sample.y, 100, rel_tol=0.0, max_points=400, n_total=10**12
    )
    assert result.num_points == 400 and not result.stopped and not result.exact
    assert result.history[-1].t == 400


def test_small_data_is_factorised_exactly_without_a_check(sample: GpSample) -> None:
    result = stopped_cholesky(sample.kernel, NOISE, sample.X[:30], sample.y[:30], 50)
    assert result.num_points == 30 and result.history == () and result.exact


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_size": 1}, "block_size"),
        ({"initial_block_size": 0}, "initial_block_size"),
        ({"n_total": 10}, "n_total"),
        ({"rel_tol": -1.0}, "tolerances"),
    ],
)
def test_bad_settings_are_refused(sample: GpSample, kwargs: dict, match: str) -> None:
    args = {"block_size": 50, **kwargs}
    m = args.pop("block_size")
    with pytest.raises(ValueError, match=match):
        stopped_cholesky(sample.kernel, NOISE, sample.X, sample.y, m, **args)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(sample: GpSample) -> None:
    cpu = stopped_cholesky(sample.kernel, NOISE, sample.X, sample.y, 64, rel_tol=0.0)
    kernel = copy.deepcopy(sample.kernel).to("cuda")
    gpu = stopped_cholesky(kernel, NOISE, sample.X.cuda(), sample.y.cuda(), 64, rel_tol=0.0)
    assert gpu.logdet == pytest.approx(cpu.logdet, rel=EXACT_RTOL)
    assert gpu.quad == pytest.approx(cpu.quad, rel=EXACT_RTOL)
    assert gpu.logdet == pytest.approx(sample.logdet, rel=EXACT_RTOL)
