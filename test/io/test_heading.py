"""Heading from the direction of travel, yaw quaternions and z rotations."""

from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.io.heading import (
    heading_from_track,
    rotate_z,
    yaw_from_quaternion,
    yaw_to_quaternion,
)

RATE_HZ = 50.0


def _track(velocity: list[tuple[float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise-constant velocity: (vx, vy, seconds) legs at 50 Hz -> (time [N], xy [N, 2])."""
    steps = [np.tile([vx, vy], (round(s * RATE_HZ), 1)) / RATE_HZ for vx, vy, s in velocity]
    xy = np.vstack([np.zeros((1, 2)), np.cumsum(np.vstack(steps), axis=0)])
    return np.arange(xy.shape[0]) / RATE_HZ, xy


@pytest.mark.parametrize(("vx", "vy"), [(0.3, 0.0), (0.0, 0.3), (-0.2, -0.2), (0.1, -0.3)])
def test_heading_of_a_straight_track_is_its_direction(vx: float, vy: float) -> None:
    time_s, xy = _track([(vx, vy, 3.0)])
    yaw = heading_from_track(time_s, xy)
    np.testing.assert_allclose(yaw, np.arctan2(vy, vx), atol=1e-9)


def test_a_track_that_never_moves_has_identity_heading() -> None:
    time_s = np.arange(100) / RATE_HZ
    xy = np.full((100, 2), 2.5) + np.random.default_rng(3).normal(0.0, 2e-4, (100, 2))
    np.testing.assert_array_equal(heading_from_track(time_s, xy), 0.0)


def test_stops_hold_the_last_heading_and_starts_take_the_first() -> None:
    # stand still 2 s, drive +y for 3 s, stop 2 s, drive -x for 3 s
    time_s, xy = _track([(0, 0, 2.0), (0, 0.3, 3.0), (0, 0, 2.0), (-0.3, 0, 3.0)])
    yaw = heading_from_track(time_s, xy)
    before_start = time_s < 1.5
    stopped = (time_s > 5.5) & (time_s < 6.5)
    last_leg = time_s > 7.5
    np.testing.assert_allclose(yaw[before_start], np.pi / 2, atol=1e-9)
    np.testing.assert_allclose(yaw[stopped], np.pi / 2, atol=1e-9)
    np.testing.assert_allclose(np.abs(yaw[last_leg]), np.pi, atol=1e-9)


def test_quaternion_round_trip_and_unit_norm() -> None:
    yaw = np.linspace(-np.pi + 1e-6, np.pi, 37)
    q = yaw_to_quaternion(yaw)
    assert q.shape == (37, 4)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(q[:, :2], 0.0)
    np.testing.assert_allclose(yaw_from_quaternion(q), yaw, atol=1e-12)


def test_rotate_z_is_a_rotation() -> None:
    rng = np.random.default_rng(7)
    v = rng.normal(size=(50, 3))
    yaw = rng.uniform(-np.pi, np.pi, 50)
    turned = rotate_z(v, yaw)
    np.testing.assert_allclose(np.linalg.norm(turned, axis=1), np.linalg.norm(v, axis=1))
    np.testing.assert_array_equal(turned[:, 2], v[:, 2])
    np.testing.assert_allclose(rotate_z(turned, -yaw), v, atol=1e-12)
    np.testing.assert_allclose(
        rotate_z(np.array([[1.0, 0.0, 0.0]]), np.pi / 2), [[0, 1, 0]], atol=1e-15
    )
