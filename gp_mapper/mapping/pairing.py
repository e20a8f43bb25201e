"""Pair magnetometer readings with the pose interpolated at their stamps.

Each reading becomes a `Sample` (map-frame position and field in µT) once two poses bracket
its stamp. Until then it waits in a capped queue; it is dropped, and counted, when it is
malformed, implausible (|B| outside the configured range), out of order, from the wrong frame,
or can never be bracketed (as tf2's time cache: interpolate, never extrapolate).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.pose_buffer import AddResult, LookupStatus, PoseBuffer, rotate
from gp_mapper.mapping.records import DropCounts, FieldReading, Pose, Sample

logger = logging.getLogger(__name__)

# sensor_msgs/MagneticField carries tesla (REP-103); the engine's priors are in µT.
TESLA_TO_MICROTESLA = 1e6

# Readings waiting for a pose: a 1 kHz magnetometer fills this in ~4 s, far beyond any sensible
# pose_wait, so the cap only bounds memory when the pose stream is missing altogether.
MAX_PENDING_READINGS = 4096

# At most one "wrong frame" warning per this many seconds of wall time (the count is exact).
FRAME_WARNING_PERIOD_S = 10.0
# At most one "implausible reading" warning per this many seconds of wall time (likewise).
IMPLAUSIBLE_WARNING_PERIOD_S = 10.0


class _Pending(NamedTuple):
    stamp_ns: int
    field_ut: np.ndarray  # [3], sensor frame


class Pairer:
    """Turns poses and field readings into samples, in reading-stamp order.

    Args:
        poses: The pose buffer to interpolate in (owned by the pairer from now on).
        drops: Counters to increment (shared with the rest of the pipeline).
        pose_wait_ns: How long (ns of stamp time, measured against the newest stamp seen on
            either stream) a reading may wait for a pose newer than itself.
        expected_frame: Readings from another frame are dropped; "" accepts any.
        max_pending: Cap on waiting readings; the oldest is dropped (no_pose) beyond it.
        field_range_ut: (low, high): readings whose magnitude |B| (µT) lies outside it are
            dropped as implausible; None accepts any magnitude.
    """

    def __init__(
        self,
        poses: PoseBuffer,
        drops: DropCounts,
        *,
        pose_wait_ns: int,
        expected_frame: str = "",
        max_pending: int = MAX_PENDING_READINGS,
        field_range_ut: tuple[float, float] | None = None,
    ) -> None:
        self._poses = poses
        self._drops = drops
        self._pose_wait_ns = int(pose_wait_ns)
        self._expected_frame = expected_frame
        self._pending: deque[_Pending] = deque()
        self._max_pending = max_pending
        self._last_reading_ns: int | None = None
        self._latest_ns: int | None = None
        self._last_frame_warning = -float("inf")
        self._field_range_ut = field_range_ut
        self._last_implausible_warning = -float("inf")

    @property
    def pending(self) -> int:
        """Readings waiting for a pose."""
        return len(self._pending)

    @property
    def poses(self) -> PoseBuffer:
        """The pose buffer."""
        return self._poses

    def add_pose(self, pose: Pose) -> list[Sample]:
        """Add a pose; return the waiting readings it resolves, as samples in stamp order."""
        result = self._poses.add(pose)
        if result is AddResult.LATE:
            self._drops.late_pose += 1
            return []
        if result is AddResult.INVALID:
            self._drops.bad_pose += 1
            return []
        self._see(int(pose.stamp_ns))
        return self._resolve()

    def add_reading(self, reading: FieldReading) -> list[Sample]:
        """Add a reading; return the samples now complete (possibly this one), in stamp order."""
        stamp = int(reading.stamp_ns)
        if self._expected_frame and reading.frame_id != self._expected_frame:
            self._drops.frame += 1
            now = time.monotonic()
            if now - self._last_frame_warning >= FRAME_WARNING_PERIOD_S:
                self._last_frame_warning = now
                logger.warning(
                    "dropping readings from frame %r (expected %r); %d so far",
                    reading.frame_id,
                    self._expected_frame,
                    self._drops.frame,
                )
            return []
        field_t = np.asarray(reading.field_t, dtype=np.float64).reshape(-1)
        values = field_t.tolist()
        if len(values) != 3 or not all(map(math.isfinite, values)):
            self._drops.nan += 1
            return []
        if not any(values):
            self._drops.zero_field += 1
            return []
        if self._field_range_ut is not None:
            norm_ut = math.hypot(*values) * TESLA_TO_MICROTESLA
            low, high = self._field_range_ut
            if not low <= norm_ut <= high:
                self._drop_implausible(norm_ut)
                return []
        if self._last_reading_ns is not None and stamp <= self._last_reading_ns:
            self._drops.out_of_order += 1
            return []
        self._last_reading_ns = stamp
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self._drops.no_pose += 1
        self._pending.append(_Pending(stamp, field_t * TESLA_TO_MICROTESLA))
        self._see(stamp)
        return self._resolve()

    def flush(self) -> None:
        """Give up on every waiting reading (end of the input): each counts as no_pose."""
        self._drops.no_pose += len(self._pending)
        self._pending.clear()

    def clear(self) -> None:
        """Forget poses, waiting readings and stamp history (counters are kept)."""
        self._poses.clear()
        self._pending.clear()
        self._last_reading_ns = None
        self._latest_ns = None

    def _drop_implausible(self, norm_ut: float) -> None:
        self._drops.implausible += 1
        now = time.monotonic()
        if now - self._last_implausible_warning >= IMPLAUSIBLE_WARNING_PERIOD_S:
            self._last_implausible_warning = now
            assert self._field_range_ut is not None  # only called when the gate is on
            low, high = self._field_range_ut
            logger.warning(
                "dropping a reading of |B| = %.4g µT, outside [%g, %g] µT (field_min, "
                "field_max); %d so far",
                norm_ut,
                low,
                high,
                self._drops.implausible,
            )

    def _see(self, stamp_ns: int) -> None:
        if self._latest_ns is None or stamp_ns > self._latest_ns:
            self._latest_ns = stamp_ns

    def _resolve(self) -> list[Sample]:
        samples: list[Sample] = []
        while self._pending:
            stamp, field_ut = self._pending[0]
            lookup = self._poses.lookup(stamp)
            status = lookup.status
            if status is LookupStatus.WAIT:
                assert self._latest_ns is not None  # set by the add that queued it
                if self._latest_ns - stamp <= self._pose_wait_ns:
                    break  # readings behind it are newer: they wait too
                self._drops.no_pose += 1
            elif status is LookupStatus.OK:
                pose = lookup.pose
                assert pose is not None
                samples.append(
                    Sample(
                        stamp,
                        pose.position_m,
                        rotate(pose.orientation_xyzw, field_ut),
                        pose.orientation_xyzw,
                    )
                )
            elif status is LookupStatus.BEFORE_OLDEST:
                self._drops.no_pose += 1
            elif status is LookupStatus.GAP:
                self._drops.pose_gap += 1
            else:
                self._drops.pose_jump += 1
            self._pending.popleft()
        return samples
