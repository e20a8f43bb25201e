"""AdaptiveCholeskyGP as a batch model: fit, posterior, report, state round trip, atomicity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import Constant, SquaredExponential, StateError
from gp_mapper.engine.acgp import AdaptiveCholeskyGP
from gp_mapper.engine.acgp import model as acgp_model
from gp_mapper.engine.errors import NumericalError

from .conftest import DTYPE, NOISE, GpSample, gp_sample

FAST = {"block_size": 100, "fit_iterations": 20, "refinements": 4, "device": "cpu"}


@pytest.fixture(scope="module")
def fitted(sample: GpSample) -> AdaptiveCholeskyGP:
    model = AdaptiveCholeskyGP(
        SquaredExponential(1.0, 0.15), NOISE, rel_tol=0.05, jitter=0.0, **FAST
    )
    report = model.fit(sample.X, sample.y, optimise=False)
    assert report.accepted, report.reason
    return model


def test_fit_keeps_the_exact_posterior_of_the_stopped_subset(
    fitted: AdaptiveCholeskyGP, sample: GpSample
) -> None:
    M = fitted.num_points
    post = fitted.posterior
    assert post is not None and post.support.shape == (M, 1)
    Xs = torch.linspace(0.0, 1.0, 40, dtype=DTYPE)[:, None]
    # The dense reference on the kept points.
    X_M, y_M = post.support, fitted._state.y_M
    K = fitted.kernel.K(X_M) + NOISE * torch.eye(M, dtype=DTYPE)
    Ks = fitted.kernel.K(Xs, X_M)
    mean = Ks @ torch.linalg.solve(K, y_M)
    var = fitted.kernel.K_diag(Xs) - (Ks * torch.linalg.solve(K, Ks.mT).mT).sum(1)
    got_mean, got_var = fitted.predict(Xs)
    torch.testing.assert_close(got_mean, mean, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(got_var, var, rtol=1e-7, atol=1e-9)
    # The kept points are a subset of the data, in the fit's random order.
    perm = torch.as_tensor(fitted._state.permutation)
    torch.testing.assert_close(X_M, sample.X[perm[:M]], rtol=0.0, atol=0.0)


def test_report_says_what_the_fit_did(fitted: AdaptiveCholeskyGP) -> None:
    report = fitted.report
    assert report is not None and report.accepted
    assert report.n == 600 and report.m_before == 0 and report.m_after == fitted.num_points
    flat = report.as_dict()
    assert flat["stopped"] is True and flat["blocks"] >= 1
    assert flat["fraction_kept"] == pytest.approx(fitted.num_points / 600)
    assert report.lower <= report.upper
    assert flat["relative_gap"] < 0.05
    assert flat["log_evidence_estimate"] == pytest.approx(
        600 / fitted.num_points * flat["log_density_subset"]
    )
    assert all(isinstance(v, (int, float, str, bool, type(None))) for v in flat.values())


def test_a_fit_whose_rule_does_not_fire_stops_at_its_budget_and_says_so(
    sample: GpSample,
) -> None:
    model = AdaptiveCholeskyGP(
        SquaredExponential(1.0, 0.15), NOISE, rel_tol=1e-9, max_points=300, jitter=0.0, **FAST
    )
    report = model.fit(sample.X, sample.y, optimise=False)
    assert report.accepted and model.num_points == 300
    flat = report.as_dict()
    assert flat["stopped"] is False and flat["relative_gap"] > 1e-9
    assert "rule not fired within the budget of 300 points" in report.reason
    assert f"relative gap {flat['relative_gap']:.3g}" in report.reason
    assert torch.isfinite(model.predict(sample.X[:10])[0]).all()  # a usable map


def test_a_fit_reports_progress_at_every_evaluation(sample: GpSample) -> None:
    model = AdaptiveCholeskyGP(SquaredExponential(1.0, 0.3), NOISE, rel_tol=0.05, **FAST)
    seen: list[tuple[float, str]] = []
    assert model.fit(sample.X, sample.y, progress=lambda f, s: seen.append((f, s))).accepted
    evaluations = [f for f, s in seen if s.strip().startswith("evaluation")]
    iterations = [s for _, s in seen if "iteration" in s]
    assert len(evaluations) > len(iterations) >= 1  # more often than the iterations
    # An evaluation repeats the share of the budget the refinement reported last.
    for (before, _), (fraction, status) in itertools.pairwise(seen):
        if status.strip().startswith("evaluation"):
            assert fraction == before
    assert seen[-1][0] == 1.0


def test_hyperparameters_in_node_names() -> None:
    kernel = Constant(500.0) + SquaredExponential(2.0, [0.5, 0.7], ard_dims=2)
    model = AdaptiveCholeskyGP(kernel, 0.3, device="cpu")
    hp = model.hyperparameters()
    assert hp["kernel"] == "se" and hp["constant_variance"] == pytest.approx(500.0)
    assert hp["kernel_variance"] == pytest.approx(2.0)
    assert hp["lengthscale"] == pytest.approx([0.5, 0.7])
    assert hp["noise_variance"] == pytest.approx(0.3)
    assert AdaptiveCholeskyGP.name == "acgp" and AdaptiveCholeskyGP.kind == "batch"
    assert model.posterior is None and model.report is None


def test_prior_variance_removes_what_the_data_say_of_the_offset(sample: GpSample) -> None:
    model = AdaptiveCholeskyGP(Constant(4.0) + SquaredExponential(1.0, 0.15), NOISE, **FAST)
    assert model.fit(sample.X[:300], sample.y[:300] + 2.0, optimise=False).accepted
    post = model.posterior
    far = torch.tensor([[50.0]], dtype=DTYPE)
    _, var_far = post.predict(far)
    torch.testing.assert_close(post.prior_variance(far), var_far, rtol=1e-8, atol=1e-10)
    assert float(post.prior_variance(far)) < 5.0


def test_state_round_trip_predicts_identically(fitted: AdaptiveCholeskyGP, tmp_path) -> None:
    path = tmp_path / "acgp.npz"
    np.savez(path, **fitted.state_dict())
    with np.load(path, allow_pickle=False) as f:
        restored = AdaptiveCholeskyGP.from_state(dict(f), device="cpu")
    Xs = torch.linspace(-0.2, 1.2, 77, dtype=DTYPE)[:, None]
    for a, b in zip(fitted.predict(Xs), restored.predict(Xs), strict=True):
        assert torch.equal(a, b)
    assert restored.hyperparameters() == fitted.hyperparameters()
    assert restored.history == fitted.history
    assert restored.num_updates == fitted.num_updates == 1


def test_state_of_an_unfitted_model_round_trips() -> None:
    model = AdaptiveCholeskyGP(SquaredExponential(1.0, 0.3), 0.2, device="cpu", max_points=500)
    restored = AdaptiveCholeskyGP.from_state(model.state_dict(), device="cpu")
    assert restored.posterior is None and restored.max_points == 500


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"model": np.array("vips")}, "vips"),
        ({"format_version": np.array(99)}, "format"),
        ({"support.y": np.zeros(3)}, "support"),
        ({"support.X": np.full((1, 1), np.nan)}, "non-finite"),
        ({"kernel_spec": np.array("{}")}, "malformed"),
    ],
)
def test_malformed_state_is_refused(fitted: AdaptiveCholeskyGP, change: dict, match: str) -> None:
    state = {**fitted.state_dict(), **change}
    with pytest.raises(StateError, match=match):
        AdaptiveCholeskyGP.from_state(state, device="cpu")


def test_missing_field_is_refused(fitted: AdaptiveCholeskyGP) -> None:
    state = fitted.state_dict()
    del state["permutation"]
    with pytest.raises(StateError, match="permutation"):
        AdaptiveCholeskyGP.from_state(state, device="cpu")


def test_failed_fit_leaves_the_previous_state(
    sample: GpSample, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = AdaptiveCholeskyGP(SquaredExponential(1.0, 0.15), NOISE, **FAST)
    assert model.fit(sample.X[:300], sample.y[:300], optimise=False).accepted
    Xs = torch.linspace(0.0, 1.0, 20, dtype=DTYPE)[:, None]
    before = model.predict(Xs)
    state_before = model.state_dict()

    def broken(*args, **kwargs):
        raise NumericalError("block of size 100 is not positive definite")

    monkeypatch.setattr(acgp_model, "stopped_cholesky", broken)
    report = model.fit(sample.X, sample.y)
    assert not report.accepted and "not positive definite" in report.reason
    assert report.m_before == report.m_after == model.num_points
    assert model.report is report and model.num_updates == 1
    for a, b in zip(before, model.predict(Xs), strict=True):
        assert torch.equal(a, b)
    after = model.state_dict()
    assert all(np.array_equal(state_before[k], after[k]) for k in state_before)


def test_fit_recovers_the_hyperparameters_of_a_gp_sample() -> None:
    data = gp_sample(800, seed=21, lengthscale=0.1)
    model = AdaptiveCholeskyGP(
        SquaredExponential(0.4, 0.3), 0.4, block_size=100, rel_tol=0.01, fit_iterations=40,
        refinements=8, device="cpu",
    )  # fmt: skip
    calls: list[tuple[float, str]] = []
    report = model.fit(data.X, data.y, progress=lambda f, text: calls.append((f, text)))
    assert report.accepted, report.reason
    assert calls[-1][0] == 1.0 and all(0.0 <= f <= 1.0 for f, _ in calls)
    hp = model.hyperparameters()
    assert 0.07 < hp["lengthscale"] < 0.14
    assert 0.4 < hp["kernel_variance"] < 2.5
    assert 0.07 < hp["noise_variance"] < 0.14
    assert report.details["fit_restarts"] >= 1
    assert math.isfinite(report.log_evidence)
    # A second fit starts from the fitted θ and says how many points the first one kept.
    again = model.fit(data.X, data.y, optimise=False)
    assert again.accepted and again.m_before == report.m_after and model.num_updates == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_size": 1}, "block_size"),
        ({"initial_block_size": 0}, "initial_block_size"),
        ({"rel_tol": -0.1}, "rel_tol"),
        ({"abs_tol": math.inf}, "abs_tol"),
        ({"max_points": 0}, "max_points"),
        ({"fit_iterations": -1}, "fit_iterations"),
        ({"refinements": -1}, "refinements"),
        ({"noise_variance": 0.0}, "noise_variance"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AdaptiveCholeskyGP(SquaredExponential(), device="cpu", **kwargs)


def test_bad_data_is_refused() -> None:
    model = AdaptiveCholeskyGP(SquaredExponential(), device="cpu")
    with pytest.raises(ValueError, match="expected X"):
        model.fit(np.zeros((5, 1)), np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        model.fit(np.zeros((5, 1)), np.array([0.0, 1.0, np.nan, 0.0, 0.0]))
    with pytest.raises(RuntimeError, match="fit"):
        model.predict(np.zeros((2, 1)))
