"""Implausible readings and outliers: counted, never mapped; the map's health says what failed."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from gp_mapper.mapping import (
    ConfigError,
    DropCounts,
    FieldReading,
    MapperConfig,
    MappingPipeline,
    MapSnapshot,
    Pairer,
    Pose,
    PoseBuffer,
)
from gp_mapper.mapping.records import HEALTH_ERROR, HEALTH_OK, HEALTH_WARN, UNHEALTHY_FOR_ERROR

from .conftest import FAST_ENGINE
from .synthetic import lawnmower, stream, true_field

MS = 1_000_000  # ns per ms
ONE_TESLA = 1.0  # a glitch: a motor passing the sensor reads ~20 000x |B|
NUM_GLITCHES = 10

# The room of test_pipeline: 4 m x 4 m in five lanes, ~400 readings, windows of 100.
EVENTS = stream(lawnmower(4.0, 4.0, 1.0, 0.06))
CONFIG = MapperConfig(
    pose_source="topic",
    batch_size=100,
    resolution=0.25,
    bounds=(0.0, 4.0, 0.0, 4.0),
    engine=FAST_ENGINE,
)


def with_glitches(indices: np.ndarray) -> list[Pose | FieldReading]:
    """EVENTS with the readings at ``indices`` (among readings) replaced by 1 T ones."""
    events, k = [], 0
    chosen = set(int(i) for i in indices)
    for event in EVENTS:
        if isinstance(event, FieldReading):
            if k in chosen:
                direction = event.field_t / np.linalg.norm(event.field_t)
                event = event._replace(field_t=ONE_TESLA * direction)
            k += 1
        events.append(event)
    return events


def run(config: MapperConfig, events: list[Pose | FieldReading]) -> MappingPipeline:
    pipeline = MappingPipeline(config, background=False)
    for event in events:
        if isinstance(event, Pose):
            pipeline.add_pose(event)
        else:
            pipeline.add_field(event)
    pipeline.flush()
    return pipeline


def spread(n: int) -> np.ndarray:
    """``NUM_GLITCHES`` reading indices spread over the stream (none in the first window)."""
    return np.linspace(120, n - 20, NUM_GLITCHES).astype(int)


NUM_READINGS = sum(isinstance(e, FieldReading) for e in EVENTS)


@pytest.fixture(scope="module")
def clean_map() -> MapSnapshot:
    pipeline = run(CONFIG, EVENTS)
    assert pipeline.drops().total() == 0
    snapshot = pipeline.latest()
    assert snapshot is not None
    return snapshot


def assert_map_within_noise(snapshot: MapSnapshot, clean: MapSnapshot) -> None:
    truth = true_field(clean.grid.cell_points()).reshape(clean.grid.shape)
    rmse = float(np.sqrt(np.mean((snapshot.mean - truth) ** 2)))
    rmse_clean = float(np.sqrt(np.mean((clean.mean - truth) ** 2)))
    assert rmse < rmse_clean + 0.05, (rmse, rmse_clean)
    assert np.max(np.abs(snapshot.mean - clean.mean)) < 1.0  # µT, over the whole grid


def test_ten_readings_of_1_tesla_are_implausible_and_the_map_stays_clean(
    clean_map: MapSnapshot,
) -> None:
    pipeline = run(CONFIG, with_glitches(spread(NUM_READINGS)))
    diagnostics = pipeline.diagnostics()
    assert diagnostics["drop_implausible"] == NUM_GLITCHES
    assert diagnostics["drop_outlier"] == 0 and diagnostics["failed_updates"] == 0
    assert diagnostics["health"] == HEALTH_OK and diagnostics["health_message"] == ""
    assert diagnostics["samples"] == NUM_READINGS - NUM_GLITCHES
    snapshot = pipeline.latest()
    assert snapshot is not None
    assert_map_within_noise(snapshot, clean_map)


def test_with_the_gate_open_the_engine_drops_them_as_outliers(clean_map: MapSnapshot) -> None:
    pipeline = run(CONFIG.replace(field_max=1.0e9), with_glitches(spread(NUM_READINGS)))
    diagnostics = pipeline.diagnostics()
    assert diagnostics["drop_implausible"] == 0
    assert diagnostics["drop_outlier"] == NUM_GLITCHES
    assert diagnostics["health"] == HEALTH_OK
    snapshot = pipeline.latest()
    assert snapshot is not None
    assert_map_within_noise(snapshot, clean_map)


def test_a_fit_driven_to_collapse_is_refused_and_health_goes_warn_then_error() -> None:
    # Gate and screen both off: every 10th reading after the first window is 1 T.
    config = CONFIG.replace(field_max=1.0e9, vips_outlier_z=0.0, fit_iterations=20)
    health: list[tuple[str, str]] = []
    pipelines: list[MappingPipeline] = []

    def record(_snapshot: MapSnapshot) -> None:
        diagnostics = pipelines[0].diagnostics()
        health.append((str(diagnostics["health"]), str(diagnostics["health_message"])))

    pipeline = MappingPipeline(config, background=False, on_snapshot=record)
    pipelines.append(pipeline)
    for event in with_glitches(np.arange(100, NUM_READINGS, 10)):
        if isinstance(event, Pose):
            pipeline.add_pose(event)
        else:
            pipeline.add_field(event)
    pipeline.flush()
    levels = [level for level, _ in health]
    assert levels[0] == HEALTH_OK  # the clean first window
    assert levels[1:UNHEALTHY_FOR_ERROR] == [HEALTH_WARN] * (UNHEALTHY_FOR_ERROR - 1)
    assert levels[UNHEALTHY_FOR_ERROR] == HEALTH_ERROR
    assert "fitted hyperparameters refused" in health[1][1]
    assert "noise variance rose" in health[1][1]
    latest = pipeline.latest()
    assert latest is not None  # every window was mapped, under the first window's θ
    assert latest.report["noise_variance"] < 10 * FAST_ENGINE.noise_variance
    pipeline.reset()
    assert pipeline.diagnostics()["health"] == HEALTH_OK


def make_pairer(field_range_ut: tuple[float, float] | None) -> tuple[Pairer, DropCounts]:
    drops = DropCounts()
    poses = PoseBuffer(100, 200 * MS, 10.0)
    pairer = Pairer(poses, drops, pose_wait_ns=500 * MS, field_range_ut=field_range_ut)
    pairer.add_pose(Pose(0, np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])))
    pairer.add_pose(Pose(100 * MS, np.full(3, 0.1), np.array([0.0, 0.0, 0.0, 1.0])))
    return pairer, drops


@pytest.mark.parametrize(
    ("norm_ut", "kept"),
    [(5.0, False), (9.9, False), (10.1, True), (48.0, True), (199.9, True), (200.1, False),
     (1e6, False)],
)  # fmt: skip
def test_the_gate_keeps_its_range(norm_ut: float, kept: bool) -> None:
    pairer, drops = make_pairer((10.0, 200.0))
    field_t = norm_ut * 1e-6 * np.array([0.6, 0.0, 0.8])
    samples = pairer.add_reading(FieldReading(50 * MS, field_t, "imu"))
    assert len(samples) == int(kept)
    assert drops.implausible == int(not kept) and drops.total() == int(not kept)


def test_without_a_range_any_magnitude_passes() -> None:
    pairer, drops = make_pairer(None)
    assert len(pairer.add_reading(FieldReading(50 * MS, np.array([1.0, 0.0, 0.0]), "imu"))) == 1
    assert drops.total() == 0


def test_the_warning_is_rate_limited_and_the_count_exact(caplog) -> None:
    pairer, drops = make_pairer((10.0, 200.0))
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pairing"):
        for k in range(5):
            pairer.add_reading(FieldReading((10 + k) * MS, np.array([1.0, 0.0, 0.0]), "imu"))
    assert drops.implausible == 5
    warnings = [r for r in caplog.records if "field_min, field_max" in r.getMessage()]
    assert len(warnings) == 1 and "1e+06 µT" in warnings[0].getMessage()


def test_the_range_is_checked() -> None:
    assert (CONFIG.field_min, CONFIG.field_max) == (10.0, 200.0)
    with pytest.raises(ConfigError, match="field_min must be below field_max"):
        MapperConfig(pose_source="topic", field_min=100.0, field_max=50.0)
    with pytest.raises(ConfigError, match="field_min"):
        MapperConfig(pose_source="topic", field_min=-1.0)
