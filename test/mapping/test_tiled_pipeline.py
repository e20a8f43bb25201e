"""The pipeline over a tiled map: tiles built from the config, a full map said out loud,
maps saved before tiles continued as one tile, tiled maps saved and loaded."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.engine.tiled import ONE_TILE, TiledModel
from gp_mapper.mapping import MapperConfig, MappingPipeline, MapSnapshot
from gp_mapper.mapping.map_products import _kept_cells, _placement, predict_products
from gp_mapper.mapping.records import HEALTH_ERROR, HEALTH_WARN

from .conftest import FAST_ENGINE
from .synthetic import feed, lawnmower, stream, true_field

# 8 m x 4 m mown in lanes 1 m apart: across the tiles of 4 m.
EVENTS = stream(lawnmower(8.0, 4.0, 1.0, 0.1))


def mapped(**overrides) -> tuple[MappingPipeline, MapSnapshot]:
    config = MapperConfig(
        pose_source="topic", batch_size=100, resolution=0.25, engine=FAST_ENGINE
    ).replace(**overrides)
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
    _, reference = mapped(tile_size=0.0)
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


def test_tiles_drawn_once_at_the_end_are_the_tiles_redrawn_window_by_window() -> None:
    _, every = mapped(tile_size=4.0, tile_overlap=1.0)
    config = MapperConfig(
        pose_source="topic", batch_size=100, resolution=0.25, engine=FAST_ENGINE
    ).replace(tile_size=4.0, tile_overlap=1.0)
    with MappingPipeline(config, background=False, draw_each_window=False) as pipeline:
        feed(pipeline, EVENTS)
        pipeline.flush()
        once = pipeline.latest()
    assert once is not None and once.grid == every.grid
    for name in ("mean", "variance", "prior_variance"):
        np.testing.assert_allclose(getattr(once, name), getattr(every, name), rtol=1e-12)


def test_a_room_under_half_a_tile_across_is_one_tile_the_map_of_one_model() -> None:
    # The default tiles (16 m, two lengthscales of overlap) centred on the first reading hold
    # a 5 m x 4 m room whatever the frame's origin: the map is the one model's, bit for bit.
    assert MapperConfig().tile_size > 0.0
    for shift in (0.0, -7.9, 31.0):  # the room across tile edges of a grid anchored at 0
        events = stream(lawnmower(5.0, 4.0, 1.0, 0.1) + shift)
        maps, models = [], []
        for tile_size in (MapperConfig().tile_size, 0.0):
            config = MapperConfig(
                pose_source="topic", batch_size=100, resolution=0.25, engine=FAST_ENGINE
            )
            pipeline = MappingPipeline(config.replace(tile_size=tile_size), background=False)
            feed(pipeline, events)
            pipeline.flush()
            maps.append(pipeline.latest())
            models.append(pipeline._model)
        assert isinstance(models[0], TiledModel) and list(models[0].tiles) == [ONE_TILE]
        np.testing.assert_array_equal(maps[0].mean, maps[1].mean)
        np.testing.assert_array_equal(maps[0].variance, maps[1].variance)


def test_a_full_map_says_so_in_the_diagnostics_and_the_log(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
        pipeline, _ = mapped(vips_max_inducing=6, tile_size=0.0)
    d = pipeline.diagnostics()
    assert d["lost_readings"] > 0 and d["lost_windows"] > 0
    assert d["health"] in (HEALTH_WARN, HEALTH_ERROR) and "the map is full" in d["health_message"]
    assert any("the map is full" in r.message for r in caplog.records)


def test_a_full_tile_is_named(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
        pipeline, _ = mapped(vips_max_inducing=6, tile_size=4.0, tile_overlap=1.0)
    assert pipeline.diagnostics()["lost_readings"] > 0
    assert any(
        "the map is full" in r.message and "in tile(s) " in r.message for r in caplog.records
    )


def test_a_map_saved_before_tiles_continues_as_one_tile(tmp_path: Path) -> None:
    plain, snapshot = mapped(tile_size=0.0)
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
    tiled.save(tmp_path / "one_tile.npz")  # and is saved and loaded as a one-tile map
    again = MappingPipeline(config, background=False)
    again.load(tmp_path / "one_tile.npz")
    assert list(again._model.tiles) == [ONE_TILE] and again._model.layout.single
    np.testing.assert_array_equal(again.latest().mean, tiled.latest().mean)


def test_an_update_redraws_the_tiles_it_touched_and_the_map_equals_a_whole_redraw() -> None:
    # A 24 m corridor walked out and back, 5 m a window, across six 4 m tiles.
    events = stream(lawnmower(24.0, 1.0, 1.0, 0.1))
    config = MapperConfig(pose_source="topic", batch_size=50, resolution=0.25, engine=FAST_ENGINE)
    pipeline = MappingPipeline(config.replace(tile_size=4.0, tile_overlap=1.0), background=False)
    kept = []
    for start in range(0, len(events), 100):
        drawn = pipeline._drawn
        feed(pipeline, events[start : start + 100])
        snapshot = pipeline.latest()
        if drawn is not None and snapshot is not None and pipeline._drawn is not drawn:
            placed = _placement(drawn[1].grid, snapshot.grid)
            keep = placed and _kept_cells(
                pipeline._model.posterior, snapshot.grid, drawn[0], placed
            )
            kept.append(0.0 if keep is None else float(keep.mean()))
    pipeline.flush()
    snapshot = pipeline.latest()
    # Most updates touch one or two of the tiles: most of the grid keeps its values ...
    assert len(kept) >= 5 and np.median(kept) > 0.2
    # ... and the map is the one a whole redraw gives, update after update.
    whole = predict_products(pipeline._model.posterior, snapshot.grid, pipeline._config)
    np.testing.assert_allclose(snapshot.mean, whole.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(snapshot.variance, whole.variance, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(snapshot.prior_variance, whole.prior_variance)


def test_the_full_resolution_map_keeps_the_resolution_the_grid_coarsens(tmp_path: Path) -> None:
    from gp_mapper.io import write_grids_npz

    events = stream(lawnmower(24.0, 1.0, 1.0, 0.1))
    config = MapperConfig(
        pose_source="topic", batch_size=50, resolution=0.1, engine=FAST_ENGINE, max_cells=400
    )
    config = config.replace(tile_size=4.0, tile_overlap=1.0, full_resolution_cells=100_000)
    pipeline = MappingPipeline(config, background=False)
    feed(pipeline, events)
    pipeline.flush()
    snapshot = pipeline.latest()
    fine = snapshot.fine
    assert snapshot.grid.resolution_m > 0.1 and fine is not None
    assert fine.grid.resolution_m == pytest.approx(0.1) and fine.grid.num_cells > 5000
    # Redrawn tile by tile, update after update: the map a whole redraw gives.
    whole = predict_products(pipeline._model.posterior, fine.grid, config)
    np.testing.assert_allclose(fine.mean, whole.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fine.variance, whole.variance, rtol=1e-9, atol=1e-9)
    with np.load(write_grids_npz(tmp_path / "grids.npz", snapshot)) as grids:
        assert grids["mean"].shape == fine.grid.shape
    off = MappingPipeline(config.replace(full_resolution_cells=0), background=False)
    feed(off, events[:300])
    assert off.latest().fine is None and off.latest().exact.grid == off.latest().grid
