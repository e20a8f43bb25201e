"""The pipeline over a tiled map: tiles built from the config, a full map said out loud,
maps saved before tiles continued as one tile, tiled maps saved and loaded."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from gp_mapper.engine.tiled import ONE_TILE, TiledModel
from gp_mapper.mapping import MapperConfig, MappingPipeline, MapSnapshot
from gp_mapper.mapping.records import HEALTH_ERROR, HEALTH_WARN

from .conftest import FAST_ENGINE
from .synthetic import feed, lawnmower, stream, true_field

# 8 m x 4 m mown in lanes 1 m apart: across the tiles of 4 m.
EVENTS = stream(lawnmower(8.0, 4.0, 1.0, 0.1))


def mapped(**overrides) -> tuple[MappingPipeline, MapSnapshot]:
    config = MapperConfig(batch_size=100, resolution=0.25, engine=FAST_ENGINE).replace(**overrides)
    pipeline = MappingPipeline(config, background=False)
    feed(pipeline, EVENTS)
    pipeline.flush()
    snapshot = pipeline.latest()
    assert snapshot is not None
    return pipeline, snapshot


def rmse(snapshot: MapSnapshot) -> float:
    truth = true_field(snapshot.grid.cell_points()).reshape(snapshot.grid.shape)
    inside = np.isfinite(snapshot.mean)
    return float(np.sqrt(np.mean((snapshot.mean[inside] - truth[inside]) ** 2)))


def test_the_config_builds_a_tiled_map_that_maps_the_whole_area(tmp_path: Path) -> None:
    tiled, snapshot = mapped(tile_size=4.0, tile_overlap=1.0)
    _, reference = mapped()
    assert isinstance(tiled._model, TiledModel) and len(tiled._model.tiles) >= 2
    assert rmse(snapshot) < 1.5 * rmse(reference) + 0.05
    d = tiled.diagnostics()
    assert d["lost_readings"] == 0 and d["health"] != HEALTH_WARN
    path = tmp_path / "tiled.npz"
    tiled.save(path)
    again = MappingPipeline(tiled._config, background=False)
    again.load(path)
    assert set(again._model.tiles) == set(tiled._model.tiles)
    np.testing.assert_array_equal(again.latest().mean, snapshot.mean)


def test_a_full_map_says_so_in_the_diagnostics_and_the_log(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
        pipeline, _ = mapped(max_inducing=6)
    d = pipeline.diagnostics()
    assert d["lost_readings"] > 0 and d["lost_windows"] > 0
    assert d["health"] in (HEALTH_WARN, HEALTH_ERROR) and "the map is full" in d["health_message"]
    assert any("the map is full" in r.message for r in caplog.records)


def test_a_full_tile_is_named(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
        pipeline, _ = mapped(max_inducing=6, tile_size=4.0, tile_overlap=1.0)
    assert pipeline.diagnostics()["lost_readings"] > 0
    assert any(
        "the map is full" in r.message and "in tile(s) " in r.message for r in caplog.records
    )


def test_a_map_saved_before_tiles_continues_as_one_tile(tmp_path: Path) -> None:
    plain, snapshot = mapped()
    path = tmp_path / "plain.npz"
    plain.save(path)
    config = plain._config.replace(tile_size=4.0, tile_overlap=1.0)
    tiled = MappingPipeline(config, background=False)
    tiled.load(path)
    assert isinstance(tiled._model, TiledModel) and list(tiled._model.tiles) == [ONE_TILE]
    np.testing.assert_array_equal(tiled.latest().mean, snapshot.mean)
    feed(tiled, EVENTS[:400])  # and it goes on mapping
    tiled.flush()
    assert tiled.diagnostics()["updates"] > plain.diagnostics()["updates"]
