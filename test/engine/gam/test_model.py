"""The batch model ``gam``: state round trip, atomic fits, predictions per component and subset."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from gp_mapper.engine import StateError
from gp_mapper.engine.gam import POSTERIOR_FORMS, AdditiveGP

from .conftest import DTYPE, NOISE, Problem

ITERATIONS = 15
TEST_POINTS = torch.tensor([[0.1, 0.2], [0.5, 0.9], [0.95, 0.4], [3.0, -2.0]], dtype=DTYPE)


def fitted(problem: Problem, posterior: str) -> AdditiveGP:
    model = AdditiveGP(problem.components, NOISE, posterior=posterior, iterations=ITERATIONS,
                       device="cpu", dtype=DTYPE)  # fmt: skip
    report = model.fit(problem.X, problem.y)
    assert report.accepted, report.reason
    return model


def saved_and_loaded(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


@pytest.mark.parametrize("posterior", POSTERIOR_FORMS)
def test_state_round_trips_bit_for_bit(problem: Problem, posterior: str) -> None:
    model = fitted(problem, posterior)
    again = AdditiveGP.from_state(saved_and_loaded(model.state_dict()), device="cpu")
    for a, b in zip(model.predict(TEST_POINTS), again.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    ours, theirs = model.predict_components(TEST_POINTS), again.predict_components(TEST_POINTS)
    for name in model.component_names:
        torch.testing.assert_close(ours[name], theirs[name], rtol=0.0, atol=0.0)
    assert again.hyperparameters() == model.hyperparameters()
    assert again.elbo(problem.X, problem.y) == model.elbo(problem.X, problem.y)


def test_a_state_of_another_model_or_version_is_refused(problem: Problem) -> None:
    state = fitted(problem, "full_coupled").state_dict()
    with pytest.raises(StateError, match="holds a 'exact' model"):
        AdditiveGP.from_state({**state, "model": np.array("exact")})
    with pytest.raises(StateError, match="format 99"):
        AdditiveGP.from_state({**state, "format_version": np.array(99)})
    with pytest.raises(StateError, match="malformed"):
        AdditiveGP.from_state({k: v for k, v in state.items() if k != "q.L_P"} | {"q.mean": 1})


@pytest.mark.parametrize("posterior", POSTERIOR_FORMS)
def test_a_failed_fit_leaves_the_model_unchanged(
    problem: Problem, posterior: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = fitted(problem, posterior)
    before = model.state_dict()
    mean, var = model.predict(TEST_POINTS)

    def not_positive_definite(A: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(A), torch.ones(A.shape[:-2], dtype=torch.int32)

    with monkeypatch.context() as patch:
        patch.setattr(torch.linalg, "cholesky_ex", not_positive_definite)
        report = model.fit(problem.X, problem.y + 1.0)
    assert not report.accepted and "not positive definite" in report.reason
    after = model.state_dict()
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    torch.testing.assert_close(model.predict(TEST_POINTS), (mean, var), rtol=0.0, atol=0.0)


@pytest.mark.parametrize("posterior", POSTERIOR_FORMS)
def test_subsets_add_up(problem: Problem, posterior: str) -> None:
    """Mean of a pair = sum of means; variance = sum of variances + twice their covariance."""
    model = fitted(problem, posterior)
    parts = model.predict_components(TEST_POINTS)
    mean, var = model.predict_subset(TEST_POINTS, ["a", "b"])
    cov = model.posterior.component_covariance(TEST_POINTS, "a", "b")
    torch.testing.assert_close(mean, parts["a"][0] + parts["b"][0])
    torch.testing.assert_close(var, parts["a"][1] + parts["b"][1] + 2.0 * cov)
    if posterior == "mean_field":
        assert float(cov.abs().max()) == 0.0
    total = model.predict(TEST_POINTS)
    torch.testing.assert_close(total, model.predict_subset(TEST_POINTS, model.component_names))
    with pytest.raises(ValueError, match="unknown"):
        model.predict_subset(TEST_POINTS, ["map"])


def test_unfitted_model_says_so(problem: Problem) -> None:
    model = AdditiveGP(problem.components, NOISE, device="cpu")
    assert model.posterior is None and model.report is None
    with pytest.raises(RuntimeError, match="not fitted"):
        model.predict(TEST_POINTS)


def test_a_fit_reports_progress_at_every_evaluation(problem: Problem) -> None:
    model = AdditiveGP(problem.components, NOISE, iterations=ITERATIONS, device="cpu",
                       dtype=DTYPE)  # fmt: skip
    seen: list[tuple[float, str]] = []
    assert model.fit(problem.X, problem.y, progress=lambda f, s: seen.append((f, s))).accepted
    evaluations = [(f, s) for f, s in seen if ": evaluation " in s]
    iterations = [s for _, s in seen if "−ELBO/N" in s]
    assert len(evaluations) > len(iterations) >= 1  # line searches evaluate more than once
    for fraction, status in evaluations:  # at the start of the iteration it belongs to
        k = int(status.split(":")[0].removeprefix("iteration "))
        assert fraction == (k - 1) / ITERATIONS
    assert seen[-1][0] == 1.0
