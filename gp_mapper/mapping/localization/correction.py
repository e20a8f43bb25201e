"""map -> odom: the correction a localizer broadcasts, and when it is sent with which stamp.

Nav2's AMCL sends ``map -> odom`` after each update stamped the scan's time plus
``transform_tolerance``, post-dated so that a listener (a costmap) may use it that long
without extrapolating; at each scan without an update it sends the last one again, newly
stamped. A magnetic filter updates only after ``batch_distance_m`` of travel, so a standing
robot would send nothing: the node re-sends on a timer instead, stamped now + tolerance
(`CorrectionSchedule.tick`). A re-send never goes back behind a stamp already sent (tf2
would take it, but as an older value, and a repeated stamp it drops with a warning).
"""

from __future__ import annotations

import math

import numpy as np


def map_to_odom(estimate: np.ndarray, odometry: np.ndarray) -> tuple[float, float, float]:
    """``T_map_odom = T_map_base · T_odom_base⁻¹`` for planar poses (x, y, yaw) [m, rad]."""
    yaw = estimate[2] - odometry[2]
    c, s = math.cos(yaw), math.sin(yaw)
    x = estimate[0] - (c * odometry[0] - s * odometry[1])
    y = estimate[1] - (s * odometry[0] + c * odometry[1])
    return x, y, math.atan2(math.sin(yaw), math.cos(yaw))


class CorrectionSchedule:
    """The last correction, and whether and how a timer tick re-sends it."""

    def __init__(self) -> None:
        self.correction: tuple[float, float, float] | None = None
        self.last_stamp_ns: int | None = None
        self._sent_since_tick = False

    def clear(self) -> None:
        """No correction yet (a new map)."""
        self.correction = None
        self.last_stamp_ns = None
        self._sent_since_tick = False

    def update(self, correction: tuple[float, float, float], stamp_ns: int) -> int:
        """A new correction, sent now at ``stamp_ns`` (already post-dated); returns the stamp."""
        self.correction = correction
        return self.sent(stamp_ns)

    def sent(self, stamp_ns: int) -> int:
        """Note that the correction went out at ``stamp_ns``; returns the stamp."""
        self.last_stamp_ns = int(stamp_ns)
        self._sent_since_tick = True
        return self.last_stamp_ns

    def tick(self, stamp_ns: int) -> int | None:
        """A timer tick that would re-send at ``stamp_ns`` (now + tolerance): the stamp to send
        the correction with, or None when there is none, one went out since the last tick,
        or the last one sent is stamped at or after it."""
        if self.correction is None:
            return None
        if self._sent_since_tick:
            self._sent_since_tick = False
            return None
        if self.last_stamp_ns is not None and stamp_ns <= self.last_stamp_ns:
            return None
        self.last_stamp_ns = int(stamp_ns)
        return self.last_stamp_ns
