"""Pair magnetometer readings with the pose interpolated at their stamps.

Each reading becomes a `Sample` (map-frame position and field in µT) once its pose is known:
either bracketed by two poses of the sensor on a pose topic (`PoseBuffer`), or composed from
the TF tree at its stamp (`TransformBuffer`: map -> ... -> the reading's frame, so the sensor's
lever arm moves the position and its mounting turns the vector). Until then it waits in a
capped queue; it is dropped, and counted, when it is malformed, implausible (|B| outside the
configured range), out of order, from the wrong frame, or can never be posed (as tf2: interpolate,
never extrapolate).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.pose_buffer import (
    AddResult,
    LookupStatus,
    PoseBuffer,
    PoseLookup,
    rotate,
)
from gp_mapper.mapping.records import DropCounts, FieldReading, Pose, Sample, Transform
from gp_mapper.mapping.transforms import REFUSALS, TransformAdd, TransformBuffer

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
# At most one warning per this many seconds of wall time for each kind of TF trouble.
TF_WARNING_PERIOD_S = 10.0


class _Pending(NamedTuple):
    stamp_ns: int
    field_ut: np.ndarray  # [3], sensor frame
    frame_id: str


class Pairer:
    """Turns poses (or transforms) and field readings into samples, in reading-stamp order.

    Args:
        poses: Where poses come from (owned by the pairer from now on): a `PoseBuffer` of
            the sensor's poses in the map frame (`add_pose`), or a `TransformBuffer` of the TF
            tree (`add_transform`).
        drops: Counters to increment (shared with the rest of the pipeline).
        pose_wait_ns: How long (ns of stamp time) a reading may wait for its pose: measured
            against the newest stamp seen on either stream for a pose buffer; against the
            newest reading for a TF tree, whose transforms may be post-dated (a localizer's
            map -> odom, by its transform_tolerance).
        expected_frame: Readings from another frame are dropped; "" accepts any.
        mag_bias_ut: [3] the magnetometer's hard-iron offset in its own frame (µT), taken off
            each reading before anything else; None = none.
        map_frame: (TF) The frame samples are posed in.
        sensor_frame: (TF) The frame every reading is looked up in; "" = each reading's own
            ``frame_id``.
        max_pending: Cap on waiting readings; the oldest is dropped (no_pose) beyond it.
        field_range_ut: (low, high): readings whose magnitude |B| (µT) lies outside it are
            dropped as implausible; None accepts any magnitude.
    """

    def __init__(
        self,
        poses: PoseBuffer | TransformBuffer,
        drops: DropCounts,
        *,
        pose_wait_ns: int,
        expected_frame: str = "",
        max_pending: int = MAX_PENDING_READINGS,
        field_range_ut: tuple[float, float] | None = None,
        mag_bias_ut: np.ndarray | None = None,
        map_frame: str = "map",
        sensor_frame: str = "",
    ) -> None:
        self._poses = poses
        self._bias_t = (
            None if mag_bias_ut is None else np.asarray(mag_bias_ut, float) / TESLA_TO_MICROTESLA
        )
        self._map_frame = map_frame.lstrip("/")
        self._sensor_frame = sensor_frame.lstrip("/")
        self._last_tf_warning: dict[str, float] = {}
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
    def poses(self) -> PoseBuffer | TransformBuffer:
        """The pose buffer or the TF tree."""
        return self._poses

    def add_pose(self, pose: Pose) -> list[Sample]:
        """Add a pose; return the waiting readings it resolves, as samples in stamp order."""
        if not isinstance(self._poses, PoseBuffer):
            raise TypeError(
                "poses of the sensor need pose_source 'topic'; under 'tf' (the default) the "
                "readings are posed from transforms (add_transform)"
            )
        result = self._poses.add(pose)
        if result is AddResult.LATE:
            self._drops.late_pose += 1
            return []
        if result is AddResult.INVALID:
            self._drops.bad_pose += 1
            return []
        self._see(int(pose.stamp_ns))
        return self._resolve()

    def add_transform(self, transform: Transform, *, static: bool) -> list[Sample]:
        """Add one TF edge's transform (``/tf_static`` when ``static``); return the waiting
        readings it resolves, as samples in stamp order. A refused one is counted and warned
        about (rate-limited) with the reason."""
        if not isinstance(self._poses, TransformBuffer):
            raise TypeError(
                "transforms need pose_source 'tf'; under 'topic' the readings are posed from "
                "poses of the sensor (add_pose)"
            )
        result = self._poses.add(transform, static=static, now_ns=self._last_reading_ns)
        if result is not TransformAdd.ADDED:
            reason, why = REFUSALS[result]
            setattr(self._drops, reason, getattr(self._drops, reason) + 1)
            self._warn_tf(
                reason,
                f"dropping a transform {transform.parent!r} -> {transform.child!r}: "
                f"{why}; {getattr(self._drops, reason)} so far",
            )
            return []
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
        if self._bias_t is not None:  # after the zero check: a silent sensor stays silent
            field_t = field_t - self._bias_t
            values = field_t.tolist()
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
        self._pending.append(_Pending(stamp, field_t * TESLA_TO_MICROTESLA, reading.frame_id))
        self._see(stamp)
        return self._resolve()

    def flush(self) -> None:
        """Give up on every waiting reading (end of the input): each counts as no_pose, or as
        no_transform where the TF tree does not join its frame to the map."""
        for stamp, _, frame_id in self._pending:
            if self._lookup(stamp, frame_id).status is LookupStatus.UNCONNECTED:
                self._drops.no_transform += 1
            else:
                self._drops.no_pose += 1
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

    def _warn_tf(self, kind: str, message: str) -> None:
        now = time.monotonic()
        if now - self._last_tf_warning.get(kind, -math.inf) >= TF_WARNING_PERIOD_S:
            self._last_tf_warning[kind] = now
            logger.warning(message)

    def _warn_unconnected(self, source: str) -> None:
        assert isinstance(self._poses, TransformBuffer)  # only a TF lookup is unconnected
        self._warn_tf(
            "no_transform",
            f"dropping readings: no transform {self._map_frame!r} -> {source!r} (frames known: "
            f"{', '.join(sorted(self._poses.frames)) or 'none'}); "
            f"{self._drops.no_transform} so far",
        )

    def _lookup(self, stamp: int, frame_id: str) -> PoseLookup:
        if isinstance(self._poses, PoseBuffer):
            return self._poses.lookup(stamp)
        return self._poses.lookup(self._map_frame, self._sensor_frame or frame_id, stamp)

    def _see(self, stamp_ns: int) -> None:
        if self._latest_ns is None or stamp_ns > self._latest_ns:
            self._latest_ns = stamp_ns

    def _resolve(self) -> list[Sample]:
        samples: list[Sample] = []
        # The clock a reading waits by: the newest stamp of either stream, or of the readings
        # alone under TF (see the class's pose_wait_ns).
        tf = isinstance(self._poses, TransformBuffer)
        clock = self._last_reading_ns if tf else self._latest_ns
        while self._pending:
            stamp, field_ut, frame_id = self._pending[0]
            lookup = self._lookup(stamp, frame_id)
            status = lookup.status
            if status in (LookupStatus.WAIT, LookupStatus.UNCONNECTED):
                assert clock is not None  # set by the add that queued it
                if clock - stamp <= self._pose_wait_ns:
                    break  # readings behind it are newer: they wait too
                if status is LookupStatus.WAIT:
                    self._drops.no_pose += 1
                else:
                    self._drops.no_transform += 1
                    self._warn_unconnected(self._sensor_frame or frame_id)
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
