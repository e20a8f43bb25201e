from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.mapping import (
    FieldReading,
    MapFileError,
    MapperConfig,
    MappingPipeline,
    MapSnapshot,
    Pose,
    grid_for,
)

from .conftest import FAST_ENGINE
from .synthetic import feed, lawnmower, stream, true_field, yaw_quaternion

WAIT_S = 60.0  # generous: only reached if the worker is stuck

# A 4 m x 4 m room mown in five lanes at 3 m/s, poses and readings at 50 Hz: ~400 samples.
PATH = lawnmower(4.0, 4.0, 1.0, 0.06)
EVENTS = stream(PATH)
NUM_READINGS = sum(isinstance(e, FieldReading) for e in EVENTS)


def grid_rmse(snapshot: MapSnapshot, scale: float = 1.0) -> float:
    truth = scale * true_field(snapshot.grid.cell_points()).reshape(snapshot.grid.shape)
    return float(np.sqrt(np.mean((snapshot.mean - truth) ** 2)))


@pytest.fixture(scope="module")
def config() -> MapperConfig:
    return MapperConfig(
        pose_source="topic",
        batch_size=100,
        resolution=0.25,
        bounds=(0.0, 4.0, 0.0, 4.0),
        engine=FAST_ENGINE,
    )


@pytest.fixture(scope="module")
def mapped(config: MapperConfig) -> tuple[MappingPipeline, list[MapSnapshot]]:
    """The whole room mapped synchronously; every snapshot kept."""
    snapshots: list[MapSnapshot] = []
    pipeline = MappingPipeline(config, background=False, on_snapshot=snapshots.append)
    feed(pipeline, EVENTS)
    pipeline.flush()
    return pipeline, snapshots


def small_pipeline(**overrides) -> MappingPipeline:
    config = MapperConfig(
        pose_source="topic", batch_size=60, resolution=0.5, engine=FAST_ENGINE
    ).replace(**overrides)
    return MappingPipeline(config, background=False)


def test_map_error_falls_as_windows_arrive(mapped) -> None:
    pipeline, snapshots = mapped
    assert len(snapshots) == 5  # 4 full windows of 100 and the flushed remainder
    errors = [grid_rmse(s) for s in snapshots]
    assert errors[0] > 2.0  # one lane seen: most of the room is still the prior mean
    assert errors[-1] < 0.5  # 10 µT swing mapped to within a few percent
    assert errors[-1] < errors[1] < errors[0]
    assert pipeline.drops().total() == 0


def test_snapshots_are_consistent(mapped, config: MapperConfig) -> None:
    pipeline, snapshots = mapped
    assert [s.seq for s in snapshots] == [1, 2, 3, 4, 5]
    assert [s.num_samples for s in snapshots] == [100, 200, 300, 400, NUM_READINGS]
    stamps = [s.stamp_ns for s in snapshots]
    assert stamps == sorted(stamps) and stamps[-1] == EVENTS[-2].stamp_ns
    last = snapshots[-1]
    assert pipeline.latest() is last
    assert last.grid == grid_for(config.bounds, config.resolution, config.max_cells)
    assert last.inducing_m.ndim == 2 and last.inducing_m.shape[1] == 2
    assert 0 < last.num_inducing < NUM_READINGS
    assert last.trajectory_m.shape[1] == 2 and len(last.trajectory_m) > 50
    assert np.all(last.trajectory_m >= -1e-9) and np.all(last.trajectory_m <= 4.0 + 1e-9)
    assert last.report["accepted"] is True
    assert last.report["window_end_ns"] == last.stamp_ns
    # Where the robot drove the map is known; the variance has dropped far below the prior.
    # (Cells are half-open: the lane on the bounds' top edge y = 4 m belongs to row 15.)
    i, j, valid = last.grid.world_to_cell(np.clip(PATH, 0.0, 4.0 - 1e-9))
    assert valid.all()
    assert np.all(last.variance[j, i] < 0.1 * last.prior_variance[j, i])
    assert not last.unknown(config.unknown_variance_ratio)[j, i].any()


