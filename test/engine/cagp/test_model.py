"""The batch models ``cagp`` and ``cagp_cg``: fitting, reports, state round trips, atomicity."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    BatchModel,
    Constant,
    ExactGP,
    Matern32,
    ModelPosterior,
    StateError,
)
from gp_mapper.engine.cagp import CaGP, CaGPCG
from gp_mapper.engine.cagp import actions as actions_module
from gp_mapper.engine.cagp.kernel_actions import BLOCK_BYTES, block_rows

from .conftest import DTYPE, INPUT_DIM, NOISE, make_problem

MODELS = [CaGP, CaGPCG]
N_FIT = 200
QUERY = torch.tensor([[0.5, 0.5], [1.5, 2.5], [2.9, 0.1], [8.0, 8.0]], dtype=DTYPE)


def data(n: int = N_FIT, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    p = make_problem(n, seed=seed)
    return p.X.numpy(), (p.y + 2.0).numpy()


def model(cls: type, **settings: object):
    kernel = Constant(4.0) + Matern32(1.0, [1.0, 1.0], ard_dims=INPUT_DIM)
    defaults = {
        "actions": 20,
        "epochs": 15,
        "learning_rate": 0.1,
        "prefit_points": 0,
        "device": "cpu",
    }
    return cls(kernel, 0.2, **{**defaults, **settings})


def saved_and_loaded(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


@pytest.mark.parametrize("cls", MODELS)
def test_fit_trains_theta_and_reports(cls: type) -> None:
    m = model(cls)
    assert isinstance(m, BatchModel) and m.kind == "batch"
    updates: list[tuple[float, str]] = []
    X, y = data()
    report = m.fit(X, y, progress=lambda f, s: updates.append((f, s)))
    assert report.accepted and m.num_updates == 1
    assert isinstance(m.posterior, ModelPosterior)
    assert m.posterior.support.shape == (N_FIT, INPUT_DIM)
    history = report.details
    assert history["epochs_run"] == 15 and history["dropped"] == 0 and history["held_out"] == 0
    assert 1 <= history["num_actions"] <= 20
    assert report.lower == pytest.approx(-history["elbo"])
    assert math.isfinite(history["elbo_per_datum"])
    assert "ELBO/N" in updates[0][1] and updates[-1][0] == 1.0
    assert m.noise_variance != pytest.approx(0.2)  # θ moved
    theta = m.hyperparameters()
    assert theta["kernel"] == "matern32" and theta["constant_variance"] > 0.0
    assert isinstance(report.as_dict(), dict)


@pytest.mark.parametrize("cls", MODELS)
def test_the_prefit_starts_training_from_the_datas_theta(cls: type) -> None:
    X, y = data()
    y = 10.0 * y  # a field of ~100 (µT²) variance against the unit start
    kept = model(cls, epochs=0)
    kept.fit(X, y)
    assert kept.hyperparameters()["kernel_variance"] == pytest.approx(1.0)
    prefitted = model(cls, epochs=0, prefit_points=150)
    report = prefitted.fit(X, y)
    details = report.details["prefit"]
    assert details["points"] == 150 and details["accepted"]
    assert prefitted.hyperparameters()["kernel_variance"] > 10.0
    assert report.lower > kept.report.lower  # a higher ELBO at the pre-fit's θ
    again = model(cls, epochs=0, prefit_points=150)
    again.fit(X, y)
    assert again.hyperparameters() == prefitted.hyperparameters()  # seeded
    restored = cls.from_state(saved_and_loaded(prefitted.state_dict()))
    assert restored.prefit_points == 150


def test_training_lowers_the_elbo_and_the_noise_towards_the_truth() -> None:
    X, y = data()
    before = model(CaGP, epochs=0)
    before.fit(X, y)
    after = model(CaGP, epochs=60)
    after.fit(X, y)
    assert after.report.details["elbo"] < before.report.details["elbo"] - 10.0
    assert abs(math.log(after.noise_variance / NOISE)) < abs(math.log(0.2 / NOISE))


def test_ragged_blocks_drop_no_point() -> None:
    X, y = data(203)
    m = model(CaGP, actions=17, epochs=2)
    report = m.fit(X, y)
    assert report.accepted and report.details["dropped"] == 0
    index = m.posterior.actions.index
    values = m.posterior.actions.values
    assert sorted(index[values != 0].tolist()) == list(range(203))
    assert report.details["block_size"] == 12  # ⌈203/17⌉


@pytest.mark.parametrize("cls", MODELS)
def test_with_all_points_as_actions_it_is_the_exact_gp(cls: type) -> None:
    X, y = data(120)
    m = model(cls, actions=120, epochs=0, **({"cg_tolerance": 0.0} if cls is CaGPCG else {}))
    m.fit(X, y)
    kernel = Constant(4.0) + Matern32(1.0, [1.0, 1.0], ard_dims=INPUT_DIM)
    exact = ExactGP(kernel.double(), 0.2, torch.as_tensor(X), torch.as_tensor(y))
    mean, var = m.predict(QUERY)
    mean_ref, var_ref = exact.predict(QUERY)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(var, var_ref, rtol=1e-5, atol=1e-6)


def test_validation_split_stops_early_and_is_reported() -> None:
    X, y = data()
    m = model(CaGP, epochs=40, validation=0.2, validate_every=2, patience=2, learning_rate=1.0)
    updates: list[str] = []
    report = m.fit(X, y, progress=lambda f, s: updates.append(s))
    assert report.accepted and report.details["held_out"] == 40
    assert m.posterior.support.shape[0] == N_FIT - 40
    assert math.isfinite(report.details["best_validation_nll"])
    assert any("validation NLL" in s for s in updates)
    assert 0 <= report.details["kept_epoch"] <= report.details["epochs_run"]


def test_lbfgs_runs_in_float64_for_a_float32_model() -> None:
    X, y = data()
    m = model(CaGP, epochs=5, optimizer="lbfgs", learning_rate=0.5, dtype=torch.float32)
    report = m.fit(X, y)
    assert report.accepted and report.details["optimizer"] == "lbfgs"
    assert m.posterior.L.dtype == torch.float64  # the Gram is factored in float64
    mean, var = m.predict(QUERY)
    assert mean.dtype == torch.float32 and torch.isfinite(var).all()


@pytest.mark.parametrize("validation", [0.0, 0.2])
@pytest.mark.parametrize("cls", MODELS)
def test_state_round_trips_bit_identically(cls: type, validation: float) -> None:
    m = model(cls, validation=validation, validate_every=3)
    X, y = data()
    m.fit(X, y)
    state = saved_and_loaded(m.state_dict())
    again = cls.from_state(state, device="cpu")
    for a, b in zip(m.predict(QUERY), again.predict(QUERY), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert again.hyperparameters() == m.hyperparameters()
    assert again.posterior.elbo == m.posterior.elbo
    for key, value in again.state_dict().items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)
    other = CaGPCG if cls is CaGP else CaGP
    with pytest.raises(StateError, match=f"holds a '{cls.name}' model"):
        other.from_state(state, device="cpu")


@pytest.mark.parametrize("cls", MODELS)
def test_an_unfitted_state_round_trips(cls: type) -> None:
    again = cls.from_state(saved_and_loaded(model(cls).state_dict()), device="cpu")
    assert again.posterior is None and again.num_updates == 0
    with pytest.raises(RuntimeError, match="fit"):
        again.predict(QUERY)


def test_a_corrupt_state_is_refused() -> None:
    m = model(CaGP, epochs=1)
    m.fit(*data())
    state = m.state_dict()
    state["blocks.index"] = state["blocks.index"] + N_FIT
    with pytest.raises(StateError, match="outside the data"):
        CaGP.from_state(state, device="cpu")
    del state["blocks.raw"], state["blocks.index"], state["blocks.mask"]
    with pytest.raises(StateError, match="blocks"):
        CaGP.from_state(state, device="cpu")


@pytest.mark.parametrize("cls", MODELS)
def test_a_failed_fit_changes_nothing(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    m = model(cls, epochs=3)
    m.fit(*data())
    before = m.state_dict()
    prediction = m.predict(QUERY)

    def not_positive_definite(A: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(A), torch.ones(A.shape[:-2], dtype=torch.int32)

    with monkeypatch.context() as patch:
        patch.setattr(torch.linalg, "cholesky_ex", not_positive_definite)
        report = m.fit(*data(seed=9))
    assert not report.accepted and "not positive definite" in report.reason
    after = m.state_dict()
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    for a, b in zip(m.predict(QUERY), prediction, strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert m.num_updates == 1


@pytest.mark.parametrize("cls", MODELS)
def test_bad_input_is_refused(cls: type) -> None:
    m = model(cls)
    X, y = data()
    with pytest.raises(ValueError, match="expected X"):
        m.fit(X, y[:-1])
    y_bad = y.copy()
    y_bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit(X, y_bad)
    with pytest.raises(ValueError, match="validation"):
        model(cls, validation=0.5)


def test_adam_in_float32_keeps_the_gram_in_float64() -> None:
    X, y = data()
    m = model(CaGP, epochs=5, dtype=torch.float32)
    report = m.fit(X, y)
    assert report.accepted and m.posterior.X.dtype == torch.float32
    assert m.posterior.L.dtype == torch.float64
    mean, var = m.predict(QUERY)
    assert mean.dtype == torch.float32 and torch.all(var >= 0.0)


def test_a_failed_fit_with_validation_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    m = model(CaGP, epochs=3, validation=0.2, validate_every=1)
    m.fit(*data())
    before = m.state_dict()

    def not_positive_definite(A: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(A), torch.ones(A.shape[:-2], dtype=torch.int32)

    with monkeypatch.context() as patch:
        patch.setattr(torch.linalg, "cholesky_ex", not_positive_definite)
        report = m.fit(*data(seed=9))
    assert not report.accepted
    for key, value in m.state_dict().items():
        np.testing.assert_array_equal(value, before[key], err_msg=key)


def test_blocks_in_data_order_are_contiguous_runs_and_round_trip() -> None:
    X, y = data(203)
    m = model(CaGP, actions=17, epochs=2, block_order="data")
    assert m.fit(X, y).accepted and m.report.details["block_order"] == "data"
    index, values = m.posterior.actions.index, m.posterior.actions.values
    assert index[values != 0].tolist() == list(range(203))
    again = CaGP.from_state(saved_and_loaded(m.state_dict()), device="cpu")
    assert again.block_order == "data"
    for a, b in zip(m.predict(QUERY), again.predict(QUERY), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    with pytest.raises(ValueError, match="block_order"):
        model(CaGP, block_order="time")


def test_cg_on_a_dense_matrix_takes_the_steps_of_the_chunked_one(monkeypatch) -> None:
    p = make_problem(n=300)
    dense = actions_module.cg_actions(p.kernel, NOISE, p.X, p.y, 8)
    monkeypatch.setattr(actions_module, "DENSE_CG_BYTES", 0)  # every step a kernel pass
    chunked = actions_module.cg_actions(p.kernel, NOISE, p.X, p.y, 8, chunk=64)
    assert dense.iterations == chunked.iterations == 8
    # The mean CG gives, K v: the same to round-off (v itself is ill-conditioned).
    with torch.no_grad():
        K = p.kernel.K(p.X, p.X)
    torch.testing.assert_close(K @ dense.solution, K @ chunked.solution, rtol=1e-8, atol=1e-10)
    # The same Krylov space: the projections onto each other's actions are the identity.
    Q1, Q2 = dense.actions.values, chunked.actions.values
    overlap = torch.linalg.svdvals(Q1.mT @ Q2)
    torch.testing.assert_close(overlap, torch.ones_like(overlap), rtol=0.0, atol=1e-8)


def test_kernel_blocks_stay_under_their_byte_cap() -> None:
    assert block_rows(256, 1000) == 256
    rows = block_rows(256, 17_794)
    assert rows * 17_794 * 8 <= BLOCK_BYTES < (rows + 1) * 17_794 * 8
    assert block_rows(256, 10**9) == 1


def test_cagp_cg_costs_more_with_more_actions_and_less_than_the_cube() -> None:
    from gp_mapper.engine import EngineSpec, model_entry

    cost = model_entry("cagp_cg").fit_cost
    n = 17_794
    few = cost(EngineSpec(model="cagp_cg", cagp_actions=64, cagp_epochs=10), n)
    many = cost(EngineSpec(model="cagp_cg", cagp_actions=512, cagp_epochs=10), n)
    assert few.flops < many.flops < 10 * 13.0 * n**3  # the dense CG is far below a solve
    assert few.units == 10 and few.final_flops > few.flops_per_unit  # the pre-fit's and one epoch
    bare = cost(
        EngineSpec(model="cagp_cg", cagp_actions=64, cagp_epochs=10, cagp_prefit_points=0), n
    )
    assert bare.final_flops == bare.flops_per_unit


def test_the_default_fit_is_the_prefit_and_the_posterior() -> None:
    from gp_mapper.engine import EngineSpec, model_entry

    for name in ("cagp", "cagp_cg"):
        cost = model_entry(name).fit_cost(EngineSpec(model=name), 17_794)
        assert cost.units == 0 and cost.flops == cost.final_flops > 0.0
        described = cost.describe(50e9)
        assert described.startswith("no epochs: ") and "once" in described


def test_an_lbfgs_fit_is_priced_by_its_line_searches_evaluations() -> None:
    from gp_mapper.engine import EngineSpec, model_entry
    from gp_mapper.engine.core.fit import LINE_SEARCH_EVALUATIONS

    for name in ("cagp", "cagp_cg"):
        cost = model_entry(name).fit_cost
        adam = cost(EngineSpec(model=name, cagp_epochs=10), 5000)
        lbfgs = cost(EngineSpec(model=name, cagp_epochs=10, cagp_lbfgs=True), 5000)
        assert lbfgs.units == 10 * (1 + LINE_SEARCH_EVALUATIONS) and "L-BFGS" in lbfgs.unit
        assert lbfgs.flops_per_unit == adam.flops_per_unit  # an evaluation costs an epoch
