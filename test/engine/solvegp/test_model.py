"""SolveGP, the batch model: fit, layers, scaling, validation, persistence, atomicity."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from gp_mapper.engine import BatchModel, Constant, ExactGP, ModelPosterior, SquaredExponential
from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.errors import StateError
from gp_mapper.engine.solvegp import LAYER_NAMES, SolveGP, initial_inducing, kmeans

N = 80
TEST_POINTS = torch.tensor([[0.5, 0.5], [1.5, 2.5], [2.9, 0.1], [40.0, 40.0]], dtype=torch.float64)
# Small and quick: a few epochs of a few minibatches.
# No θ pre-fit: these tests follow SVI from the paper's start.
QUICK = {"num_inducing": 6, "num_orthogonal": 5, "epochs": 3, "batch_size": 32, "prefit_points": 0,
         "device": "cpu"}  # fmt: skip


def data(seed: int = 0, offset: float = 48.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 3.0, (N, 2))
    y = offset + 3.0 * np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(N)
    return X, y


def kernel() -> Constant:
    return Constant(500.0) + SquaredExponential(4.0, 0.6)


def fitted(**settings: object) -> SolveGP:
    model = SolveGP(kernel(), 0.05, **{**QUICK, **settings})  # type: ignore[arg-type]
    X, y = data()
    assert model.fit(X, y).accepted
    return model


def saved_and_loaded(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


def test_meets_the_batch_protocol() -> None:
    model = fitted()
    assert isinstance(model, BatchModel) and isinstance(model.posterior, ModelPosterior)
    assert model.name == "solvegp" and model.kind == "batch"
    assert model.posterior.support.shape == (11, 2)
    assert model.report.m_after == 11 and model.report.details["family"] == "solve"
    theta = model.hyperparameters()
    assert theta["kernel"] == "se" and theta["constant_variance"] > 0.0


@pytest.mark.parametrize("family", ["solve", "full", "odvgp"])
@pytest.mark.parametrize("whiten", [False, True])
def test_state_round_trips_bit_for_bit(family: str, whiten: bool) -> None:
    model = fitted(family=family, whiten=whiten)
    again = SolveGP.from_state(saved_and_loaded(model.state_dict()), device="cpu")
    for a, b in zip(model.predict(TEST_POINTS), again.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    for name in LAYER_NAMES:
        torch.testing.assert_close(
            model.layers(TEST_POINTS)[name], again.layers(TEST_POINTS)[name], rtol=0.0, atol=0.0
        )
    assert again.hyperparameters() == model.hyperparameters()
    assert again.elbo_history == model.elbo_history
    state = model.state_dict()
    state["model"] = np.array("acgp")
    with pytest.raises(StateError, match="holds a 'acgp' model"):
        SolveGP.from_state(state, device="cpu")


@pytest.mark.parametrize(
    ("family", "whiten"), [("odvgp", False), ("odvgp", True), ("solve", False)]
)
def test_a_format_1_state_loads_unless_its_mean_changed_meaning(family: str, whiten: bool) -> None:
    """Format 2 holds unwhitened ODVGP's mean as dual weights; format 1 held m_v itself."""
    state = fitted(family=family, whiten=whiten, epochs=0).state_dict()
    state["format_version"] = np.array(1)
    if family == "odvgp" and not whiten:
        with pytest.raises(StateError, match="fit it again"):
            SolveGP.from_state(state, device="cpu")
    else:
        assert SolveGP.from_state(state, device="cpu").posterior is not None


def test_a_failed_fit_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    model = fitted()
    before = model.state_dict()
    mean, var = model.predict(TEST_POINTS)

    def not_positive_definite(A: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(A), torch.ones(A.shape[:-2], dtype=torch.int32)

    X, y = data(seed=1)
    with monkeypatch.context() as patch:
        patch.setattr(torch.linalg, "cholesky_ex", not_positive_definite)
        report = model.fit(X, y)
    assert not report.accepted and "not positive definite" in report.reason
    after = model.state_dict()
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    mean_after, var_after = model.predict(TEST_POINTS)
    torch.testing.assert_close(mean_after, mean, rtol=0.0, atol=0.0)
    torch.testing.assert_close(var_after, var, rtol=0.0, atol=0.0)


def test_progress_reports_each_epoch_with_its_elbo() -> None:
    calls: list[tuple[float, str]] = []
    model = SolveGP(kernel(), 0.05, **{**QUICK, "validation": 0.0})  # type: ignore[arg-type]
    X, y = data()
    model.fit(X, y, progress=lambda f, s: calls.append((f, s)))
    epochs = [(f, s) for f, s in calls if s.startswith("epoch") and "ELBO" in s]
    assert [s.split(" ELBO")[0] for _, s in epochs] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and epochs[0][0] > 0.0
    assert len(model.elbo_history) == 3
    # Before the first epoch the placement of the inducing points says what it does.
    before = [s for f, s in calls[: calls.index(epochs[0])]]
    assert any(s.startswith("placing") for s in before), before


def test_progress_comes_within_an_epoch_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """An epoch of a large log takes seconds: its minibatches report between the epochs'."""
    from gp_mapper.engine.solvegp import model as solve_model

    monkeypatch.setattr(solve_model, "STEP_REPORT_S", 0.0)
    calls: list[tuple[float, str]] = []
    fitted = SolveGP(kernel(), 0.05, **{**QUICK, "validation": 0.0})  # type: ignore[arg-type]
    X, y = data()
    fitted.fit(X, y, progress=lambda f, s: calls.append((f, s)))
    within = [s for _, s in calls if s.endswith("readings")]
    assert within and within[0].startswith("epoch 1/3: 0/")
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions)


