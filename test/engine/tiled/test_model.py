"""The tiled map: one tile is the model itself, the blend is continuous, windows are atomic,
θ carries into new tiles, full tiles are named, and the state round-trips."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, StreamingModel, build_model, model_from_state
from gp_mapper.engine.registry import model_entry, model_names
from gp_mapper.engine.tiled import UNANCHORED, TiledModel, TileLayout

SETTINGS = {"kernel": "se", "lengthscale": 0.6, "constant_variance": 4.0, "kernel_variance": 1.0,
            "noise_variance": 0.01, "fit_iterations": 3, "device": "cpu"}  # fmt: skip
NOISE_SD = 0.1


def field(xy: np.ndarray) -> np.ndarray:
    return 2.0 + np.sin(1.3 * xy[:, 0]) * np.cos(0.9 * xy[:, 1])


def walk(n: int = 900, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A lawnmower walk over 12 × 4 m (three 4 m tiles along x), with noisy readings."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n)
    x = 12.0 * t
    y = 2.0 + 1.6 * np.sin(2.0 * np.pi * 9.0 * t)
    xy = np.column_stack([x, y])
    return xy, field(xy) + NOISE_SD * rng.standard_normal(n)


LAYOUT = TileLayout(4.0, 1.0)


def tiled(layout: TileLayout = LAYOUT, name: str = "vips", **settings) -> TiledModel:
    spec = EngineSpec(**{**SETTINGS, **settings, "model": name})
    return TiledModel(build_model(spec, 2), layout)


def stream(model: StreamingModel, X: np.ndarray, y: np.ndarray, windows: int = 6) -> None:
    for part in np.array_split(np.arange(len(X)), windows):
        assert model.update(X[part], y[part]).accepted


def saved_and_loaded(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


def test_one_tile_is_the_model_itself_bit_for_bit() -> None:
    X, y = walk(300)
    plain = build_model(EngineSpec(**{**SETTINGS, "model": "vips"}), 2)
    one = tiled(TileLayout(math.inf, 0.0))
    stream(plain, X, y, 3)
    stream(one, X, y, 3)
    Xs = torch.as_tensor(walk(50, seed=3)[0])
    for a, b in zip(plain.predict(Xs), one.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert one.hyperparameters() == plain.hyperparameters()
    assert len(one.tiles) == 1


def test_the_map_is_continuous_across_tile_edges_and_fits_the_field() -> None:
    X, y = walk()
    model = tiled()
    stream(model, X, y)
    assert len(model.tiles) >= 3
    x = np.linspace(0.5, 11.5, 2201)  # 5 mm steps across the edges at x = 4 and 8
    line = np.column_stack([x, np.full_like(x, 2.0)])
    mean, var = (t.numpy() for t in model.predict(line))
    steps = np.abs(np.diff(mean))
    assert steps.max() < NOISE_SD  # no jump anywhere, edges included
    near_edge = (np.abs(x[1:] - 4.0) < 1.0) | (np.abs(x[1:] - 8.0) < 1.0)
    assert steps[near_edge].max() < 3.0 * steps[~near_edge].max() + 1e-3
    assert np.abs(np.diff(var)).max() < 0.05
    assert np.sqrt(np.mean((mean - field(line)) ** 2)) < 3.0 * NOISE_SD


def test_a_window_updates_only_the_tiles_it_touches() -> None:
    X, y = walk()
    model = tiled()
    stream(model, X, y)
    before = {k: t.num_updates for k, t in model.tiles.items()}
    inside = (X[:, 0] > 5.5) & (X[:, 0] < 6.5) & (np.abs(X[:, 1] - 2.0) < 0.8)  # tile (1, 0)
    report = model.update(X[inside], y[inside])
    assert report.accepted and report.touched == ((1, 0),)
    after = {k: t.num_updates for k, t in model.tiles.items()}
    assert {k for k in after if after[k] != before[k]} == {(1, 0)}


def test_a_window_across_an_edge_has_the_bound_per_reading_of_one_inside_a_tile() -> None:
    # The fit schedule re-fits θ when a window's bound per reading drops: a reading in an
    # overlap is in two tiles' bounds, which must not read as a change of the field.
    X, y = walk()
    model = tiled()
    stream(model, X, y)
    band = np.abs(X[:, 1] - 2.0) < 0.8

    def joined(lo: float, hi: float) -> tuple[float, float, int]:
        rows = band & (X[:, 0] > lo) & (X[:, 0] < hi)
        report = model.update(X[rows], y[rows], fit=False)
        summed = sum(r["bound_after_fit"] for r in report.per_tile.values())
        return report.bound_after_fit / report.n, summed / report.n, len(report.touched)

    inside = [joined(lo, lo + 1.0) for lo in (1.5, 5.5, 9.5)]  # each in one tile
    across = [joined(lo, lo + 1.0) for lo in (3.5, 7.5)]  # on the edges x = 4 and 8
    assert {t for _, _, t in inside} == {1} and {t for _, _, t in across} == {2}
    low, high = min(b for b, _, _ in inside) - 0.2, max(b for b, _, _ in inside) + 0.2
    assert all(low < b < high for b, _, _ in across)
    assert not any(low < s < high for _, s, _ in across)  # the tiles' bounds summed


def test_a_window_one_tile_refuses_changes_no_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = walk()
    model = tiled()
    stream(model, X, y)
    Xs = torch.as_tensor(walk(60, seed=5)[0])
    before = model.predict(Xs)
    states = {k: t.state_dict() for k, t in model.tiles.items()}
    edge = (X[:, 0] > 3.5) & (X[:, 0] < 8.5)  # tiles (0, 0), (1, 0) and (2, 0)
    last = max(model.layout.route(X[edge]))
    tile = model.tiles[last]
    refused = type(tile.report)(False, "no", int(edge.sum()), 0, 0)
    monkeypatch.setattr(tile, "update", lambda *a, **k: refused)
    report = model.update(X[edge] + 0.01, y[edge] + 1.0)
    assert not report.accepted and f"tile {last[0]}_{last[1]}" in report.reason
    for a, b in zip(before, model.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    for key, state in states.items():
        again = model.tiles[key].state_dict()
        assert all(np.array_equal(state[k], again[k]) for k in state)


def test_a_new_tile_starts_from_the_maps_theta() -> None:
    X, y = walk()
    model = tiled()
    first = X[:, 0] < 3.0  # tile (0, 0) only: its fit sets the map's θ
    stream(model, X[first], y[first], 2)
    theta = model.hyperparameters()
    assert theta != build_model(EngineSpec(**{**SETTINGS, "model": "vips"}), 2).hyperparameters()
    far = X[:, 0] > 9.0
    assert model.update(X[far], y[far], fit=False).accepted
    assert model.tiles[(2, 0)].hyperparameters() == theta


def test_every_tile_a_window_touches_takes_the_maps_theta() -> None:
    X, y = walk()
    model = tiled()
    stream(model, X, y)
    edge = (X[:, 0] > 3.5) & (X[:, 0] < 8.5)  # tiles (0, 0), (1, 0), (2, 0) and their rows
    report = model.update(X[edge], y[edge])
    assert report.accepted and len(report.touched) >= 3
    theta = model.hyperparameters()  # fitted in the window's home tile
    assert all(model.tiles[k].hyperparameters() == theta for k in report.touched)


def test_a_full_tile_that_loses_readings_is_named() -> None:
    X, y = walk()
    model = tiled(vips_max_inducing=8)
    reports = [model.update(X[p], y[p]) for p in np.array_split(np.arange(len(X)), 6)]
    assert all(r.accepted for r in reports)
    assert any(r.full for r in reports)
    named = {key for r in reports for key in r.full}
    assert all(len(model.tiles[k].posterior.support) >= 8 for k in named)
    assert "tiles_full" in reports[-1].as_dict()


@pytest.mark.parametrize("name", model_names("streaming"))
def test_every_streaming_model_tiles_and_its_state_round_trips(name: str) -> None:
    from test.engine.test_model_contract import data

    X, y = data(name=name)
    X = X * 4.0  # 12 m: several 4 m tiles
    model = tiled(name=name)
    if model.auxiliary_inputs:
        extra = np.column_stack([np.linspace(0.0, 6.0, len(X)), np.arange(len(X)) * 0.1])
        X = np.column_stack([X, extra[:, : len(model.auxiliary_inputs)]])
    assert isinstance(model, StreamingModel)
    stream(model, X, y, 3)
    assert len(model.tiles) > 1
    Xs = torch.as_tensor(X[:40, :2])
    mean, var = model.predict(Xs)
    assert torch.isfinite(mean).all() and (var > 0).all()
    again = model_from_state(saved_and_loaded(model.state_dict()), "cpu", expected=name)
    assert isinstance(again, TiledModel) and set(again.tiles) == set(model.tiles)
    for a, b in zip(mean, again.predict(Xs)[0], strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    if model.posterior.target == "vector":
        field_mean, cov = model.posterior.predict_field(Xs)
        assert field_mean.shape == (40, 3) and cov.shape == (40, 3, 3)


@pytest.mark.parametrize(
    "name", [n for n in model_names("streaming") if model_entry(n).target == "vector"]
)
def test_a_vector_maps_norm_and_field_in_one_pass_are_its_two_predictions(name: str) -> None:
    from test.engine.test_model_contract import data

    X, y = data(name=name)
    model = tiled(name=name)
    stream(model, X * 4.0, y, 3)
    assert len(model.tiles) > 1
    # A line across the tiles, their overlaps and off every tile (the reference tile's).
    x = np.linspace(-6.0, 18.0, 241)
    Xs = torch.as_tensor(np.column_stack([x, np.full_like(x, 1.0)]))
    posterior = model.posterior
    together = posterior.predict_block_with_field(Xs)
    apart = (*posterior.predict_block(Xs), *posterior.predict_field(Xs))
    for a, b in zip(together, apart, strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)


def test_the_first_reading_anchors_the_tiles_and_the_anchor_is_saved() -> None:
    X, y = walk(300)
    model = tiled(TileLayout(4.0, 1.0, UNANCHORED))
    stream(model, X + 100.0, y)
    assert model.layout.origin == pytest.approx(tuple(X[0] + 100.0 - 2.0))
    again = model_from_state(saved_and_loaded(model.state_dict()), "cpu")
    assert again.layout == model.layout and set(again.tiles) == set(model.tiles)
    state = model.state_dict()  # a state written before origins: (size, overlap), origin 0
    state["tiles.layout"] = state["tiles.layout"][:2]
    assert model_from_state(state, "cpu").layout.origin == (0.0, 0.0)


def test_tiles_far_from_the_recent_windows_keep_only_their_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gp_mapper.engine.tiled import model as tiled_model

    t = np.linspace(0.0, 1.0, 1800)
    X = np.column_stack([24.0 * t, 2.0 + 1.6 * np.sin(2.0 * np.pi * 18.0 * t)])  # 6 tiles
    y = field(X) + NOISE_SD * np.random.default_rng(0).standard_normal(len(X))
    maps = {}
    for idle_windows in (4, 10**9):  # released, and never released
        monkeypatch.setattr(tiled_model, "IDLE_WINDOWS", idle_windows)
        maps[idle_windows] = model = tiled(fit_iterations=0)
        stream(model, X, y, windows=36)
    released, kept = maps[4], maps[10**9]
    assert released.report.idle >= 3 and kept.report.idle == 0
    idle = {k for k, tile in released.tiles.items() if not tile.posterior.W_cache.held}
    # The last 4 windows (8 m of walk) touched tiles 5 and 6 along x: those and their
    # neighbours keep their caches, every tile behind them keeps its state alone.
    assert idle == {k for k in released.tiles if k[0] <= 3}
    walked = torch.as_tensor(X)  # every tile's region
    for a, b in zip(released.predict(walked), kept.predict(walked), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)  # computed again: the same map
    assert all(tile.posterior.W_cache.held for tile in released.tiles.values())
    state, kept_state = released.state_dict(), kept.state_dict()
    assert all(np.array_equal(state[k], kept_state[k]) for k in state)


def test_the_map_holds_the_offsets_its_passes_leave_and_saves_their_record() -> None:
    X, y = walk(900)
    t = np.linspace(0.0, 300.0, len(X))  # the walk's 9 sweeps 33 s apart: passes
    model = tiled(vips_pass_noise_variance=0.5)
    plain = tiled(vips_pass_noise_variance=0.5)
    for part in np.array_split(np.arange(len(X)), 6):
        assert model.update(X[part], y[part]).accepted
        assert plain.update(X[part], y[part]).accepted
        model.record_passes(X[part], t[part], math.nan)
    on_path = torch.as_tensor(X[::50])
    away = torch.tensor([[6.0, 8.0], [20.0, 2.0]])  # beyond the walk: no pass near
    mean, var = model.predict(on_path)
    mean0, var0 = plain.predict(on_path)
    assert torch.equal(mean, mean0)  # the record moves the variance only
    prior = plain.posterior.prior_variance(on_path)
    k = model.posterior.passes.passes_at(on_path.numpy())
    assert (k >= 1).all()
    expected = var0 + 0.5 * (1.0 - var0 / prior).clamp(0, 1) ** 2 / torch.as_tensor(k)
    assert torch.allclose(var, expected, rtol=1e-12, atol=0.0)
    assert torch.equal(model.predict(away)[1], plain.predict(away)[1])
    # The grid's path (predict_block) says the same; a saved map predicts the same.
    assert torch.allclose(model.posterior.predict_block(on_path)[1], var, rtol=1e-12)
    again = model_from_state(saved_and_loaded(model.state_dict()), device="cpu")
    assert torch.equal(again.predict(on_path)[1], var)


def test_a_field_vector_maps_covariance_holds_its_passes_offsets_along_the_field() -> None:
    X, _ = walk(600)
    rng = np.random.default_rng(2)
    B = np.column_stack([20.0 + field(X), 5.0 - field(X), np.full(len(X), 40.0)])
    B += NOISE_SD * rng.standard_normal(B.shape)
    t = np.linspace(0.0, 200.0, len(X))
    settings = {"vips_pass_noise_variance": 0.3, "fit_iterations": 0}
    model, plain = tiled(name="potential", **settings), tiled(name="potential", **settings)
    for part in np.array_split(np.arange(len(X)), 4):
        assert model.update(X[part], B[part]).accepted
        assert plain.update(X[part], B[part]).accepted
        model.record_passes(X[part], t[part], math.nan, along_variance=0.75)
    on_path = torch.as_tensor(X[::40])
    mean, cov = model.posterior.predict_field(on_path)
    mean0, cov0 = plain.posterior.predict_field(on_path)
    assert torch.equal(mean, mean0)
    a, b = model.posterior.passes.field_terms()
    assert b == pytest.approx(1.5 * (0.75 - 0.3)) and a == pytest.approx(0.3 - b / 3)
    u = mean0 / mean0.norm(dim=1, keepdim=True)
    along = (u[:, None, :] @ cov0 @ u[:, :, None])[:, 0, 0]
    prior = plain.posterior.prior_variance(on_path)
    k = torch.as_tensor(model.posterior.passes.passes_at(on_path.numpy()), dtype=torch.float64)
    assert (k >= 1).all()
    shares = (1.0 - along / prior).clamp(0, 1) ** 2 / k
    term = shares[:, None, None] * (a * torch.eye(3) + b * u[:, :, None] * u[:, None, :])
    # (the two maps' latent covariances agree to ~3e-9: their prediction caches' rounding)
    torch.testing.assert_close(cov, cov0 + term, rtol=0.0, atol=1e-8)
    # The grid's one-pass prediction says the same, and ‖B‖'s variance gains the part
    # along the field, a + b (the norm's measured σ²_pass), not the components' mean.
    norm_var, norm_var0 = model.posterior.predict(on_path)[1], plain.posterior.predict(on_path)[1]
    *_, cov_block = model.posterior.predict_block_with_field(on_path)
    torch.testing.assert_close(cov_block, cov, rtol=1e-12, atol=1e-14)
    norm_shares = (1.0 - norm_var0 / prior).clamp(0, 1) ** 2 / k
    torch.testing.assert_close(norm_var - norm_var0, (a + b) * norm_shares, rtol=0.0, atol=1e-8)
