"""A map of the field vector (target: vector, model: potential) through the whole pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gp_mapper.engine import EngineSpec
from gp_mapper.mapping import (
    FieldReading,
    MapFileError,
    MapperConfig,
    MappingPipeline,
    MapSnapshot,
)
from gp_mapper.mapping.inputs import collect_samples

from .conftest import FAST_ENGINE
from .synthetic import dipole_field, feed, lawnmower, stream

# The Earth's field of the synthetic room (µT, map frame) and two dipoles a metre below the
# floor, each a few µT at the sensor: a curl-free field, as the potential model assumes.
BACKGROUND_UT = np.array([16.0, 4.0, -47.0])
DIPOLE_POSITIONS_M = np.array([[1.0, 1.2, -1.0], [2.2, 2.0, -1.2]])
DIPOLE_MOMENTS = np.array([[4.0, -3.0, 6.0], [-5.0, 2.0, -7.0]])

# A 3 m x 3 m room mown in five lanes, poses 8 cm apart at 50 Hz: ~226 readings, two windows.
PATH = lawnmower(3.0, 3.0, 0.75, 0.08)
READ_AT = 0.5 * (PATH[1:] + PATH[:-1])  # `stream` reads half-way between poses
FIELD = dipole_field(READ_AT, DIPOLE_POSITIONS_M, DIPOLE_MOMENTS, BACKGROUND_UT)
EVENTS = stream(PATH, field_map_ut=FIELD)
NUM_READINGS = sum(isinstance(e, FieldReading) for e in EVENTS)
# Cells whose centre lies this close to a reading are "near the path" (m): a fifth of the
# lane spacing, inside the field's lengthscale of about a metre.
NEAR_M = 0.2
# The map must explain most of the field's spread near the path: each component's error there
# below this share of its standard deviation over the readings (it is ~0.1-0.35 here).
RMSE_SHARE = 0.5

VECTOR_ENGINE = EngineSpec(model="potential", fit_iterations=5, device="cpu")


@pytest.fixture(scope="module")
def config() -> MapperConfig:
    return MapperConfig(pose_source="topic",
        target="vector", batch_size=120, resolution=0.25, bounds=(0.0, 3.0, 0.0, 3.0),
        engine=VECTOR_ENGINE,
    )  # fmt: skip


@pytest.fixture(scope="module")
def mapped(config: MapperConfig) -> tuple[MappingPipeline, MapSnapshot]:
    pipeline = MappingPipeline(config, background=False)
    feed(pipeline, EVENTS)
    pipeline.flush()
    snapshot = pipeline.latest()
    assert snapshot is not None
    return pipeline, snapshot


def truth(snapshot: MapSnapshot) -> np.ndarray:
    points = snapshot.grid.cell_points()
    field = dipole_field(points, DIPOLE_POSITIONS_M, DIPOLE_MOMENTS, BACKGROUND_UT)
    return field.reshape(*snapshot.grid.shape, 3)


def near_path(snapshot: MapSnapshot) -> np.ndarray:
    points = snapshot.grid.cell_points()
    distance = np.linalg.norm(points[:, None, :] - READ_AT[None], axis=-1).min(axis=1)
    return (distance < NEAR_M).reshape(snapshot.grid.shape)


def test_collected_samples_of_a_vector_map_are_the_map_frame_field(config) -> None:
    samples = collect_samples(EVENTS, config)
    assert samples.y.shape == (NUM_READINGS, 3) and samples.X.shape == (NUM_READINGS, 2)
    np.testing.assert_allclose(samples.y, FIELD, atol=1e-9)  # rotated back into the map frame
    assert collect_samples([], config).y.shape == (0, 3)


def test_component_grids_match_the_field_near_the_path(mapped) -> None:
    _, snapshot = mapped
    assert snapshot.is_vector and snapshot.model == "potential"
    assert snapshot.num_samples == NUM_READINGS
    assert snapshot.field_mean.shape == snapshot.field_variance.shape == (12, 12, 3)
    assert np.all(snapshot.field_variance > 0.0)
    near = near_path(snapshot)
    assert near.sum() >= 50
    expected = truth(snapshot)
    rmse = np.sqrt(np.mean((snapshot.field_mean - expected)[near] ** 2, axis=0))
    assert np.all(rmse < RMSE_SHARE * FIELD.std(axis=0)), (rmse, FIELD.std(axis=0))
    # ~/mean is |B| from the same posterior, on the same cells
    norm_rmse = np.sqrt(np.mean((snapshot.mean - np.linalg.norm(expected, axis=-1))[near] ** 2))
    assert norm_rmse < RMSE_SHARE * np.linalg.norm(FIELD, axis=1).std()


def test_a_vector_map_saves_and_loads(mapped, config, tmp_path: Path) -> None:
    source, original = mapped
    path = tmp_path / "vector.npz"
    source.save(path)
    target = MappingPipeline(config, background=False)
    target.load(path)
    restored = target.latest()
    assert restored is not None and restored.is_vector and restored.grid == original.grid
    np.testing.assert_allclose(restored.mean, original.mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(restored.field_mean, original.field_mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        restored.field_variance, original.field_variance, rtol=1e-8, atol=1e-8
    )
    np.testing.assert_array_equal(restored.inducing_m, original.inducing_m)


def test_a_scalar_map_and_a_vector_map_refuse_each_other(mapped, config, tmp_path: Path) -> None:
    source, _ = mapped
    vector_file = tmp_path / "vector.npz"
    source.save(vector_file)
    scalar = MappingPipeline(
        MapperConfig(pose_source="topic", batch_size=120, resolution=0.25, engine=FAST_ENGINE),
        background=False,
    )
    feed(scalar, EVENTS[:250])
    scalar.flush()
    scalar_map = scalar.latest()
    assert scalar_map is not None and not scalar_map.is_vector
    scalar_file = tmp_path / "scalar.npz"
    scalar.save(scalar_file)

    with pytest.raises(MapFileError, match="target='vector', this mapper maps 'norm'"):
        scalar.load(vector_file)
    assert scalar.latest() is scalar_map  # the current map stands

    vector = MappingPipeline(config, background=False)
    vector.load(vector_file)
    before = vector.latest()
    with pytest.raises(MapFileError, match="target='norm', this mapper maps 'vector'"):
        vector.load(scalar_file)
    assert vector.latest() is before


def test_a_sensor_offset_is_estimated_reported_and_left_out_of_the_map() -> None:
    # The magnetometer adds its own offset in its frame; the sensor turns with the path.
    offset = np.array([8.0, -5.0, 0.0])
    config = MapperConfig(pose_source="topic",
        target="vector", batch_size=120, resolution=0.25, bounds=(0.0, 3.0, 0.0, 3.0),
        engine=VECTOR_ENGINE.replace(potential_hard_iron_variance=100.0),
    )  # fmt: skip
    pipeline = MappingPipeline(config, background=False)
    feed(pipeline, stream(PATH, field_map_ut=FIELD, sensor_offset_ut=offset))
    pipeline.flush()
    snapshot = pipeline.latest()
    assert snapshot is not None
    stats = pipeline.diagnostics()
    for k, axis in enumerate("xy"):
        estimate, sd = stats[f"hard_iron_{axis}"], stats[f"hard_iron_{axis}_sd"]
        assert abs(estimate - offset[k]) < max(3.0 * sd, 0.5), (axis, estimate, sd)
    near = near_path(snapshot)
    rmse = np.sqrt(np.mean((snapshot.field_mean - truth(snapshot))[near] ** 2, axis=0))
    assert np.all(rmse < RMSE_SHARE * FIELD.std(axis=0)), (rmse, FIELD.std(axis=0))