def test_k_means_ticks_while_it_seeds_and_iterates() -> None:
    ticks: list[str] = []
    X = torch.randn(2000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    centres = kmeans(X, 600, torch.Generator().manual_seed(1), ticks.append)
    assert centres.shape == (600, 2)
    assert [t for t in ticks if "seeding" in t] == [
        "k-means++ seeding: 256/600 centres", "k-means++ seeding: 512/600 centres",
    ]  # fmt: skip
    assert any(t.startswith("k-means: Lloyd iteration 1/") for t in ticks)
    # The ticks change nothing: the same centres without them.
    torch.testing.assert_close(kmeans(X, 600, torch.Generator().manual_seed(1)), centres)


def test_the_prefit_reports_its_evaluations_before_the_epochs() -> None:
    calls: list[tuple[float, str]] = []
    settings = {**QUICK, "validation": 0.0, "prefit_points": 40}
    model = SolveGP(kernel(), 0.05, **settings)  # type: ignore[arg-type]
    X, y = data()
    model.fit(X, y, progress=lambda f, s: calls.append((f, s)))
    prefit = [(f, s) for f, s in calls if s.startswith("evaluation")]
    assert prefit and all(f == 0.0 for f, _ in prefit)  # the epochs' share starts after it
    first_epoch = next(i for i, (_, s) in enumerate(calls) if s.startswith("epoch"))
    assert calls.index(prefit[-1]) < first_epoch


def test_layers_add_up_to_the_prediction() -> None:
    model = fitted()
    layers = model.layers(TEST_POINTS)
    mean, var = model.predict(TEST_POINTS)
    torch.testing.assert_close(layers["coarse_mean"] + layers["detail_mean"], mean)
    torch.testing.assert_close(layers["coarse_var"] + layers["detail_var"], var)
    # Far from every inducing point only the offset is known: the prior variance.
    far = TEST_POINTS[-1:]
    torch.testing.assert_close(model.posterior.prior_variance(far), var[-1:], rtol=1e-9, atol=0.0)


def exact_settings(n: int) -> dict[str, object]:
    # A jitter on K(X, X) shifts the prior by ε/σ² relatively; 1e-10 keeps that below 1e-6.
    return {"num_inducing": n, "num_orthogonal": 0, "family": "full", "epochs": 0,
            "optimal_q": True, "validation": 0.0, "train_hyperparameters": False,
            "jitter": Jitter(1e-10)}  # fmt: skip


def test_with_z_equal_x_and_optimal_q_it_is_the_exact_gp() -> None:
    model = fitted(**exact_settings(N))
    X, y = data()
    exact = ExactGP(kernel().double(), 0.05, torch.as_tensor(X), torch.as_tensor(y))
    mean, var = model.predict(TEST_POINTS)
    mean_ref, var_ref = exact.predict(TEST_POINTS)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(var, var_ref, rtol=1e-5, atol=1e-6)
    assert model.report.details["jitter_u"] == 1e-10
    assert model.report.lower == pytest.approx(
        float(exact.log_marginal_likelihood().detach()), rel=1e-6
    )


def test_scaling_the_targets_is_the_same_model() -> None:
    """y / s with θ / s² is the GP on y: the fits agree in the data's units."""
    settings = {"epochs": 0, "optimal_q": True, "validation": 0.0}
    scaled = fitted(**settings, standardise="scale")
    raw = fitted(**settings, standardise="none")
    assert scaled.scale > 1.0 and raw.scale == 1.0
    for a, b in zip(scaled.predict(TEST_POINTS), raw.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    assert scaled.report.lower == pytest.approx(raw.report.lower, rel=1e-9)
    h_scaled, h_raw = scaled.hyperparameters(), raw.hyperparameters()
    for key in ("kernel_variance", "constant_variance", "noise_variance", "lengthscale"):
        assert h_scaled[key] == pytest.approx(h_raw[key], rel=1e-9)


def test_validation_split_keeps_the_best_epoch() -> None:
    model = fitted(validation=0.25, epochs=6, patience=2, learning_rate=0.05)
    details = model.report.details
    assert details["validation_points"] == N // 4
    assert details["training_points"] == N - N // 4
    best = details["best_epoch"]
    assert details["validation_log_lik"] == max(model.validation_history)
    assert model.validation_history[best - 1] == details["validation_log_lik"]


# From the prior and uncentred, Adam's bounded steps need many epochs to reach the offset.
@pytest.mark.parametrize(
    ("standardise", "warm_start"), [("scale", True), ("centre", True), ("centre", False)]
)
def test_a_training_run_fits_the_data(standardise: str, warm_start: bool) -> None:
    model = fitted(epochs=20, learning_rate=0.05, validation=0.0, standardise=standardise,
                   warm_start=warm_start)  # fmt: skip
    assert model.elbo_history[-1] > model.elbo_history[0]
    X, y = data()
    mean, _ = model.predict(X)
    rmse = float(torch.sqrt(torch.mean((mean - torch.as_tensor(y)) ** 2)))
    assert rmse < float(np.std(y))


@pytest.mark.parametrize("method", ["kmeans", "greedy"])
def test_initialisation_gives_distinct_points_in_the_data(method: str) -> None:
    X = torch.as_tensor(data()[0])
    Z, Zo = initial_inducing(X, 7, 5, method, SquaredExponential(1.0, 0.6).double(), Jitter(), 3)  # type: ignore[arg-type]
    assert Z.shape == (7, 2) and Zo.shape == (5, 2)
    W = torch.cat([Z, Zo])
    assert torch.cdist(W, W).add(torch.eye(12, dtype=W.dtype)).min() > 1e-6
    assert bool(((W >= 0.0) & (W <= 3.0)).all())
    small_Z, small_O = initial_inducing(X[:9], 7, 5, method, SquaredExponential(), Jitter(), 3)  # type: ignore[arg-type]
    torch.testing.assert_close(torch.cat([small_Z, small_O]), X[:9])


def test_frozen_inducing_inputs_and_theta_stay_where_they_started() -> None:
    frozen = {"train_inducing": False, "train_hyperparameters": False, "validation": 0.0,
              "standardise": "none", "init": "greedy"}  # fmt: skip
    start = fitted(**frozen, epochs=0)  # the same seed: the same split and initial Z, O
    model = fitted(**frozen)
    torch.testing.assert_close(model.parameters.Z, start.parameters.Z, rtol=0.0, atol=0.0)
    torch.testing.assert_close(model.parameters.Zo, start.parameters.Zo, rtol=0.0, atol=0.0)
    assert model.hyperparameters() == start.hyperparameters()
    assert model.hyperparameters()["kernel_variance"] == pytest.approx(4.0, rel=1e-12)
    assert not torch.equal(model.parameters.m_u, start.parameters.m_u)  # q itself was trained


def test_prefit_starts_svi_from_the_exact_gps_theta_on_a_subset() -> None:
    """From a kernel variance 100x too small, a few Adam steps barely move θ; the pre-fit does."""
    X, y = data()
    y = 48.0 + 10.0 * (y - 48.0)  # field variance ~ 100 x 4.5 µT²
    start = Constant(500.0) + SquaredExponential(1.0, 0.6)
    settings = {**QUICK, "epochs": 2}
    plain = SolveGP(start, 0.05, **settings)  # type: ignore[arg-type]
    prefit = SolveGP(start, 0.05, **{**settings, "prefit_points": 60})  # type: ignore[arg-type]
    assert plain.fit(X, y).accepted and prefit.fit(X, y).accepted
    reference = ExactGP(start, 0.05, device="cpu")
    assert reference.fit(X, y).accepted
    target = reference.hyperparameters()["kernel_variance"]
    assert plain.hyperparameters()["kernel_variance"] < 0.1 * target
    assert prefit.hyperparameters()["kernel_variance"] > 0.3 * target
    details = prefit.report.details["prefit"]
    assert details["points"] == 60 and details["accepted"]
    assert plain.report.details["prefit"] is None
    # The setting is part of the state.
    assert SolveGP.from_state(saved_and_loaded(prefit.state_dict())).prefit_points == 60
    with pytest.raises(ValueError, match="prefit_points"):
        SolveGP(start, 0.05, prefit_points=-1)
