"""The TF tree in time: composition, interpolation, lookup statuses and refused transforms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from gp_mapper.mapping.pose_buffer import LookupStatus
from gp_mapper.mapping.records import Transform
from gp_mapper.mapping.transforms import TransformAdd, TransformBuffer

S = 1_000_000_000
T0 = 1_700_000_000 * S


def tf(t_s: float, parent: str, child: str, xyz, yaw_deg: float = 0.0, roll_deg: float = 0.0):
    q = Rotation.from_euler("xyz", [roll_deg, 0.0, yaw_deg], degrees=True).as_quat()
    return Transform(T0 + round(t_s * S), parent, child, np.array(xyz, dtype=float), q)


def matrix(transform: Transform) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = Rotation.from_quat(transform.rotation_xyzw).as_matrix()
    m[:3, 3] = transform.translation_m
    return m


def robot_tree() -> TransformBuffer:
    """map -> odom (1 Hz) -> base_link (10 Hz) -> imu_link (static: 0.3 m ahead, turned 90°,
    tilted 10°)."""
    buffer = TransformBuffer(max_gap_ns=2 * S)
    mount = tf(0.0, "base_link", "imu_link", [0.3, 0.0, 0.1], yaw_deg=90.0, roll_deg=10.0)
    assert buffer.add(mount, static=True) is TransformAdd.ADDED
    for k in range(3):
        assert buffer.add(tf(k, "map", "odom", [1.0 + 0.1 * k, -2.0, 0.0], 5.0 * k), static=False)
    for k in range(21):
        t = 0.1 * k
        odom = tf(t, "odom", "base_link", [0.5 * t, 0.2 * t * t, 0.0], yaw_deg=20.0 * t)
        assert buffer.add(odom, static=False) is TransformAdd.ADDED
    return buffer


def test_a_chain_is_composed_with_the_lever_arm_and_the_mounting() -> None:
    buffer = robot_tree()
    found = buffer.lookup("map", "imu_link", T0 + S)  # a stamp every edge holds
    assert found.status is LookupStatus.OK
    expected = (
        matrix(tf(1.0, "map", "odom", [1.1, -2.0, 0.0], 5.0))
        @ matrix(tf(1.0, "odom", "base_link", [0.5, 0.2, 0.0], 20.0))
        @ matrix(tf(0.0, "base_link", "imu_link", [0.3, 0.0, 0.1], 90.0, 10.0))
    )
    np.testing.assert_allclose(found.pose.position_m, expected[:3, 3], atol=1e-12)
    rotation = Rotation.from_quat(found.pose.orientation_xyzw).as_matrix()
    np.testing.assert_allclose(rotation, expected[:3, :3], atol=1e-12)


def test_edges_are_interpolated_at_the_stamp_linearly_and_by_slerp() -> None:
    buffer = robot_tree()
    stamp_s = 1.234
    found = buffer.lookup("odom", "base_link", T0 + round(stamp_s * S))
    assert found.status is LookupStatus.OK
    t0, t1 = 1.2, 1.3
    alpha = (stamp_s - t0) / (t1 - t0)
    p0, p1 = np.array([0.5 * t0, 0.2 * t0 * t0, 0]), np.array([0.5 * t1, 0.2 * t1 * t1, 0])
    np.testing.assert_allclose(found.pose.position_m, p0 + alpha * (p1 - p0), atol=1e-12)
    slerp = Slerp([0.0, 1.0], Rotation.from_euler("z", [[20.0 * t0], [20.0 * t1]], degrees=True))
    np.testing.assert_allclose(
        Rotation.from_quat(found.pose.orientation_xyzw).as_matrix(),
        slerp(alpha).as_matrix(),
        atol=1e-12,
    )


def test_a_lookup_the_other_way_is_the_inverse_and_siblings_meet_at_their_ancestor() -> None:
    buffer = robot_tree()
    buffer.add(tf(0.0, "base_link", "laser", [-0.1, 0.05, 0.3], yaw_deg=180.0), static=True)
    stamp = T0 + round(1.55 * S)
    forward = buffer.lookup("map", "imu_link", stamp).pose
    backward = buffer.lookup("imu_link", "map", stamp).pose
    m_forward = matrix(Transform(stamp, "", "", forward.position_m, forward.orientation_xyzw))
    m_backward = matrix(Transform(stamp, "", "", backward.position_m, backward.orientation_xyzw))
    np.testing.assert_allclose(m_forward @ m_backward, np.eye(4), atol=1e-12)
    sibling = buffer.lookup("laser", "imu_link", stamp)
    assert sibling.status is LookupStatus.OK
    expected = np.linalg.inv(matrix(tf(0, "base_link", "laser", [-0.1, 0.05, 0.3], 180.0))) @ (
        matrix(tf(0, "base_link", "imu_link", [0.3, 0.0, 0.1], 90.0, 10.0))
    )
    np.testing.assert_allclose(sibling.pose.position_m, expected[:3, 3], atol=1e-12)
    identity = buffer.lookup("odom", "odom", stamp)
    assert identity.status is LookupStatus.OK
    np.testing.assert_array_equal(identity.pose.position_m, np.zeros(3))


def test_lookup_statuses_say_whether_waiting_can_help() -> None:
    buffer = robot_tree()
    # base_link is known to 2.0 s, map -> odom to 2.0 s: 2.05 s waits for both.
    assert buffer.lookup("map", "imu_link", T0 + round(2.05 * S)).status is LookupStatus.WAIT
    # Before every transform of an edge: never.
    assert buffer.lookup("map", "imu_link", T0 - S).status is LookupStatus.BEFORE_OLDEST
    # A frame nothing names, or one on a tree of its own: not connected (yet).
    assert buffer.lookup("map", "mag_link", T0 + S).status is LookupStatus.UNCONNECTED
    buffer.add(tf(0.0, "world", "elsewhere", [0, 0, 0]), static=True)
    assert buffer.lookup("map", "elsewhere", T0 + S).status is LookupStatus.UNCONNECTED
    # A gap wider than max_gap on one edge is not interpolated across.
    buffer.add(tf(5.0, "odom", "base_link", [0, 0, 0]), static=False)
    buffer.add(tf(5.0, "map", "odom", [0, 0, 0]), static=False)
    assert buffer.lookup("map", "imu_link", T0 + 3 * S).status is LookupStatus.GAP
    # A permanent failure of one edge outranks another edge's wait.
    assert buffer.lookup("map", "imu_link", T0 + round(2.05 * S)).status is LookupStatus.GAP


@pytest.mark.parametrize(
    ("transform", "result"),
    [
        (Transform(T0, "odom", "base_link", np.zeros(3), np.array([0, 0, 0, 1.1])),
         TransformAdd.BAD_QUATERNION),
        (Transform(T0, "odom", "base_link", np.zeros(3), np.zeros(4)), TransformAdd.BAD_QUATERNION),
        (Transform(T0, "odom", "base_link", np.array([np.nan, 0, 0]), np.array([0, 0, 0, 1.0])),
         TransformAdd.INVALID),
        (Transform(T0, "odom", "odom", np.zeros(3), np.array([0, 0, 0, 1.0])),
         TransformAdd.INVALID),
        (Transform(T0, "", "base_link", np.zeros(3), np.array([0, 0, 0, 1.0])),
         TransformAdd.INVALID),
    ],
)  # fmt: skip
def test_what_tf2_refuses_is_refused(transform: Transform, result: TransformAdd) -> None:
    buffer = TransformBuffer(max_gap_ns=S)
    assert buffer.add(transform, static=False) is result
    assert len(buffer) == 0


def test_a_nearly_unit_quaternion_is_normalised_and_kept() -> None:
    buffer = TransformBuffer(max_gap_ns=S)
    q = np.array([0.0, 0.0, 0.0, 1.002])  # |q|² - 1 = 0.004, inside tf2's tolerance
    assert buffer.add(Transform(T0, "a", "b", np.zeros(3), q), static=True) is TransformAdd.ADDED
    np.testing.assert_allclose(buffer.lookup("a", "b", T0).pose.orientation_xyzw, [0, 0, 0, 1])


def test_a_loop_a_late_and_a_future_transform_are_refused_and_the_tree_still_serves() -> None:
    buffer = robot_tree()
    before = buffer.lookup("map", "imu_link", T0 + S).pose
    assert buffer.add(tf(1.0, "imu_link", "map", [0, 0, 0]), static=False) is TransformAdd.LOOP
    assert buffer.add(tf(1.0, "imu_link", "odom", [0, 0, 0]), static=True) is TransformAdd.LOOP
    assert buffer.add(tf(1.0, "odom", "base_link", [0, 0, 0]), static=False) is TransformAdd.LATE
    future = tf(3600.0, "odom", "base_link", [9, 9, 9])
    assert buffer.add(future, static=False, now_ns=T0 + 2 * S) is TransformAdd.FUTURE
    after = buffer.lookup("map", "imu_link", T0 + S).pose
    np.testing.assert_array_equal(after.position_m, before.position_m)
    # Post-dated by a localizer's transform_tolerance is not the future.
    posted = tf(3.0, "map", "odom", [1.3, -2.0, 0.0], 10.0)
    assert buffer.add(posted, static=False, now_ns=T0 + 2 * S) is TransformAdd.ADDED


def test_the_cache_keeps_ten_seconds_of_an_edge() -> None:
    buffer = TransformBuffer(max_gap_ns=S)
    for k in range(300):  # 30 s at 10 Hz
        buffer.add(tf(0.1 * k, "odom", "base_link", [0.1 * k, 0, 0]), static=False)
    assert buffer.lookup("odom", "base_link", T0 + 5 * S).status is LookupStatus.BEFORE_OLDEST
    assert buffer.lookup("odom", "base_link", T0 + 25 * S).status is LookupStatus.OK
    assert len(buffer) == 101


def test_a_new_parent_starts_the_edge_afresh_and_a_static_edge_is_replaced() -> None:
    buffer = robot_tree()
    buffer.add(tf(0.0, "base_link", "imu_link", [0.0, 0.3, 0.0], yaw_deg=0.0), static=True)
    pose = buffer.lookup("base_link", "imu_link", T0).pose
    np.testing.assert_allclose(pose.position_m, [0.0, 0.3, 0.0])
    buffer.add(tf(1.0, "map", "base_link", [7.0, 0.0, 0.0]), static=False)  # re-parented
    assert buffer.parent_of("base_link") == "map"
    found = buffer.lookup("map", "imu_link", T0 + S)
    np.testing.assert_allclose(found.pose.position_m, [7.0, 0.3, 0.0])
    assert buffer.lookup("map", "imu_link", T0 + round(1.5 * S)).status is LookupStatus.WAIT
