from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from gp_mapper.mapping import AddResult, LookupStatus, Pose, PoseBuffer, rotate, slerp

S = 1_000_000_000  # ns per s


def yaw_q(deg: float) -> np.ndarray:
    half = np.radians(deg) / 2.0
    return np.array([0.0, 0.0, np.sin(half), np.cos(half)])


def pose(t_s: float, xyz=(0.0, 0.0, 0.0), q=(0.0, 0.0, 0.0, 1.0)) -> Pose:
    return Pose(round(t_s * S), np.asarray(xyz, dtype=float), np.asarray(q, dtype=float))


def test_linear_position_and_slerp_orientation_by_hand() -> None:
    buffer = PoseBuffer(10, max_gap_ns=2 * S)
    buffer.add(pose(0.0, (0.0, 0.0, 0.0), yaw_q(0.0)))
    buffer.add(pose(1.0, (2.0, 4.0, -2.0), yaw_q(90.0)))

    result = buffer.lookup(S // 4)
    assert result.status is LookupStatus.OK
    # A quarter of the way: position (0.5, 1, -0.5); yaw 22.5 degrees.
    np.testing.assert_allclose(result.pose.position_m, [0.5, 1.0, -0.5], atol=1e-12)
    expected = [0.0, 0.0, np.sin(np.radians(11.25)), np.cos(np.radians(11.25))]
    np.testing.assert_allclose(result.pose.orientation_xyzw, expected, atol=1e-12)
    assert result.pose.stamp_ns == S // 4


def test_slerp_matches_scipy_and_takes_the_short_way() -> None:
    rng = np.random.default_rng(1058390)
    for _ in range(50):
        q0, q1 = Rotation.random(2, random_state=rng).as_quat()
        alpha = rng.uniform()
        ours = Rotation.from_quat(slerp(q0, q1, alpha))
        ref = Slerp([0.0, 1.0], Rotation.from_quat([q0, q1]))([alpha])[0]
        assert (ours * ref.inv()).magnitude() < 1e-9
        # -q1 is the same rotation: the result must be too.
        flipped = Rotation.from_quat(slerp(q0, -q1, alpha))
        assert (flipped * ref.inv()).magnitude() < 1e-9


def test_slerp_of_nearly_equal_quaternions_is_unit_and_between() -> None:
    q0, q1 = yaw_q(10.0), yaw_q(10.0 + 1e-7)
    q = slerp(q0, q1, 0.5)
    assert abs(np.linalg.norm(q) - 1.0) < 1e-12
    angle = 2.0 * np.degrees(np.arctan2(q[2], q[3]))
    assert 10.0 <= angle <= 10.0 + 1e-7


def test_rotate_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    for q in Rotation.random(20, random_state=rng).as_quat():
        v = rng.normal(size=3)
        np.testing.assert_allclose(rotate(q, v), Rotation.from_quat(q).apply(v), atol=1e-12)


def test_exact_stamp_returns_that_pose() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S)
    buffer.add(pose(0.0, (1.0, 2.0, 3.0), yaw_q(30.0)))
    buffer.add(pose(0.1, (1.1, 2.0, 3.0), yaw_q(31.0)))
    for t, x in ((0.0, 1.0), (0.1, 1.1)):
        found = buffer.interpolate(round(t * S))
        assert found is not None and found.position_m[0] == pytest.approx(x)


def test_never_extrapolates() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S)
    assert buffer.lookup(0).status is LookupStatus.WAIT  # empty
    buffer.add(pose(1.0))
    buffer.add(pose(1.1, (0.1, 0.0, 0.0)))
    assert buffer.lookup(round(1.2 * S)).status is LookupStatus.WAIT
    assert buffer.lookup(round(0.9 * S)).status is LookupStatus.BEFORE_OLDEST
    assert buffer.interpolate(round(1.2 * S)) is None


def test_gap_and_jump_are_not_interpolated_across() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S // 5, max_speed_mps=10.0)
    buffer.add(pose(0.0))
    buffer.add(pose(0.1, (0.5, 0.0, 0.0)))  # 5 m/s: fine
    buffer.add(pose(0.2, (5.0, 0.0, 0.0)))  # 45 m/s: a jump
    buffer.add(pose(1.0, (5.1, 0.0, 0.0)))  # 0.8 s later: a gap
    assert buffer.lookup(round(0.05 * S)).status is LookupStatus.OK
    assert buffer.lookup(round(0.15 * S)).status is LookupStatus.JUMP
    assert buffer.lookup(round(0.5 * S)).status is LookupStatus.GAP

    no_speed_check = PoseBuffer(10, max_gap_ns=S // 5, max_speed_mps=0.0)
    no_speed_check.add(pose(0.1, (0.5, 0.0, 0.0)))
    no_speed_check.add(pose(0.2, (5.0, 0.0, 0.0)))
    assert no_speed_check.lookup(round(0.15 * S)).status is LookupStatus.OK


def test_out_of_order_pose_is_inserted_within_the_horizon_else_late() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S)
    assert buffer.add(pose(0.0, (0.0, 0.0, 0.0))) is AddResult.APPENDED
    assert buffer.add(pose(0.2, (2.0, 0.0, 0.0))) is AddResult.APPENDED
    assert buffer.add(pose(0.1, (5.0, 0.0, 0.0))) is AddResult.INSERTED
    # The inserted pose now brackets 0.05 s: half-way to x = 5.
    assert buffer.interpolate(round(0.05 * S)).position_m[0] == pytest.approx(2.5)
    assert buffer.add(pose(-0.1)) is AddResult.LATE
    assert len(buffer) == 3


def test_invalid_poses_are_refused() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S)
    assert buffer.add(pose(0.0)) is AddResult.APPENDED
    assert buffer.add(pose(0.0, (1.0, 0.0, 0.0))) is AddResult.INVALID  # repeated stamp
    assert buffer.add(pose(0.1, (np.nan, 0.0, 0.0))) is AddResult.INVALID
    assert buffer.add(pose(0.1, q=(0.0, 0.0, 0.0, 0.0))) is AddResult.INVALID
    assert buffer.add(pose(0.1, q=(0.0, 0.0, np.inf, 1.0))) is AddResult.INVALID
    assert buffer.add(Pose(S, np.zeros(2), np.array([0, 0, 0, 1.0]))) is AddResult.INVALID
    assert len(buffer) == 1


def test_quaternions_are_normalised() -> None:
    buffer = PoseBuffer(10, max_gap_ns=S)
    buffer.add(pose(0.0, q=(0.0, 0.0, 0.0, 2.0)))
    np.testing.assert_allclose(buffer.interpolate(0).orientation_xyzw, [0, 0, 0, 1])


def test_capacity_drops_the_oldest() -> None:
    buffer = PoseBuffer(3, max_gap_ns=S)
    for k in range(5):
        buffer.add(pose(0.1 * k, (k, 0.0, 0.0)))
    assert len(buffer) == 3
    assert buffer.oldest_ns == round(0.2 * S) and buffer.newest_ns == round(0.4 * S)
    assert buffer.lookup(round(0.1 * S)).status is LookupStatus.BEFORE_OLDEST
    buffer.clear()
    assert len(buffer) == 0 and buffer.oldest_ns is None


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="capacity"):
        PoseBuffer(1, max_gap_ns=S)
    with pytest.raises(ValueError, match="max_gap_ns"):
        PoseBuffer(5, max_gap_ns=0)
