"""map -> odom: the correction and when it is sent (post-dated at updates, re-sent on ticks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gp_mapper.mapping.localization.correction import CorrectionSchedule, map_to_odom

MS = 1_000_000


def test_map_to_odom_composed_with_the_odometry_is_the_estimate() -> None:
    estimate, odometry = np.array([3.0, -1.0, 2.8]), np.array([0.5, 4.0, -2.9])
    x, y, yaw = map_to_odom(estimate, odometry)
    c, s = math.cos(yaw), math.sin(yaw)
    composed = (x + c * odometry[0] - s * odometry[1], y + s * odometry[0] + c * odometry[1])
    assert composed == pytest.approx(tuple(estimate[:2]))
    assert math.remainder(yaw + odometry[2] - estimate[2], 2 * math.pi) == pytest.approx(0.0)
    assert -math.pi <= yaw <= math.pi


def test_nothing_is_re_sent_before_a_correction_exists() -> None:
    assert CorrectionSchedule().tick(1000 * MS) is None


def test_a_tick_after_an_update_skips_and_the_next_re_sends_newly_stamped() -> None:
    schedule = CorrectionSchedule()
    assert schedule.update((1.0, 2.0, 0.3), 500 * MS) == 500 * MS
    assert schedule.tick(600 * MS) is None  # an update went out since the last tick
    assert schedule.tick(700 * MS) == 700 * MS
    assert schedule.tick(800 * MS) == 800 * MS
    assert schedule.correction == (1.0, 2.0, 0.3)


def test_a_re_send_never_goes_back_behind_a_stamp_sent() -> None:
    schedule = CorrectionSchedule()
    schedule.update((0.0, 0.0, 0.0), 5000 * MS)  # readings stamped ahead of the clock
    schedule.tick(100 * MS)  # the tick that follows an update
    assert schedule.tick(200 * MS) is None and schedule.tick(5000 * MS) is None
    assert schedule.tick(5001 * MS) == 5001 * MS


def test_clear_forgets_the_correction() -> None:
    schedule = CorrectionSchedule()
    schedule.update((1.0, 0.0, 0.0), MS)
    schedule.clear()
    assert schedule.correction is None and schedule.tick(2 * MS) is None
