"""Offline tiled fits: serial and on Ray (a local runtime and a two-node cluster) give the same
map bit for bit; a tile that fails twice is named and no map is made."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from gp_mapper.engine.tiled import TiledModel
from gp_mapper.mapping import MapperConfig
from gp_mapper.mapping import tiled_fit as tiled_fit_module
from gp_mapper.mapping.inputs import collect_samples
from gp_mapper.mapping.tiled_fit import TileFitError, fit_tiled

from .conftest import FAST_ENGINE
from .synthetic import lawnmower, stream, true_field

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install ray)"
)
CONFIG = MapperConfig(
    pose_source="topic", batch_size=100, resolution=0.25, engine=FAST_ENGINE
).replace(tile_size=4.0, tile_overlap=1.0)
PROBES = torch.as_tensor(np.random.default_rng(0).uniform([0.5, 0.5], [7.5, 3.5], (50, 2)))


@pytest.fixture(scope="module")
def samples():
    return collect_samples(stream(lawnmower(8.0, 4.0, 1.0, 0.1)), CONFIG)


@pytest.fixture(scope="module")
def serial(samples):
    return fit_tiled(samples, CONFIG, workers=0)


def same_map(a: TiledModel, b: TiledModel) -> None:
    assert set(a.tiles) == set(b.tiles)
    for key in a.tiles:
        sa, sb = a.tiles[key].state_dict(), b.tiles[key].state_dict()
        assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)
    for x, y in zip(a.predict(PROBES), b.predict(PROBES), strict=True):
        torch.testing.assert_close(x, y, rtol=0.0, atol=0.0)


def test_progress_counts_the_readings_fitted(samples) -> None:
    ticks: list[tuple[float, str]] = []
    _, report = fit_tiled(samples, CONFIG, workers=0, progress=lambda f, s: ticks.append((f, s)))
    counts = sorted(report["samples_per_tile"].values(), reverse=True)
    # A report of nothing done as the tiles start (the caller's ETA counts from it); then the
    # largest tile, first: its share of the readings, not 1 / tiles.
    assert ticks[0] == (0.0, f"tiles 0/{len(counts)}")
    assert ticks[1][0] == pytest.approx(counts[0] / sum(counts))
    assert ticks[1][0] > 1.0 / len(counts)
    assert [f for f, _ in ticks] == sorted(f for f, _ in ticks) and ticks[-1][0] == 1.0
    assert ticks[-1][1] == f"tiles {len(counts)}/{len(counts)}"


def test_a_serial_fit_maps_every_tile(serial) -> None:
    model, report = serial
    assert isinstance(model, TiledModel) and len(model.tiles) == report["tiles"] >= 4
    mean, _ = model.predict(PROBES)
    err = mean.numpy() - true_field(PROBES.numpy())
    assert np.sqrt(np.mean(err**2)) < 1.0
    assert sum(report["M_per_tile"].values()) > 0
    # One θ for the map, as the node's: every tile streamed under the building's.
    theta = model.tiles[tuple(report["theta_from_tile"])].hyperparameters()
    assert theta["lengthscale"] != CONFIG.engine.lengthscale  # fitted, not the start
    assert all(tile.hyperparameters() == theta for tile in model.tiles.values())


def test_a_batch_model_fits_each_tile_at_once_and_the_map_saves(samples, tmp_path) -> None:
    from gp_mapper.engine import model_from_state

    spec = CONFIG.engine.replace(model="exact", fit_iterations=5)
    model, report = fit_tiled(samples, CONFIG, spec=spec, workers=0)
    assert model.kind == "batch" and model.name == "exact" and len(model.tiles) >= 4
    assert all(tile.kind == "batch" for tile in model.tiles.values())
    assert report["theta_samples"] == 0  # each tile fits its own θ
    mean, var = model.predict(PROBES)
    err = mean.numpy() - true_field(PROBES.numpy())
    assert np.sqrt(np.mean(err**2)) < 1.0 and bool((var > 0).all())
    again = model_from_state(model.state_dict(), device="cpu", expected="exact")
    assert isinstance(again, TiledModel) and again.kind == "batch"
    torch.testing.assert_close(again.predict(PROBES)[0], mean, rtol=0.0, atol=0.0)


@needs_ray
def test_ray_with_two_local_workers_gives_the_same_map(
    samples, serial, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver copies a tile's readings out of the log only as its task is handed on: at
    # most the in-flight limit of tiles' data is out at once.
    real_run = tiled_fit_module._RayRunner.run
    out = {"drawn": 0, "done": 0, "peak": 0}

    def counted(self, tasks, tick):
        def drawn():
            for task in tasks:
                out["drawn"] += 1
                out["peak"] = max(out["peak"], out["drawn"] - out["done"])
                yield task

        def done(key):
            out["done"] += 1
            tick(key)

        return real_run(self, drawn(), done)

    monkeypatch.setattr(tiled_fit_module._RayRunner, "run", counted)
    ticks: list[float] = []
    model, report = fit_tiled(samples, CONFIG, workers=2, progress=lambda f, s: ticks.append(f))
    assert report["workers"] == 2 and ticks[-1] == 1.0
    limit = tiled_fit_module.IN_FLIGHT_PER_WORKER * 2
    assert report["tiles"] > limit and out["drawn"] == report["tiles"]
    assert out["peak"] == limit
    same_map(serial.model, model)


@needs_ray
def test_a_runtime_the_caller_started_is_used_and_left_to_the_caller(samples, serial) -> None:
    """``gp-mapper fit`` starts the runtime before reading the bags (its workers import the
    engine meanwhile); the fit uses it and leaves it running, the caller stops it."""
    import ray

    from gp_mapper.mapping.tiled_fit import RayRuntime

    threads = torch.get_num_threads()
    with RayRuntime(2) as runtime:
        assert ray.is_initialized() and len(runtime.warming) == 2
        model, _ = fit_tiled(samples, CONFIG, workers=2)
        assert ray.is_initialized()
        assert ray.get(runtime.warming) == [None, None]  # the workers imported the engine
    assert not ray.is_initialized()
    assert torch.get_num_threads() == threads  # the θ fit here restored the driver's setting
    same_map(serial.model, model)


@needs_ray
def test_a_two_node_cluster_gives_the_same_map(samples, serial) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        model, _ = fit_tiled(samples, CONFIG, workers=2, ray_address=cluster.address)
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
    same_map(serial.model, model)


def test_a_tile_that_fails_twice_is_named_and_no_map_is_made(
    samples, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tiled_fit_module.fit_tile
    attempts: list[tuple[int, int]] = []

    def flaky(task):
        if task.key == (1, 1):
            attempts.append(task.key)
            raise RuntimeError("the tile's disk went away")
        return real(task)

    monkeypatch.setattr(tiled_fit_module, "fit_tile", flaky)
    with pytest.raises(TileFitError, match="1_1: the tile's disk went away"):
        fit_tiled(samples, CONFIG, workers=0)
    assert len(attempts) == 2  # tried, then retried once
