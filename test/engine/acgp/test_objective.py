"""The fitting objective: its closed-form backward against autograd of the dense expression,
the estimators, and the refinement schedule (Bartels et al. 2023, App. B.2)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from gp_mapper.engine import GaussianNoise, Matern52
from gp_mapper.engine.acgp import (
    SubsetDataFit,
    acgp_objective,
    extrapolated_log_evidence,
    refine_hyperparameters,
    refinement_tolerance,
    stopped_cholesky,
    subset_data_fit,
    subset_matrix,
)
from gp_mapper.engine.errors import NumericalError

from .conftest import DTYPE, NOISE, GpSample, gp_sample


def _dense_phi(K: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.logdet(K) + y @ torch.linalg.solve(K, y)


def test_custom_backward_equals_autograd_of_the_dense_objective(sample: GpSample) -> None:
    M, N = 150, 600
    X, y = sample.X[:M], sample.y[:M].clone().requires_grad_(True)
    kernels = [Matern52(1.3, 0.2).to(DTYPE) for _ in range(2)]
    noises = [GaussianNoise(NOISE).to(DTYPE) for _ in range(2)]
    objectives = []
    for kernel, noise, use_custom in zip(kernels, noises, (True, False), strict=True):
        K = subset_matrix(kernel, noise.variance, X)
        phi = subset_data_fit(K, y) if use_custom else _dense_phi(K, y)
        objectives.append(acgp_objective(phi, M, N))
    grads = [
        torch.autograd.grad(obj, [*k.parameters(), *n.parameters(), y])
        for obj, k, n in zip(objectives, kernels, noises, strict=True)
    ]
    assert float(objectives[0].detach()) == pytest.approx(float(objectives[1].detach()), rel=1e-12)
    for custom, dense in zip(*grads, strict=True):
        torch.testing.assert_close(custom, dense, rtol=1e-8, atol=1e-10)


def test_custom_backward_passes_gradcheck() -> None:
    data = gp_sample(12, seed=2)
    K0 = data.kernel.K(data.X) + NOISE * torch.eye(12, dtype=DTYPE)
    A = K0.clone().requires_grad_(True)
    y = data.y.clone().requires_grad_(True)

    def phi(A: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        K = 0.5 * (A + A.mT)  # a symmetric function of the input, as K(θ) is
        return SubsetDataFit.apply(K, y, torch.linalg.cholesky(K.detach()))

    assert torch.autograd.gradcheck(phi, (A, y), eps=1e-6, atol=1e-6)


def test_factor_from_the_stopped_cholesky_gives_the_same_objective(sample: GpSample) -> None:
    result = stopped_cholesky(sample.kernel, NOISE, sample.X, sample.y, 100, rel_tol=0.3)
    M = result.num_points
    K = subset_matrix(sample.kernel, torch.tensor(NOISE, dtype=DTYPE), sample.X[:M])
    phi = subset_data_fit(K, sample.y[:M], result.L)
    assert float(phi) == pytest.approx(result.logdet + result.quad, rel=1e-10)
    estimate = float(acgp_objective(phi, M, 600))
    assert estimate == pytest.approx(extrapolated_log_evidence(result.log_density, M, 600))


def test_extrapolation_scales_by_n_over_m() -> None:
    # (N/M)·log p(y_{:M}), not the paper's misprinted (N − M)/M.
    assert extrapolated_log_evidence(-100.0, 400, 1000) == pytest.approx(-250.0)
    assert extrapolated_log_evidence(-100.0, 1000, 1000) == -100.0


def test_refinement_schedule_is_two_thirds_to_the_k_plus_one() -> None:
    assert [refinement_tolerance(k) for k in range(3)] == pytest.approx([2 / 3, 4 / 9, 8 / 27])


def _quadratic_loss(target: float, calls: list[float]):
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=DTYPE))

    def loss_at(r: float):
        calls.append(r)
        return lambda: ((p - target) ** 2).sum() + 1.0

    return p, loss_at


def test_refinement_warm_starts_and_floors_the_tolerance() -> None:
    calls: list[float] = []
    p, loss_at = _quadratic_loss(1.0, calls)
    result = refine_hyperparameters(
        loss_at, [p], refinements=6, max_iterations=50, tolerance_floor=0.1
    )
    assert result.ok and result.restarts == 6 and result.failures == 0
    assert calls == pytest.approx([max(refinement_tolerance(k), 0.1) for k in range(6)])
    assert float(p.detach()) == pytest.approx(1.0, abs=1e-4)
    assert result.loss_after <= result.loss_before


def test_refinement_stops_after_two_failures_at_the_last_accepted_point() -> None:
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=DTYPE))
    attempts: list[float] = []

    def loss_at(r: float):
        attempts.append(r)
        if len(attempts) > 1:

            def failing() -> torch.Tensor:
                raise NumericalError("block not positive definite")

            return failing
        return lambda: ((p - 1.0) ** 2).sum()

    result = refine_hyperparameters(loss_at, [p], refinements=5, max_iterations=50)
    assert result.restarts == 1 and result.failures == 2 and "failed" in result.reason
    # The failed restarts were at the same k: the attempt count minus the failures.
    assert attempts == pytest.approx([2 / 3, 4 / 9, 4 / 9])
    assert float(p.detach()) == pytest.approx(1.0, abs=1e-4)


def test_refinement_respects_the_iteration_budget() -> None:
    calls: list[float] = []
    p, loss_at = _quadratic_loss(-2.0, calls)
    result = refine_hyperparameters(loss_at, [p], refinements=50, max_iterations=3)
    assert result.iterations <= 3 + 1 and "budget" in result.reason


def test_fit_objective_gradient_through_the_kernel(sample: GpSample) -> None:
    """One finite-difference check of d(objective)/d(raw lengthscale) at a fixed M."""
    M, N = 200, 600
    kernel = copy.deepcopy(sample.kernel)
    noise = torch.tensor(NOISE, dtype=DTYPE)
    raw = kernel.raw_lengthscale
    raw.requires_grad_(True)

    def objective() -> torch.Tensor:
        K = subset_matrix(kernel, noise, sample.X[:M])
        return acgp_objective(subset_data_fit(K, sample.y[:M]), M, N)

    (grad,) = torch.autograd.grad(objective(), [raw])
    h = 1e-6
    with torch.no_grad():
        raw += h
        up = float(objective())
        raw -= 2 * h
        down = float(objective())
        raw += h
    assert float(grad) == pytest.approx((up - down) / (2 * h), rel=1e-5)
    assert math.isfinite(float(grad))


def test_refinement_ends_as_converged_before_the_restart_cap() -> None:
    calls: list[float] = []
    p, loss_at = _quadratic_loss(1.0, calls)
    result = refine_hyperparameters(
        loss_at, [p], refinements=1000, max_iterations=10000, tolerance_floor=0.1
    )
    assert result.ok and "converged" in result.reason
    assert result.restarts < 60 and result.iterations < 200
    assert float(p.detach()) == pytest.approx(1.0, abs=1e-6)


def test_refinement_moves_on_a_vanishing_gradient() -> None:
    # From gpytorch's start in 32 dimensions the gradient is ~1e-8: the schedule must not stop
    # on a gradient tolerance (the authors' gtol = 0).
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=DTYPE))

    def loss_at(r: float):
        return lambda: 1e-9 * (((p - 1.0) ** 2).sum() + 1.0)

    result = refine_hyperparameters(loss_at, [p], refinements=100, max_iterations=200)
    assert result.ok
    assert float(p.detach()) == pytest.approx(1.0, abs=1e-3)


def test_refinement_recovers_from_a_history_that_stalls() -> None:
    # The loss jumps between restarts (M moves with θ): a kept history must not freeze θ.
    p = torch.nn.Parameter(torch.tensor([4.0, -3.0], dtype=DTYPE))
    scales = iter([1.0, 30.0, 0.05, 5.0] + [1.0] * 200)

    def loss_at(r: float):
        s = next(scales)
        return lambda: s * (p[0] - 1.0) ** 2 + (p[1] + 0.5) ** 2 / s + 1.0

    result = refine_hyperparameters(loss_at, [p], refinements=100, max_iterations=300)
    assert result.ok and result.failures == 0
    assert p.detach().tolist() == pytest.approx([1.0, -0.5], abs=1e-4)
