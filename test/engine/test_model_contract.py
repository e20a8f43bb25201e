"""What every registered model must do, run over the registry: a new model gets these for free.

- it meets the streaming or batch protocol its entry declares;
- its state round-trips through a saved file and predicts bit-identically;
- a failed update or fit changes nothing;
- under its entry's ``exact_settings`` its posterior is the exact GP's on all the data.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    BatchModel,
    EngineSpec,
    ExactGP,
    ModelPosterior,
    NotSupportedError,
    StateError,
    StreamingModel,
    build_kernel,
    build_model,
    model_entry,
    model_from_state,
    model_names,
)
from gp_mapper.engine.potential import ExactFieldGP

N = 60
INPUT_DIM = 2
# Quick settings every model takes: few L-BFGS iterations, small ACGP blocks.
QUICK = {"fit_iterations": 3, "acgp.block_size": 20, "solvegp.epochs": 3, "cagp.epochs": 3,
         "gam.iterations": 3,
         "kernel": "se", "lengthscale": 0.4, "constant_variance": 4.0, "device": "cpu"}  # fmt: skip


def data(seed: int = 0, name: str = "vips") -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets: y [N], or y [N, 3] for a model of the field vector."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 3.0, (N, INPUT_DIM))
    y = 2.0 + np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.standard_normal(N)
    if model_entry(name).target == "vector":
        y = np.stack([y, 1.0 - np.cos(X[:, 0]) + 0.05 * rng.standard_normal(N), -0.5 * y], 1)
    return X, y


def trained(name: str, **settings: object):
    spec = EngineSpec(**{**QUICK, **settings, "model": name})
    model = build_model(spec, INPUT_DIM)
    X, y = data(name=name)
    if model_entry(name).kind == "streaming":
        for part in np.array_split(np.arange(N), 3):
            assert model.update(X[part], y[part]).accepted
    else:
        assert model.fit(X, y).accepted
    return model, spec


def saved_and_loaded(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


TEST_POINTS = torch.tensor([[0.5, 0.5], [1.5, 2.5], [2.9, 0.1], [8.0, 8.0]], dtype=torch.float64)


@pytest.mark.parametrize("name", model_names())
def test_meets_the_protocol_of_its_kind(name: str) -> None:
    model, _ = trained(name)
    kind = model_entry(name).kind
    assert model.name == name and model.kind == kind
    assert isinstance(model, StreamingModel if kind == "streaming" else BatchModel)
    assert isinstance(model.posterior, ModelPosterior)
    assert model.posterior.support.shape[1] == INPUT_DIM
    changed = model.posterior.changed_since(model.posterior, TEST_POINTS.numpy())
    assert changed is None or (changed.dtype == bool and changed.shape == (len(TEST_POINTS),))
    assert model.report is not None and model.report.accepted
    assert isinstance(model.report.as_dict(), dict)
    theta = model.hyperparameters()
    assert {
        "kernel",
        "kernel_variance",
        "lengthscale",
        "constant_variance",
        "noise_variance",
    } <= set(theta)
    assert str(model.device) == "cpu"


@pytest.mark.parametrize("name", model_names())
def test_state_round_trips_and_predicts_bit_identically(name: str) -> None:
    model, _ = trained(name)
    state = saved_and_loaded(model.state_dict())
    assert str(state["model"]) == name
    again = model_from_state(state, device="cpu", expected=name)
    assert type(again) is type(model)
    for a, b in zip(model.predict(TEST_POINTS), again.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert again.hyperparameters() == model.hyperparameters()
    other = next(n for n in model_names() if n != name)
    with pytest.raises(StateError, match=f"holds a '{name}' model"):
        model_from_state(state, device="cpu", expected=other)


@pytest.mark.parametrize("name", model_names())
def test_a_failed_update_or_fit_changes_nothing(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = trained(name)
    before = model.state_dict()
    mean_before, var_before = model.predict(TEST_POINTS)

    def not_positive_definite(A: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(A), torch.ones(A.shape[:-2], dtype=torch.int32)

    X, y = data(seed=1, name=name)
    with monkeypatch.context() as patch:  # every factorisation now fails
        patch.setattr(torch.linalg, "cholesky_ex", not_positive_definite)
        streaming = model_entry(name).kind == "streaming"
        report = model.update(X, y) if streaming else model.fit(X, y)
    assert not report.accepted and report.reason
    after = model.state_dict()
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    mean_after, var_after = model.predict(TEST_POINTS)
    torch.testing.assert_close(mean_after, mean_before, rtol=0.0, atol=0.0)
    torch.testing.assert_close(var_after, var_before, rtol=0.0, atol=0.0)


@pytest.mark.parametrize("name", model_names())
def test_with_all_data_as_support_it_is_the_exact_gp(name: str) -> None:
    model, spec = trained(name, **model_entry(name).exact_settings(N))
    X, y = data(name=name)
    if model_entry(name).target == "vector":
        kernel = build_model(spec, INPUT_DIM).kernel.double()  # the field model's own prior
        exact = ExactFieldGP(kernel, spec.noise_variance, torch.as_tensor(X), torch.as_tensor(y))
    else:
        exact = ExactGP(
            build_kernel(spec, INPUT_DIM).double(), spec.noise_variance,
            torch.as_tensor(X), torch.as_tensor(y),
        )  # fmt: skip
    assert model.posterior.support.shape[0] == N
    mean, var = model.predict(TEST_POINTS)
    mean_ref, var_ref = exact.predict(TEST_POINTS)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(var, var_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", model_names())
def test_declares_every_member_the_pipeline_and_the_grid_use(name: str) -> None:
    model, _ = trained(name)
    entry = model_entry(name)
    assert isinstance(model.auxiliary_inputs, tuple)
    assert all(isinstance(column, str) for column in model.auxiliary_inputs)
    assert isinstance(model.nuisance_summary(), dict)
    report = model.report
    assert isinstance(report.num_outliers, int) and isinstance(report.nuisance, dict)
    assert report.bound_after_fit is None or isinstance(report.bound_after_fit, float)
    posterior = model.posterior
    assert posterior.target == entry.target
    Xs = TEST_POINTS.to(posterior.support.dtype)
    for values in posterior.layers(Xs).values():
        assert values.shape == (Xs.shape[0],)
    if entry.target == "vector":
        mean, cov = posterior.predict_field(Xs)
        assert mean.shape == (Xs.shape[0], 3) and cov.shape == (Xs.shape[0], 3, 3)
    else:
        with pytest.raises(NotSupportedError):
            posterior.predict_field(Xs)
    if entry.kind == "streaming":
        assert isinstance(model.max_inducing, int) and model.max_inducing >= 1
        assert model.awaits_first_fit is False  # its fits were accepted


@pytest.mark.parametrize("name", model_names("streaming"))
def test_a_streaming_model_awaits_its_first_fit_and_commits_without_one(name: str) -> None:
    spec = EngineSpec(**{**QUICK, "model": name})
    model = build_model(spec, INPUT_DIM)
    assert model.awaits_first_fit  # fit_iterations > 0 and nothing fitted yet
    assert not build_model(EngineSpec(**{**QUICK, "model": name, "fit_iterations": 0}),
                           INPUT_DIM).awaits_first_fit  # fmt: skip
    X, y = data(name=name)
    theta = model.hyperparameters()
    report = model.update(X[:30], y[:30], fit=False)
    assert report.accepted and model.hyperparameters() == theta
    assert model.awaits_first_fit


@pytest.mark.parametrize("name", model_names("streaming"))
def test_an_empty_copy_keeps_theta_and_holds_no_data(name: str) -> None:
    model, _ = trained(name)
    copy = model.empty_copy()
    assert copy.posterior is None and copy.num_updates == 0 and copy.report is None
    assert copy.hyperparameters() == model.hyperparameters()
    assert copy.awaits_first_fit == model.awaits_first_fit
    before = model.predict(TEST_POINTS)
    X, y = data(seed=1, name=name)
    assert copy.update(X[:30], y[:30], fit=False).accepted
    assert copy.hyperparameters() == model.hyperparameters()  # θ kept without a fit
    for a, b in zip(before, model.predict(TEST_POINTS), strict=True):  # the original unchanged
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)


@pytest.mark.parametrize("name", model_names("streaming"))
def test_a_streaming_model_takes_another_ones_theta_and_moves_its_posterior(name: str) -> None:
    source, _ = trained(name)  # a fitted θ
    model = build_model(EngineSpec(**{**QUICK, "model": name}), INPUT_DIM)
    X, y = data(seed=1, name=name)
    assert model.update(X[:30], y[:30], fit=False).accepted  # a posterior under the guess
    own = model.hyperparameters()
    assert own != source.hyperparameters()
    report = model.update(X[30:], y[30:], fit=False, theta_of=source)
    assert report.accepted and model.hyperparameters() == source.hyperparameters()
    assert not model.awaits_first_fit  # the θ it took was fitted
    # The first window's evidence is kept, now under the new θ: the whole-data posterior at
    # that θ (one window of all readings) is close to it.
    whole = build_model(EngineSpec(**{**QUICK, "model": name}), INPUT_DIM)
    assert whole.update(X, y, fit=False, theta_of=source).accepted
    near = torch.as_tensor(X[:10, :INPUT_DIM])
    mean = model.predict(near)[0]
    whole_mean, whole_var = whole.predict(near)
    assert torch.allclose(mean, whole_mean, atol=5 * float(whole_var.sqrt().max()))
    assert source.hyperparameters() == trained(name)[0].hyperparameters()  # the source as was


@pytest.mark.parametrize("name", model_names("streaming"))
def test_a_streaming_model_takes_a_measured_pass_noise_for_the_windows_to_come(name: str) -> None:
    model, _ = trained(name)
    before = model.predict(TEST_POINTS)
    noise = model.noise_variance
    model.set_pass_noise_variance(0.5)
    assert model.pass_noise_variance == 0.5
    assert model.noise_variance == pytest.approx(noise + 0.5, rel=1e-12)
    for a, b in zip(before, model.predict(TEST_POINTS), strict=True):  # the map as committed
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    X, y = data(seed=1, name=name)
    assert model.update(X[:30], y[:30], fit=False).accepted
    assert model.empty_copy().pass_noise_variance == 0.5  # a new tile takes it
    back = type(model).from_state(saved_and_loaded(model.state_dict()), device="cpu")
    assert back.pass_noise_variance == 0.5
    with pytest.raises(ValueError, match="pass_noise_variance"):
        model.set_pass_noise_variance(-1.0)


@pytest.mark.parametrize("name", model_names())
def test_its_entry_says_what_the_cli_and_the_png_need(name: str) -> None:
    from gp_mapper.engine.settings import setting_by_name

    entry = model_entry(name)
    assert entry.kind in ("streaming", "batch") and name in model_names(entry.kind)
    assert entry.support_label.endswith("points")
    # The models that remove nuisance components are those the components setting is for.
    assert entry.takes_components == (name in setting_by_name()["gam.components"].models)


def _caches(model) -> list:
    """The matrices a model's prediction caches may drop (its posterior's, and the wrapped
    stream's where it has one)."""
    posterior = model.posterior
    held = [posterior, getattr(posterior, "inner", None), getattr(model, "full_posterior", None)]
    return [p.W_cache for p in held if p is not None and hasattr(p, "W_cache")]


@pytest.mark.parametrize("name", model_names("streaming"))
def test_a_streaming_model_drops_its_caches_and_predicts_and_updates_the_same(name: str) -> None:
    model, _ = trained(name)
    twin, _ = trained(name)
    before = model.predict(TEST_POINTS)
    model.release_caches()
    assert _caches(model) and not any(c.held for c in _caches(model))
    for a, b in zip(before, model.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert all(c.held for c in _caches(model))  # computed again on use
    model.release_caches()
    X, y = data(seed=1, name=name)
    for m in (model, twin):  # the next window as if nothing had been dropped
        assert m.update(X[:30], y[:30]).accepted
    for a, b in zip(twin.predict(TEST_POINTS), model.predict(TEST_POINTS), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    state, twin_state = model.state_dict(), twin.state_dict()
    assert state.keys() == twin_state.keys()
    assert all(np.array_equal(state[k], twin_state[k]) for k in state)
