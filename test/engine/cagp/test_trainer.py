"""The trainer on a toy loss: the linear schedule over all epochs, early stopping, failures."""

from __future__ import annotations

import math

import pytest
import torch

from gp_mapper.engine import NumericalError
from gp_mapper.engine.cagp import TrainerConfig, train
from gp_mapper.engine.cagp.trainer import LR_END_FACTOR


def quadratic() -> tuple[torch.Tensor, object]:
    x = torch.tensor([3.0, -2.0], dtype=torch.float64, requires_grad=True)
    return x, lambda: (x * x).sum()


def test_learning_rate_decays_linearly_to_a_tenth_over_all_epochs() -> None:
    x, loss = quadratic()
    result = train(loss, [x], TrainerConfig(epochs=50, learning_rate=0.2))
    rates = [r.learning_rate for r in result.history]
    assert rates[0] == pytest.approx(0.2)
    # Not torch's default of 5 steps: still decaying half way, a tenth only at the end.
    assert rates[25] == pytest.approx(0.2 * (1.0 - (1.0 - LR_END_FACTOR) * 25 / 50))
    assert rates[-1] == pytest.approx(0.2 * (1.0 - (1.0 - LR_END_FACTOR) * 49 / 50))
    assert result.epochs == 50 and result.kept_epoch == 50
    assert float((x.detach() ** 2).sum()) < 13.0


def test_lbfgs_converges_on_a_quadratic() -> None:
    x, loss = quadratic()
    result = train(loss, [x], TrainerConfig(epochs=5, learning_rate=1.0, optimizer="lbfgs"))
    assert result.final_loss < 13.0 and float((x.detach() ** 2).sum()) < 1e-8


def test_early_stopping_keeps_the_best_validation_epoch() -> None:
    x, loss = quadratic()
    # The validation NLL is best at the fourth check, then rises: overfitting.
    calls = iter([5.0, 4.0, 3.0, 2.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5])
    seen: list[tuple[torch.Tensor, float]] = []

    def validation() -> float:
        value = next(calls)
        seen.append((x.detach().clone(), value))
        return value

    config = TrainerConfig(epochs=100, learning_rate=0.1, validate_every=2, patience=3)
    result = train(loss, [x], config, validation_nll=validation)
    assert result.best_validation_nll == 1.0 and result.kept_epoch == 8
    assert result.epochs == 14 and "early stop" in result.reason
    best = next(v for v, nll in seen if nll == 1.0)
    torch.testing.assert_close(x.detach(), best, rtol=0, atol=0)


def test_a_failing_loss_stops_training_and_keeps_the_last_good_values() -> None:
    x, loss = quadratic()
    count = {"n": 0}

    def flaky() -> torch.Tensor:
        count["n"] += 1
        if count["n"] > 3:
            raise NumericalError("not positive definite")
        return loss()

    result = train(flaky, [x], TrainerConfig(epochs=10, learning_rate=0.1))
    assert result.epochs == 3 and result.kept_epoch == 3 and "epoch 4" in result.reason
    assert torch.isfinite(x).all()
    assert math.isfinite(result.final_loss)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="optimizer"):
        TrainerConfig(optimizer="sgd")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="learning_rate"):
        TrainerConfig(learning_rate=0.0)
