"""TfOdometry: readings posed from odom -> base and the mounting at their stamps, as AMCL reads
TF; the tracked point and the base's pose back from it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from gp_mapper.mapping.localization.tf_odometry import (
    TfOdometry,
    base_pose,
    base_poses,
    feed_posed,
    tracked_odometry,
)
from gp_mapper.mapping.records import Transform

S = 1_000_000_000
LEVER = np.array([0.4, -0.2])
MOUNT_YAW = math.pi / 2


def planar(parent: str, child: str, stamp_ns: int, x: float, y: float, yaw: float) -> Transform:
    q = np.array([0.0, 0.0, math.sin(0.5 * yaw), math.cos(0.5 * yaw)])
    return Transform(stamp_ns, parent, child, np.array([x, y, 0.0]), q)


def odometry(timeout_s: float = 1.0) -> TfOdometry:
    tf = TfOdometry("odom", "base_link", timeout_ns=round(timeout_s * S), max_gap_ns=S,
                    ignored=(("map", "odom"),))  # fmt: skip
    tf.add_transform(planar("base_link", "imu_link", 0, *LEVER, MOUNT_YAW), static=True)
    return tf


def test_a_reading_waits_for_the_odometry_after_its_stamp_then_is_posed() -> None:
    tf = odometry()
    tf.add_transform(planar("odom", "base_link", 10 * S, 1.0, 2.0, 0.0), static=False)
    assert tf.add_reading(10 * S + S // 2, np.array([10.0, 0.0, 40.0]), "imu_link") == []
    assert tf.pending == 1
    (posed,) = tf.add_transform(planar("odom", "base_link", 11 * S, 2.0, 2.0, math.pi / 2),
                                static=False)  # fmt: skip
    # Halfway: base at (1.5, 2), yaw π/4; the tracked point is the lever arm turned by it.
    yaw = math.pi / 4
    expected = tracked_odometry(np.array([1.5, 2.0]), yaw, LEVER)
    np.testing.assert_allclose(posed.odometry, expected, atol=1e-12)
    assert posed.odometry[:2] - [1.5, 2.0] == pytest.approx(
        [math.cos(yaw) * 0.4 + math.sin(yaw) * 0.2, math.sin(yaw) * 0.4 - math.cos(yaw) * 0.2]
    )
    # The sensor's x axis is the base's y: a field along the sensor's x is along the base's y.
    np.testing.assert_allclose(posed.attitude @ posed.field_ut, [0.0, 10.0, 40.0], atol=1e-12)
    np.testing.assert_array_equal(posed.field_ut, [10.0, 0.0, 40.0])  # the sensor's own axes
    np.testing.assert_array_equal(posed.lever_m, LEVER)
    assert tf.pending == 0


def test_readings_leave_in_stamp_order_behind_one_that_waits() -> None:
    tf = odometry()
    tf.add_transform(planar("odom", "base_link", 0, 0.0, 0.0, 0.0), static=False)
    for k in (1, 2, 3):
        assert tf.add_reading(k * S // 10, np.array([1.0, 0.0, 0.0]), "imu_link") == []
    posed = tf.add_transform(planar("odom", "base_link", S, 1.0, 0.0, 0.0), static=False)
    assert [p.stamp_ns for p in posed] == [S // 10, 2 * S // 10, 3 * S // 10]


def test_a_reading_in_the_base_frame_or_no_frame_needs_no_mounting() -> None:
    tf = TfOdometry("odom", "base_link", timeout_ns=S, max_gap_ns=S)
    tf.add_transform(planar("odom", "base_link", 0, 3.0, 4.0, 0.5), static=False)
    for frame in ("", "base_link", "/base_link"):
        (posed,) = tf.add_reading(0, np.array([1.0, 2.0, 3.0]), frame)
        np.testing.assert_allclose(posed.odometry, [3.0, 4.0, 0.5])
        np.testing.assert_allclose(posed.attitude @ posed.field_ut, [1.0, 2.0, 3.0])


def test_without_odometry_a_reading_is_dropped_after_the_timeout_in_stamp_time() -> None:
    tf = odometry(timeout_s=0.5)
    tf.add_reading(0, np.ones(3), "imu_link")
    tf.add_reading(S // 2, np.ones(3), "imu_link")  # exactly the timeout later: still waits
    assert tf.pending == 2 and not tf.drops
    tf.add_reading(S // 2 + 1, np.ones(3), "imu_link")
    assert tf.drops == {"odometry_timeout": 1} and tf.pending == 2


def test_without_a_mounting_the_reading_is_counted_as_such() -> None:
    tf = TfOdometry("odom", "base_link", timeout_ns=S // 2, max_gap_ns=3 * S)
    tf.add_transform(planar("odom", "base_link", 0, 0.0, 0.0, 0.0), static=False)
    tf.add_transform(planar("odom", "base_link", 2 * S, 0.0, 0.0, 0.0), static=False)
    tf.add_reading(0, np.ones(3), "imu_link")
    tf.add_reading(S, np.ones(3), "imu_link")
    assert tf.drops == {"mounting_timeout": 1}


def test_odometry_that_can_never_serve_a_reading_drops_it_at_once() -> None:
    tf = odometry()
    tf.add_transform(planar("odom", "base_link", 5 * S, 0.0, 0.0, 0.0), static=False)
    assert tf.add_reading(4 * S, np.ones(3), "imu_link") == []  # before the oldest odometry
    tf.add_transform(planar("odom", "base_link", 8 * S, 0.0, 0.0, 0.0), static=False)
    assert tf.add_reading(6 * S, np.ones(3), "imu_link") == []  # across a 3 s gap
    assert tf.drops == {"odometry_before_oldest": 1, "odometry_gap": 1} and tf.pending == 0


def test_backwards_readings_ignored_edges_and_refused_transforms() -> None:
    tf = odometry()
    tf.add_transform(planar("odom", "base_link", 10 * S, 0.0, 0.0, 0.0), static=False)
    tf.add_reading(10 * S, np.ones(3), "imu_link")
    assert tf.add_reading(9 * S, np.ones(3), "imu_link") == []
    assert tf.add_transform(planar("map", "odom", 11 * S, 1.0, 0.0, 0.0), static=False) == []
    assert "map" not in tf.buffer.frames  # the localizer's own output is not kept
    bad = planar("odom", "base_link", 12 * S, 0.0, 0.0, 0.0)._replace(
        rotation_xyzw=np.array([0.0, 0.0, 0.0, 2.0])
    )
    tf.add_transform(bad, static=False)
    assert tf.drops == {"reading_stamp_backwards": 1, "bad_quaternion": 1}


def test_base_pose_undoes_the_lever_arm_and_carries_the_covariance() -> None:
    rng = np.random.default_rng(7)
    base = np.array([1.0, -2.0, 2.5])
    point = tracked_odometry(base[:2], base[2], LEVER)
    covariance = np.diag([0.04, 0.09, 0.01])
    mean, cov = base_pose(point, covariance, LEVER)
    np.testing.assert_allclose(mean, base, atol=1e-12)
    # First order: the sampled bases' covariance, for small heading noise.
    samples = rng.multivariate_normal(point, covariance, size=200_000)
    bases = base_poses(samples, LEVER)
    np.testing.assert_allclose(np.cov(bases.T), cov, atol=2e-3)
    np.testing.assert_allclose(base_poses(point[None, :], LEVER)[0], base, atol=1e-12)
    assert cov[0, 0] > covariance[0, 0]  # the heading's spread moves the base


def test_the_attitude_takes_the_base_s_roll_and_pitch_from_tf_and_leaves_its_yaw() -> None:
    """A base rolled 30° and pitched 10° with yaw 60° in odom: a field given in the odom frame
    and read in the sensor's axes comes back, through the attitude, as the odom field turned
    by minus the yaw (the base's levelled axes)."""
    tf = odometry()
    base = Rotation.from_euler("ZYX", [60.0, 10.0, 30.0], degrees=True)
    tf.add_transform(Transform(0, "odom", "base_link", np.zeros(3), base.as_quat()),
                     static=False)  # fmt: skip
    tf.add_transform(Transform(S, "odom", "base_link", np.zeros(3), base.as_quat()),
                     static=False)  # fmt: skip
    field_odom = np.array([12.0, -3.0, 41.0])
    mounting = Rotation.from_euler("z", MOUNT_YAW)
    reading = (base * mounting).inv().apply(field_odom)
    (posed,) = tf.add_reading(S // 2, reading, "imu_link")
    expected = Rotation.from_euler("z", -60.0, degrees=True).apply(field_odom)
    np.testing.assert_allclose(posed.attitude @ posed.field_ut, expected, atol=1e-9)
    np.testing.assert_allclose(posed.attitude @ posed.attitude.T, np.eye(3), atol=1e-12)


class _Recorder:
    """What a feed gives the filter, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def add_odometry(self, stamp_ns: int, pose: np.ndarray) -> None:
        self.calls.append(("odometry", stamp_ns))

    def add_field(self, stamp_ns: int, field: np.ndarray, attitude: np.ndarray) -> None:
        assert attitude.shape == (3, 3)
        self.calls.append(("field", stamp_ns))


def test_a_feed_gives_one_odometry_pose_per_stamp_before_its_readings() -> None:
    tf = odometry()
    for k in range(3):
        tf.add_transform(planar("odom", "base_link", k * S // 10, 0.1 * k, 0.0, 0.0), static=False)
    posed = [*tf.add_reading(S // 20, np.array([20.0, 0.0, -40.0]), "imu_link"),
             *tf.add_reading(S // 20, np.array([21.0, 0.0, -40.0]), "imu_link"),
             *tf.add_reading(S // 10, np.array([22.0, 0.0, -40.0]), "imu_link")]  # fmt: skip
    assert len(posed) == 3
    recorder, last = _Recorder(), None
    for reading in posed:
        if feed_posed(recorder, reading, last):  # type: ignore[arg-type]
            last = reading.stamp_ns
    half, tenth = S // 20, S // 10
    assert recorder.calls == [("odometry", half), ("field", half), ("field", half),
                              ("odometry", tenth), ("field", tenth)]  # fmt: skip
