"""The synthetic world and runs: smooth, plausible, deterministic, heading-consistent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gp_mapper.io import (
    bag_info,
    make_synthetic_world,
    read_bag,
    rotate_z,
    simulate_run,
    write_synthetic_bag,
    yaw_from_quaternion,
)
from gp_mapper.io.synthetic import ROOM_BOUNDS_M, SyntheticWorld
from gp_mapper.mapping.records import FieldReading, Pose

SEEDS = [0, 1, 2, 3, 4]


def _room_grid(step: float) -> np.ndarray:
    xmin, xmax, ymin, ymax = ROOM_BOUNDS_M
    x, y = np.meshgrid(np.arange(xmin, xmax + 1e-9, step), np.arange(ymin, ymax + 1e-9, step))
    return np.column_stack([x.ravel(), y.ravel()])


@pytest.fixture(scope="module")
def world() -> SyntheticWorld:
    return make_synthetic_world(seed=0)


def test_same_seed_same_world_other_seed_other_world() -> None:
    points = _room_grid(0.5)
    a, b = make_synthetic_world(3), make_synthetic_world(3)
    np.testing.assert_array_equal(a.field_at(points), b.field_at(points))
    assert not np.allclose(a.field_at(points), make_synthetic_world(4).field_at(points))


@pytest.mark.parametrize("seed", SEEDS)
def test_field_is_earth_like_with_indoor_anomalies(seed: int) -> None:
    world = make_synthetic_world(seed)
    earth = np.linalg.norm(world.earth_field_ut)
    assert 45.0 < earth < 55.0
    anomaly = np.linalg.norm(world.field_at(_room_grid(0.05)) - world.earth_field_ut, axis=1)
    assert 5.0 < anomaly.max() < 60.0  # several 5-30 µT anomalies, some overlapping
    assert np.median(anomaly) < 10.0  # most of the room is near the background


@pytest.mark.parametrize("seed", SEEDS)
def test_field_is_smooth(seed: int) -> None:
    world = make_synthetic_world(seed)
    points = _room_grid(0.1)
    step = 1e-3  # m
    for direction in ([step, 0.0], [0.0, step]):
        change = world.field_at(points + direction) - world.field_at(points)
        gradient = np.abs(change).max() / step  # µT/m
        assert gradient < 100.0  # anomalies of <= 30 µT over >= 0.4 m
    # and the second difference is small: no kinks on the map's 0.1 m scale
    x = np.arange(0.0, 8.0, 0.01)
    line = world.norm_at(np.column_stack([x, np.full_like(x, 3.0)]))
    assert np.abs(np.diff(line, 2)).max() < 0.05  # µT per (1 cm)^2


def test_points_on_the_plane_default_to_z_zero(world: SyntheticWorld) -> None:
    xy = _room_grid(1.0)
    np.testing.assert_array_equal(
        world.field_at(xy), world.field_at(np.column_stack([xy, np.zeros(len(xy))]))
    )
    np.testing.assert_allclose(world.norm_at(xy), np.linalg.norm(world.field_at(xy), axis=1))
    with pytest.raises(ValueError, match=r"\[N, 2\] or \[N, 3\]"):
        world.field_at(np.zeros((4, 4)))


def test_run_covers_the_room_at_constant_speed(world: SyntheticWorld) -> None:
    run = simulate_run(world, duration_s=180.0, rate_hz=50.0, seed=0)
    assert run.time_s.shape == (9001,)
    np.testing.assert_allclose(np.diff(run.time_s), 0.02)
    lo, hi = run.position_m.min(axis=0), run.position_m.max(axis=0)
    np.testing.assert_allclose(lo, [0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(hi, [7.5, 5.5], atol=1e-9)
    speed = np.linalg.norm(np.diff(run.position_m, axis=0), axis=1) / 0.02
    assert np.median(speed) == pytest.approx(0.5, rel=1e-6)
    # every 1 m x 1 m block of the room is visited
    cells = {tuple(c) for c in np.floor(run.position_m).astype(int)}
    assert cells == {(i, j) for i in range(8) for j in range(6)}


def test_sensor_frame_readings_rotate_back_to_the_map_field(world: SyntheticWorld) -> None:
    run = simulate_run(world, duration_s=60.0, seed=5)
    truth = world.field_at(run.position_m)
    residual = rotate_z(run.mag_ut, run.heading_rad) - truth
    assert residual.mean(axis=0) == pytest.approx([0.0, 0.0, 0.0], abs=0.03)
    np.testing.assert_allclose(residual.std(axis=0), 0.3, rtol=0.05)
    # the norm does not depend on the heading
    norm_error = np.linalg.norm(run.mag_ut, axis=1) - np.linalg.norm(truth, axis=1)
    assert np.abs(norm_error).max() < 2.0  # a few sigma of 0.3 µT noise

    clean = simulate_run(world, duration_s=60.0, seed=5, noise_ut=0.0)
    np.testing.assert_allclose(rotate_z(clean.mag_ut, clean.heading_rad), truth, atol=1e-12)
    np.testing.assert_allclose(
        np.linalg.norm(clean.mag_ut, axis=1), np.linalg.norm(truth, axis=1), rtol=1e-12
    )
    # the heading really turns, so the sensor frame really differs from the map frame
    east = np.abs(np.angle(np.exp(1j * clean.heading_rad))) < 0.1
    west = np.abs(np.angle(np.exp(1j * (clean.heading_rad - np.pi)))) < 0.1
    assert east.mean() > 0.3 and west.mean() > 0.3  # lawnmower rows both ways
    assert np.abs(clean.mag_ut[:, :2] - truth[:, :2]).max() > 5.0


def test_runs_are_deterministic_per_seed(world: SyntheticWorld) -> None:
    a = simulate_run(world, 10.0, seed=9)
    b = simulate_run(world, 10.0, seed=9)
    c = simulate_run(world, 10.0, seed=10)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.position_m, c.position_m)  # same path
    assert not np.allclose(a.mag_ut, c.mag_ut)  # other noise


def test_synthetic_bag_has_the_conversion_layout(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    summary = write_synthetic_bag(out, seed=2, duration_s=10.0, pose_rate_hz=25.0)
    assert (summary.num_field, summary.num_pose) == (501, 251)
    info = bag_info(out)
    assert info.topics["/imu/mag"].msgtype == "sensor_msgs/msg/MagneticField"
    assert info.topics["/pose"].msgtype == "geometry_msgs/msg/PoseStamped"

    world = make_synthetic_world(2)
    run = simulate_run(world, 10.0, seed=2)
    records = list(read_bag(out))
    fields = [r for r in records if isinstance(r, FieldReading)]
    poses = [r for r in records if isinstance(r, Pose)]
    np.testing.assert_allclose([f.field_t for f in fields], run.mag_ut * 1e-6, rtol=1e-12)
    np.testing.assert_allclose([p.position_m[:2] for p in poses], run.position_m[::2])
    yaw = yaw_from_quaternion(np.array([p.orientation_xyzw for p in poses]))
    np.testing.assert_allclose(np.angle(np.exp(1j * (yaw - run.heading_rad[::2]))), 0.0, atol=1e-12)
