"""The shared L-BFGS pieces of ``engine.core.fit``."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gp_mapper.engine.core.fit import fit_hyperparameters, single_step_lbfgs


def test_single_step_lbfgs_shortens_an_overshooting_step() -> None:
    # Torch caps a step's evaluations at 1.25·max_iter: with max_iter=1 the line search had no
    # trial left and took the overshooting step whole.
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    optimiser = single_step_lbfgs([p], lr=10.0)

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = 1000.0 * ((p - 1.0) ** 2).sum()
        loss.backward()
        return loss.detach()

    before = float(closure())
    optimiser.step(closure)
    assert float(closure()) < before


def _slow_rosenbrock(p: torch.nn.Parameter, delay: float) -> Callable[[], torch.Tensor]:
    def loss() -> torch.Tensor:
        time.sleep(delay)
        return (1.0 - p[0]) ** 2 + 100.0 * (p[1] - p[0] ** 2) ** 2

    return loss


def test_a_fit_out_of_time_keeps_the_best_point_it_evaluated() -> None:
    p = torch.nn.Parameter(torch.tensor([-1.2, 1.0], dtype=torch.float64))
    loss = _slow_rosenbrock(p, 0.02)
    start = time.perf_counter()
    result = fit_hyperparameters(loss, [p], max_iterations=500, max_seconds=0.3)
    elapsed = time.perf_counter() - start
    assert result.ok and "budget" in result.reason
    assert elapsed < 1.5  # the budget, one evaluation past it, and the final loss
    assert result.loss_after < result.loss_before
    with torch.no_grad():
        assert float(loss()) == result.loss_after  # the parameters hold the best point
    # Without a budget the same fit runs on to the minimum.
    q = torch.nn.Parameter(torch.tensor([-1.2, 1.0], dtype=torch.float64))
    full = fit_hyperparameters(_slow_rosenbrock(q, 0.0), [q], max_iterations=500)
    assert full.reason == "converged" and full.loss_after < result.loss_after
