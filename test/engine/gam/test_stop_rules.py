"""The additive GP's L-BFGS stops: a stalled line search ends the fit, tiny working steps do
not (driven by a stand-in optimiser whose iterations cost and gain what the test says)."""

from __future__ import annotations

import types

import pytest
import torch

from gp_mapper.engine.gam import model as gam_model
from gp_mapper.engine.gam.model import STALL_NATS, STALL_PATIENCE, STALLED_EVALUATIONS, AdditiveGP


class _Optimiser:
    """Each step calls the closure ``evaluations`` times and returns a loss lower by ``gain``."""

    def __init__(self, evaluations: int, gain: float) -> None:
        self.evaluations, self.gain, self.value = evaluations, gain, 1.0

    def zero_grad(self) -> None:
        pass

    def step(self, closure):
        for _ in range(self.evaluations):
            closure()
        self.value -= self.gain
        return torch.tensor(self.value)


def _fit(monkeypatch: pytest.MonkeyPatch, evaluations: int, gain: float, n: int) -> tuple[int, str]:
    optimiser = _Optimiser(evaluations, gain)
    monkeypatch.setattr(gam_model, "single_step_lbfgs", lambda params: optimiser)
    p = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)

    def loss() -> torch.Tensor:
        value = (p * 2.0).sum()  # a gradient far from zero: the gradient rule never fires
        return value

    return AdditiveGP._lbfgs(types.SimpleNamespace(iterations=50), loss, [p], None, n)


def test_a_stalled_line_search_ends_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 10_000
    gain = 0.5 * STALL_NATS / n  # above the per-datum change rule, below the stall's nats
    assert gain > gam_model.CHANGE_TOLERANCE
    iterations, reason = _fit(monkeypatch, STALLED_EVALUATIONS + 1, gain, n)
    # The first iteration has no previous value to compare; then STALL_PATIENCE in a row.
    assert reason == "converged (the line search stalled)"
    assert iterations == 1 + STALL_PATIENCE


def test_tiny_working_steps_and_real_progress_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 10_000
    # Two evaluations an iteration: a working line search, however small the gain.
    assert _fit(monkeypatch, 2, 0.5 * STALL_NATS / n, n) == (50, "iteration budget")
    # Many evaluations but a real gain in nats: still working.
    assert _fit(monkeypatch, STALLED_EVALUATIONS + 5, 2.0 * STALL_NATS / n, n) == (
        50,
        "iteration budget",
    )
