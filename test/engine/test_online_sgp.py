"""OnlineSparseGP: exactness, persistence, atomic updates, input validation, the seed's toy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    EngineSpec,
    ExactGP,
    Jitter,
    Matern52,
    NumericalError,
    OnlineSparseGP,
    Selection,
    SelectionProblem,
    SquaredExponential,
    StateError,
    Vips,
    warm_up,
)
from gp_mapper.engine.vips import online_sgp as online_sgp_module

from .conftest import sine


class AllPoints:
    """A selector that makes every datum seen an inducing point (old ones kept)."""

    name = "all"

    def select(self, problem: SelectionProblem) -> Selection:
        old = problem.old
        Z = problem.X if old is None else torch.cat([old.Z, problem.X])
        return Selection(Z, problem.X.shape[0], "all")

    def to_spec(self) -> dict:
        return {"type": "all"}


def batches(rng: np.random.Generator, n: int = 60, k: int = 3):
    X = torch.as_tensor(np.sort(rng.uniform(0.0, 15.0, n)))[:, None]
    y = sine(X[:, 0]) + 0.2 * torch.as_tensor(rng.standard_normal(n))
    size = n // k
    return X, y, [(X[i * size : (i + 1) * size], y[i * size : (i + 1) * size]) for i in range(k)]


def test_all_data_inducing_with_fixed_theta_equals_exact_gp(rng: np.random.Generator) -> None:
    X, y, parts = batches(rng)
    # Matérn-5/2 keeps K(X, X) well conditioned, so no jitter is needed and the match is tight.
    kernel = Matern52(1.2, 0.9)
    engine = OnlineSparseGP(kernel, 0.04, AllPoints(), device="cpu", fit_iterations=0, jitter=0.0)
    for Xb, yb in parts:
        assert engine.update(Xb, yb).accepted
    Xs = torch.linspace(-1.0, 16.0, 200, dtype=torch.float64)[:, None]
    mean, var = engine.predict(Xs)
    exact = ExactGP(kernel.double(), 0.04, X, y)
    mean_ref, var_ref = exact.predict(Xs)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(var, var_ref, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize(
    ("jitter", "variance_max"),
    [(Jitter(1e-8), None), (Jitter(1e-6, relative=False), 2000.0)],
    ids=["ours", "authors-uci"],
)
def test_state_round_trip_predicts_identically_and_resumes(
    rng: np.random.Generator, tmp_path: Path, jitter: Jitter, variance_max: float | None
) -> None:
    _X, _y, parts = batches(rng, n=240, k=4)
    kernel = SquaredExponential(1.0, 1.0, variance_max=variance_max)
    engine = OnlineSparseGP(kernel, 0.1, Vips(0.05), device="cpu", jitter=jitter)
    for Xb, yb in parts[:3]:
        engine.update(Xb, yb)
    path = tmp_path / "state.npz"
    np.savez(path, **engine.state_dict())
    with np.load(path, allow_pickle=False) as f:
        restored = OnlineSparseGP.from_state(dict(f), device="cpu")
    Xs = torch.linspace(0.0, 15.0, 97, dtype=torch.float64)[:, None]
    for a, b in zip(engine.predict(Xs), restored.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert restored.num_inducing == engine.num_inducing
    assert restored.stats == engine.stats
    assert restored.jitter == jitter and restored.carried.jitter.relative == jitter.relative
    assert restored.kernel.variance_max == variance_max
    r1, r2 = engine.update(*parts[3]), restored.update(*parts[3])
    assert (r1.m_after, r1.accepted) == (r2.m_after, r2.accepted)
    for a, b in zip(engine.predict(Xs), restored.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_from_state_rejects_bad_states(rng: np.random.Generator) -> None:
    _X, _y, parts = batches(rng)
    engine = OnlineSparseGP(SquaredExponential(), 0.1, device="cpu")
    engine.update(*parts[0])
    state = engine.state_dict()
    missing = {k: v for k, v in state.items() if k != "carried.P"}
    with pytest.raises(StateError, match=r"carried\.P"):
        OnlineSparseGP.from_state(missing)
    wrong = dict(state, **{"carried.v": np.zeros(3)})
    with pytest.raises(StateError, match="shapes"):
        OnlineSparseGP.from_state(wrong)
    nan = dict(state, **{"carried.L": np.full_like(state["carried.L"], np.nan)})
    with pytest.raises(StateError, match="non-finite"):
        OnlineSparseGP.from_state(nan)
    with pytest.raises(StateError, match="format"):
        OnlineSparseGP.from_state(dict(state, format_version=np.array(99)))
    with pytest.raises(StateError, match="absolute jitter must be positive"):
        OnlineSparseGP.from_state(
            dict(state, jitter=np.array(0.0), jitter_relative=np.array(False))
        )


def test_state_without_the_jitter_convention_reads_as_relative(rng: np.random.Generator) -> None:
    """Map files written before the absolute convention existed hold relative jitters."""
    _X, _y, parts = batches(rng)
    engine = OnlineSparseGP(SquaredExponential(), 0.1, device="cpu", jitter=3e-8)
    engine.update(*parts[0])
    state = {k: v for k, v in engine.state_dict().items() if not k.endswith("jitter_relative")}
    restored = OnlineSparseGP.from_state(state, device="cpu")
    assert restored.jitter == Jitter(3e-8) and restored.carried.jitter.relative


def test_failed_update_leaves_state_unchanged(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    _X, _y, parts = batches(rng)
    engine = OnlineSparseGP(SquaredExponential(), 0.1, Vips(0.05), device="cpu")
    engine.update(*parts[0])
    before = engine.state_dict()
    Xs = torch.linspace(0.0, 15.0, 50, dtype=torch.float64)[:, None]
    mean_before, _ = engine.predict(Xs)

    def not_pd(*args, **kwargs):
        raise NumericalError("matrix of size 7 is not positive definite")

    monkeypatch.setattr(online_sgp_module, "online_bound", not_pd)
    report = engine.update(*parts[1])
    assert not report.accepted
    assert "not positive definite" in report.reason
    assert report.m_after == report.m_before == int(before["carried.Z"].shape[0])
    after = engine.state_dict()
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], err_msg=key)
    torch.testing.assert_close(engine.predict(Xs)[0], mean_before, rtol=0.0, atol=0.0)


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros((0, 2)), np.zeros(0), "empty"),
        (np.zeros((5, 2)), np.zeros(4), "expected X"),
        (np.zeros(5), np.zeros(5), r"\[N, D\]"),
        (np.array([[0.0, np.nan], [1.0, 1.0]]), np.zeros(2), "X has 1 rows with NaN"),
        (np.zeros((2, 2)), np.array([0.0, np.inf]), "y has 1 NaN"),
    ],
)
def test_bad_batches_raise_clear_errors(X: np.ndarray, y: np.ndarray, match: str) -> None:
    engine = OnlineSparseGP(SquaredExponential(), 0.1, device="cpu")
    with pytest.raises(ValueError, match=match):
        engine.update(X, y)
    assert engine.posterior is None


def test_dimension_change_is_refused(rng: np.random.Generator) -> None:
    engine = OnlineSparseGP(SquaredExponential(), 0.1, device="cpu")
    engine.update(rng.uniform(size=(20, 2)), rng.uniform(size=20))
    with pytest.raises(ValueError, match="3 input dimensions, the map has 2"):
        engine.update(rng.uniform(size=(20, 3)), rng.uniform(size=20))


def test_duplicate_inputs_do_not_break_the_update() -> None:
    """A stationary robot: hundreds of identical positions give one inducing point, not a crash."""
    engine = OnlineSparseGP(SquaredExponential(1.0, 1.0), 0.1, Vips(0.05), device="cpu")
    X = np.zeros((300, 2))
    y = 48.0 + 0.1 * np.random.default_rng(0).standard_normal(300)
    report = engine.update(X, y)
    assert report.accepted
    assert report.m_after == 1
    report = engine.update(X, y)
    assert report.accepted and report.m_after == 1


def test_seed_toy_vips_model_sizes(rng: np.random.Generator) -> None:
    """1000 noisy points of sin(2x)+cos(5x), 4 sorted batches; VIPS M ≈ 8, 15, 22, 29.

    Pescador-Barrios et al. 2024, App. D.2.1 (Fig. 2a), with the sizes of the authors' code.
    """
    x = np.sort(rng.uniform(0.0, 12.0, 1000))
    X = torch.as_tensor(x)[:, None]
    y = sine(X[:, 0]) + torch.as_tensor(rng.standard_normal(1000))
    engine = OnlineSparseGP(SquaredExponential(1.5, 0.5), 0.5, Vips(0.05), device="cpu")
    Xs = torch.linspace(0.0, 10.0, 500, dtype=torch.float64)[:, None]
    sizes, rmses = [], []
    for b in range(4):
        report = engine.update(X[b * 250 : (b + 1) * 250], y[b * 250 : (b + 1) * 250])
        assert report.accepted
        sizes.append(report.m_after)
        rmses.append(float(((engine.predict(Xs)[0] - sine(Xs[:, 0])) ** 2).mean().sqrt()))
    for got, paper in zip(sizes, (8, 15, 22, 29), strict=True):
        assert abs(got - paper) <= 3, sizes
    assert rmses[-1] < 0.3, rmses
    assert rmses[-1] < rmses[0]


def test_report_carries_the_vips_quantities(rng: np.random.Generator) -> None:
    _X, _y, parts = batches(rng, n=120, k=2)
    engine = OnlineSparseGP(SquaredExponential(), 0.1, Vips(0.05), device="cpu")
    engine.update(*parts[0])
    r = engine.update(*parts[1])
    assert r.accepted and r.reason == "threshold"
    assert r.bound_at_selection >= r.threshold
    assert r.reference >= r.bound_at_selection - 1e-6
    assert r.threshold == pytest.approx(r.reference - 0.05 * abs(r.reference - r.noise_model))
    assert r.m_after == r.m_before + r.num_added
    flat = r.as_dict()
    assert {"kernel_variance", "lengthscale", "noise_variance", "seconds_fit"} <= flat.keys()
    assert flat["kernel"] == "se" and engine.report is r


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_engine_matches_cpu(rng: np.random.Generator) -> None:
    _X, _y, parts = batches(rng, n=300, k=3)
    results = []
    for device in ("cpu", "cuda"):
        engine = OnlineSparseGP(SquaredExponential(), 0.1, Vips(0.05), device=device)
        for Xb, yb in parts:
            engine.update(Xb, yb)
        Xs = torch.linspace(0, 15, 64, dtype=torch.float64)[:, None]
        results.append((engine.num_inducing, engine.predict(Xs)[0].cpu()))
    assert results[0][0] == results[1][0]
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-6, atol=1e-6)


def test_block_prediction_equals_dense_prediction(rng: np.random.Generator) -> None:
    """predict_block skips far inducing points; the constant part is handled exactly."""
    from gp_mapper.engine import Constant, FixedSize

    engine = OnlineSparseGP(
        Constant(500.0) + Matern52(100.0, 0.7), 0.1, FixedSize(300), device="cpu", fit_iterations=0
    )
    X = rng.uniform(0.0, 20.0, (1500, 2))
    engine.update(X, 48.0 + 10.0 * np.sin(X[:, 0]) * np.cos(X[:, 1]))
    post = engine.posterior
    gx, gy = np.meshgrid(np.arange(3.0, 5.0, 0.1), np.arange(12.0, 14.0, 0.1))
    block = torch.as_tensor(np.column_stack([gx.ravel(), gy.ravel()]))
    mean, var = post.predict(block)
    mean_b, var_b = post.predict_block(block)
    torch.testing.assert_close(mean_b, mean, rtol=0.0, atol=1e-6)
    torch.testing.assert_close(var_b, var, rtol=0.0, atol=1e-6)
    radius = post.kernel.without_constant().negligible_distance(1e-9)
    assert 5.0 < radius < 10.0  # about 12 lengthscales of 0.7 m for Matérn-5/2


def test_provisional_posterior_is_the_batch_under_the_old_theta(
    rng: np.random.Generator,
) -> None:
    X = np.sort(rng.uniform(0.0, 10.0, 240))[:, None]
    y = np.sin(2.0 * X[:, 0]) + 0.1 * rng.standard_normal(240)

    def fresh() -> OnlineSparseGP:
        return OnlineSparseGP(SquaredExponential(1.0, 0.5), 0.1, Vips(0.05), device="cpu")

    with_callback, without = fresh(), fresh()
    with_callback.update(X[:120], y[:120])
    without.update(X[:120], y[:120])
    theta_old = with_callback.hyperparameters()
    seen = []
    report = with_callback.update(X[120:], y[120:], on_selected=seen.append)
    without.update(X[120:], y[120:])
    assert len(seen) == 1 and report.seconds_provisional > 0.0
    provisional = seen[0]
    # The new inducing points and the new batch, but θ not yet re-fitted.
    torch.testing.assert_close(provisional.Z, with_callback.posterior.Z)
    assert provisional.kernel.describe()["se_lengthscale"] == pytest.approx(
        theta_old["lengthscale"]
    )
    assert with_callback.hyperparameters() != theta_old
    # It already knows the new batch: far better there than the model before it.
    Xs = torch.as_tensor(X[120:])
    mean, _ = provisional.predict(Xs)
    assert float(torch.sqrt(torch.mean((mean - torch.as_tensor(y[120:])) ** 2))) < 0.2
    # The committed state does not depend on the callback.
    for a, b in zip(with_callback.predict(Xs), without.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)


def test_warm_up_runs_a_throwaway_engine() -> None:
    spec = EngineSpec(device="cpu", fit_iterations=5)
    for dims in (2, 3):
        seconds = warm_up(spec, dims)
        assert 0.0 < seconds < 60.0