def test_diagnostics(mapped) -> None:
    pipeline, snapshots = mapped
    diagnostics = pipeline.diagnostics()
    assert diagnostics["inducing_points"] == snapshots[-1].num_inducing
    assert diagnostics["updates"] == 5 and diagnostics["failed_updates"] == 0
    assert diagnostics["samples"] == NUM_READINGS
    assert diagnostics["pending_windows"] == 0 and diagnostics["device"] == "cpu"
    assert 0.0 < diagnostics["last_batch_latency_s"] < WAIT_S
    assert diagnostics["last_batch_latency_s"] >= diagnostics["last_update_s"]
    assert diagnostics["drops_total"] == 0 and diagnostics["drop_nan"] == 0
    assert (diagnostics["grid_width"], diagnostics["grid_height"]) == (16, 16)
    for value in diagnostics.values():
        assert isinstance(value, str | int | float)


def test_background_and_synchronous_modes_give_the_same_map(mapped, config) -> None:
    _, expected = mapped
    snapshots: list[MapSnapshot] = []
    with MappingPipeline(config, background=True, on_snapshot=snapshots.append) as pipeline:
        for event in EVENTS:
            if isinstance(event, Pose):
                pipeline.add_pose(event)
            else:
                pipeline.add_field(event)
            # One window at a time, as a robot slower than the engine would deliver them.
            assert pipeline.wait_idle(WAIT_S)
        pipeline.flush()
        assert pipeline.wait_idle(WAIT_S)
        assert pipeline.diagnostics()["pending_windows"] == 0
    # Each window is shown first under the previous θ (provisional), then fitted.
    provisional, fitted = snapshots[0::2], snapshots[1::2]
    assert all(s.report.get("provisional") == 1 for s in provisional)
    assert not any("provisional" in s.report for s in fitted)
    for early, late in zip(provisional, fitted, strict=True):
        assert early.seq + 1 == late.seq and early.num_samples == late.num_samples
        np.testing.assert_array_equal(early.inducing_m, late.inducing_m)
    assert len(fitted) == len(expected)
    for ours, theirs in zip(fitted, expected, strict=True):
        assert ours.num_samples == theirs.num_samples and ours.num_inducing == theirs.num_inducing
        np.testing.assert_allclose(ours.mean, theirs.mean, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(ours.variance, theirs.variance, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(ours.inducing_m, theirs.inducing_m, rtol=1e-12)


def test_a_map_drawn_once_at_the_end_is_the_map_drawn_after_every_window(mapped, config) -> None:
    _, expected = mapped
    config = config.replace(full_resolution_cells=4096)
    reports: list[dict] = []
    drawn: list[MapSnapshot] = []
    with MappingPipeline(
        config, background=False, draw_each_window=False, on_commit=reports.append,
        on_snapshot=drawn.append,
    ) as pipeline:  # fmt: skip
        feed(pipeline, EVENTS)
        pipeline.flush()
        d = pipeline.diagnostics()
        assert drawn == [] and d["seq"] == 0  # nothing drawn while mapping
        assert (d["updates"], d["samples"]) == (5, NUM_READINGS)
        assert d["inducing_points"] == expected[-1].num_inducing
        assert [r["window_end_ns"] for r in reports] == [
            s.report["window_end_ns"] for s in expected
        ]
        last = pipeline.latest()
        assert last is not None and pipeline.latest() is last and len(drawn) == 1
    with MappingPipeline(config, background=False) as every:
        feed(every, EVENTS)
        every.flush()
        reference = every.latest()
    assert reference is not None and last.num_samples == reference.num_samples
    untimed = [{k: v for k, v in r.items() if not k.startswith("seconds")}
               for r in (last.report, reference.report)]  # fmt: skip
    assert untimed[0] == untimed[1] and last.stamp_ns == reference.stamp_ns
    np.testing.assert_array_equal(last.trajectory_m, reference.trajectory_m)
    for name in ("mean", "variance", "prior_variance", "support_m"):
        np.testing.assert_allclose(getattr(last, name), getattr(reference, name), rtol=1e-12)
    assert last.fine is not None and reference.fine is not None
    np.testing.assert_allclose(last.fine.mean, reference.fine.mean, rtol=1e-12)
    with pytest.raises(ValueError, match="offline"):
        MappingPipeline(config, background=True, draw_each_window=False)


def test_save_and_load_round_trip(mapped, config, tmp_path: Path) -> None:
    source, snapshots = mapped
    path = tmp_path / "room.npz"
    source.save(path)

    loaded: list[MapSnapshot] = []
    target = MappingPipeline(config, background=False, on_snapshot=loaded.append)
    target.load(path)
    assert len(loaded) == 1 and target.latest() is loaded[0]
    restored, original = loaded[0], snapshots[-1]
    assert restored.grid == original.grid and restored.num_samples == original.num_samples
    assert restored.stamp_ns == original.stamp_ns
    np.testing.assert_allclose(restored.mean, original.mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(restored.variance, original.variance, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(restored.inducing_m, original.inducing_m)
    np.testing.assert_array_equal(restored.trajectory_m, original.trajectory_m)
    assert target.diagnostics()["samples"] == NUM_READINGS

    # Mapping continues on the loaded map.
    feed(target, stream(PATH[:130], t0_ns=EVENTS[-1].stamp_ns + 10**9))
    target.flush()
    assert target.latest().num_samples == NUM_READINGS + 129
    assert target.latest().seq == restored.seq + 2


def test_a_bad_file_leaves_the_current_map(mapped, config, tmp_path: Path) -> None:
    source, _ = mapped
    good = tmp_path / "good.npz"
    source.save(good)
    pipeline = MappingPipeline(config, background=False)
    pipeline.load(good)
    before = pipeline.latest()

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:2000])
    with np.load(good, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    wrong_version = tmp_path / "version.npz"
    np.savez(wrong_version, **{**arrays, "format_version": np.array(99)})
    bad_state = tmp_path / "state.npz"
    factor = next(k for k in arrays if k.endswith("carried.L"))  # a tile's, at the defaults
    np.savez(bad_state, **{**arrays, factor: np.eye(3)})
    three_d = tmp_path / "three_d.npz"
    MappingPipeline(config.replace(input_dims=3), background=False).save(three_d)

    cases = [
        (truncated, "corrupt or truncated"),
        (wrong_version, "map format 99"),
        (bad_state, "engine refused"),
        (three_d, "input_dims=3"),
        (tmp_path / "missing.npz", "no such map file"),
    ]
    for path, fault in cases:
        with pytest.raises(MapFileError, match=fault) as raised:
            pipeline.load(path)
        assert str(path) in str(raised.value)
        assert pipeline.latest() is before
    assert pipeline.diagnostics()["samples"] == NUM_READINGS


def test_reset_empties_the_map() -> None:
    pipeline = small_pipeline()
    feed(pipeline, EVENTS[:300])
    first = pipeline.latest()
    assert first is not None and first.num_samples > 0
    pipeline.reset()
    assert pipeline.latest() is None
    diagnostics = pipeline.diagnostics()
    assert diagnostics["samples"] == 0 and diagnostics["inducing_points"] == 0
    assert diagnostics["open_window_samples"] == 0
    feed(pipeline, EVENTS[300:500])
    after = pipeline.latest()
    assert after is not None and after.seq > first.seq
    assert after.num_samples == 60 * (after.seq - first.seq)  # only windows after the reset


def window_sizes(engine: EngineSpec = FAST_ENGINE, **overrides) -> list[int]:
    """Samples per committed window when EVENTS are fed through an inline pipeline."""
    snapshots: list[MapSnapshot] = []
    config = MapperConfig(pose_source="topic", resolution=0.5, engine=engine).replace(**overrides)
    pipeline = MappingPipeline(config, background=False, on_snapshot=snapshots.append)
    feed(pipeline, EVENTS[:400])
    counts = [s.num_samples for s in snapshots]
    return list(np.diff([0, *counts]))


def test_windows_wait_for_first_batch_min_until_theta_is_fitted() -> None:
    # 50 Hz, 0.2-s windows of 10 samples; the first waits for 40, then θ is fitted.
    sizes = window_sizes(batch_size=1000, batch_period=0.2, first_batch_min=40)
    assert sizes[0] == 40 and set(sizes[1:-1]) == {10}, sizes
    # An engine that never fits θ has no guess to correct: windows close on time.
    fixed = FAST_ENGINE.replace(fit_iterations=0)
    sizes = window_sizes(batch_size=1000, batch_period=0.2, first_batch_min=40, engine=fixed)
    assert set(sizes[:-1]) == {10}, sizes


def test_a_failed_update_keeps_the_previous_map(caplog: pytest.LogCaptureFixture) -> None:
    config = MapperConfig(pose_source="topic", batch_size=60, resolution=0.5, engine=FAST_ENGINE)
    engine = build_model(config.engine, input_dim=2)
    real_update = engine.update
    calls = {"n": 0}

    def update_failing_second_time(X, y, on_selected=None, *, fit=True):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_update(X, y, on_selected, fit=fit)

    engine.update = update_failing_second_time  # type: ignore[method-assign]
    with MappingPipeline(config, model=engine, background=True) as pipeline:
        with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
            feed(pipeline, EVENTS[:122])  # one window of 60
            assert pipeline.wait_idle(WAIT_S)
            first = pipeline.latest()
            feed(pipeline, EVENTS[122:244])  # the second window: the engine fails
            assert pipeline.wait_idle(WAIT_S)
        assert pipeline.latest() is first
        assert pipeline.drops().failed_update == 60
        assert pipeline.diagnostics()["failed_updates"] == 1
        assert "illegal memory access" in pipeline.diagnostics()["last_reason"]
        assert any("previous map stands" in r.getMessage() for r in caplog.records)
        feed(pipeline, EVENTS[244:366])  # the thread lives on: the third window is mapped
        assert pipeline.wait_idle(WAIT_S)
        assert pipeline.latest().num_samples == 120
        assert pipeline.latest().seq == first.seq + 2  # provisional, then fitted


def test_bad_input_is_counted_and_never_crashes() -> None:
    rng = np.random.default_rng(5)
    pipeline = small_pipeline(expected_frame="imu_link", batch_size=100)
    events = list(EVENTS[:240])
    t_end = events[-1].stamp_ns
    last = events[-2]  # the newest pose
    assert isinstance(last, Pose)
    # A stationary robot: 3000 readings at one position, poses at 50 Hz.
    for k in range(1, 3001):
        t = t_end + k * 2_000_000
        if k % 10 == 0:
            events.append(Pose(t, last.position_m.copy(), last.orientation_xyzw.copy()))
        events.append(FieldReading(t + 1_000_000, np.array([30e-6, 20e-6, -30e-6]), "imu_link"))
    t = events[-1].stamp_ns
    events += [
        FieldReading(t + 1, np.array([np.nan, 0.0, 0.0]), "imu_link"),
        FieldReading(t + 2, np.array([np.inf, 0.0, 0.0]), "imu_link"),
        FieldReading(t + 3, np.zeros(3), "imu_link"),
        FieldReading(t + 4, np.array([1e-5, 0.0, 0.0]), "base_link"),
        FieldReading(t - 5, np.array([1e-5, 0.0, 0.0]), "imu_link"),  # out of order
        Pose(t - 10**10, np.zeros(3), yaw_quaternion(0.0)),  # long past
        Pose(t + 10, np.array([np.nan, 0.0, 0.0]), yaw_quaternion(0.0)),
        # A one-second pose gap, then a 40 m jump.
        Pose(t + 10**9, last.position_m + 0.1, yaw_quaternion(0.0)),
        FieldReading(t + 5 * 10**8, np.array([1e-5, 0.0, 0.0]), "imu_link"),
        Pose(t + 10**9 + 20_000_000, last.position_m + 40.0, yaw_quaternion(0.0)),
        FieldReading(t + 10**9 + 10_000_000, np.array([1e-5, 0.0, 0.0]), "imu_link"),
    ]
    for _ in range(200):  # random garbage: never crashes
        events.append(FieldReading(int(rng.integers(0, 2**62)), rng.normal(size=3), "imu_link"))
    feed(pipeline, events)
    pipeline.flush()
    drops = pipeline.drops()
    assert drops.duplicate >= 2999
    assert drops.nan == 2 and drops.zero_field == 1 and drops.frame == 1
    assert drops.out_of_order >= 1 and drops.late_pose == 1 and drops.bad_pose == 1
    assert drops.pose_gap >= 1 and drops.pose_jump == 1
    latest = pipeline.latest()
    # The samples before the stop; the stop adds none (the robot stands where the last was).
    assert latest is not None and latest.num_samples == 120


def test_background_overflow_is_counted(config) -> None:
    small = config.replace(batch_size=20)
    with MappingPipeline(small, background=True) as pipeline:
        feed(pipeline, EVENTS)  # far faster than the engine: windows merge or are dropped
        pipeline.flush()
        assert pipeline.wait_idle(WAIT_S)
        drops = pipeline.drops()
        mapped = pipeline.latest().num_samples
    assert pipeline.diagnostics()["pending_windows"] == 0
    # Every sample is in the map or counted.
    assert mapped + drops.window_overflow + drops.failed_update == NUM_READINGS
    assert mapped > 0


def test_per_axis_target_is_the_map_frame_component() -> None:
    # The stream's map-frame field points 30 degrees left of +x while the sensor turns with the
    # path, so the sensor-frame readings change direction from lane to lane.
    config = MapperConfig(
        pose_source="topic",
        target="y",
        batch_size=500,
        resolution=0.5,
        bounds=(0.0, 4.0, 0.0, 4.0),
        engine=FAST_ENGINE,
    )
    pipeline = MappingPipeline(config, background=False)
    feed(pipeline, EVENTS)
    pipeline.flush()
    assert grid_rmse(pipeline.latest(), scale=0.5) < 1.0  # sin(30 degrees) |B|


def test_three_dimensional_inputs() -> None:
    pipeline = small_pipeline(input_dims=3, grid_z=0.0)
    feed(pipeline, EVENTS[:130])
    snapshot = pipeline.latest()
    assert snapshot.inducing_m.shape[1] == 3
    assert np.isfinite(snapshot.mean).all()


def test_grid_grows_with_the_explored_area() -> None:
    pipeline = small_pipeline(margin=0.5)
    snapshots: list[MapSnapshot] = []
    pipeline._on_snapshot = snapshots.append  # observe every snapshot
    feed(pipeline, EVENTS[:500])  # the first lane, the turn and part of the second lane
    pipeline.flush()
    first, last = snapshots[0].grid, snapshots[-1].grid
    assert last.num_cells > first.num_cells
    visited = PATH[:250]
    xmin, xmax, ymin, ymax = last.extent
    assert xmin <= visited[:, 0].min() - 0.5 and xmax >= visited[:, 0].max() + 0.5
    assert ymin <= visited[:, 1].min() - 0.5 and ymax >= visited[:, 1].max() + 0.5
    # Snapped edges: the first grid's cells are cells of the last one.
    shift = (np.array(first.origin_m) - np.array(last.origin_m)) / last.resolution_m
    np.testing.assert_allclose(shift, np.round(shift), atol=1e-9)


def test_coarsened_grid_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    pipeline = small_pipeline(resolution=0.01, max_cells=400, bounds=[0.0, 4.0, 0.0, 4.0])
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pipeline"):
        feed(pipeline, EVENTS[:130])
    grid = pipeline.latest().grid
    assert grid.num_cells <= 400 and grid.resolution_m > 0.01
    assert any("max_cells = 400" in r.getMessage() for r in caplog.records)


def test_a_failing_consumer_does_not_stop_mapping(caplog: pytest.LogCaptureFixture) -> None:
    def consumer(snapshot: MapSnapshot) -> None:
        raise ValueError("publisher gone")

    config = MapperConfig(pose_source="topic", batch_size=60, resolution=0.5, engine=FAST_ENGINE)
    pipeline = MappingPipeline(config, background=False, on_snapshot=consumer)
    with caplog.at_level(logging.ERROR, logger="gp_mapper.mapping.pipeline"):
        feed(pipeline, EVENTS[:250])
    assert pipeline.latest().seq == 2
    assert sum("on_snapshot" in r.getMessage() for r in caplog.records) == 2


def test_input_after_close_is_ignored() -> None:
    pipeline = small_pipeline()
    pipeline.close()
    feed(pipeline, EVENTS[:130])
    pipeline.flush()
    assert pipeline.latest() is None and pipeline.diagnostics()["poses_buffered"] == 0
    pipeline.close()  # idempotent


def test_a_rejected_window_withdraws_its_provisional_map() -> None:
    """Shown under the old θ, then rejected: the committed map comes back, as it was."""
    config = MapperConfig(pose_source="topic", batch_size=60, resolution=0.5, engine=FAST_ENGINE)
    engine = build_model(config.engine, input_dim=2)
    real_update = engine.update
    calls = {"n": 0}
    shown: list[MapSnapshot] = []

    def update_failing_after_selection(X, y, on_selected=None, *, fit=True):
        calls["n"] += 1
        if calls["n"] == 2:
            on_selected(engine.posterior)  # the provisional map goes out...
            raise RuntimeError("fit failed")  # ...and then the update fails
        return real_update(X, y, on_selected, fit=fit)

    engine.update = update_failing_after_selection  # type: ignore[method-assign]
    with MappingPipeline(
        config, model=engine, background=True, on_snapshot=shown.append
    ) as pipeline:
        feed(pipeline, EVENTS[:122])
        assert pipeline.wait_idle(WAIT_S)
        first = pipeline.latest()
        feed(pipeline, EVENTS[122:244])
        assert pipeline.wait_idle(WAIT_S)
        latest = pipeline.latest()
    assert shown[-2].report.get("provisional") == 1 and shown[-2].num_samples == 120
    assert latest is shown[-1] and latest.seq == shown[-2].seq + 1
    assert latest.num_samples == first.num_samples == 60
    assert latest.report == first.report
    np.testing.assert_array_equal(latest.mean, first.mean)


def test_provisional_maps_are_off_when_asked_and_in_synchronous_mode(config) -> None:
    for background, provisional in ((True, False), (False, True)):
        snapshots: list[MapSnapshot] = []
        with MappingPipeline(
            config.replace(provisional_map=provisional),
            background=background,
            on_snapshot=snapshots.append,
        ) as pipeline:
            feed(pipeline, EVENTS[:204])  # one window of 100; a busy worker would merge two
            assert pipeline.wait_idle(WAIT_S)
            feed(pipeline, EVENTS[204:210])
            pipeline.flush()
            assert pipeline.wait_idle(WAIT_S)
        assert len(snapshots) == 2
        assert not any("provisional" in s.report for s in snapshots)
