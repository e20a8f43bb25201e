"""A capped, time-sorted buffer of poses, interpolated at magnetometer stamps.

This is tf2's model (`ros2/geometry2` `tf2/src/cache.cpp`, `TimeCache::interpolate`) without tf:
linear interpolation of the position, slerp of the orientation, and no extrapolation.
"""

from __future__ import annotations

import bisect
import enum
import math
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.records import Pose

NS_PER_S = 1_000_000_000

# Above this |cos(angle)| between two unit quaternions, sin(angle) is too small to divide by;
# linear interpolation (then normalisation) agrees with slerp to within float64 rounding there.
SLERP_LINEAR_DOT = 1.0 - 1e-12

# A quaternion shorter than this cannot be normalised into a rotation (float64 has room to
# spare; a real driver sends unit quaternions or an all-zero "unknown" one).
MIN_QUATERNION_NORM = 1e-6


def slerp(q0: np.ndarray, q1: np.ndarray, alpha: float) -> np.ndarray:
    """Spherical linear interpolation between unit quaternions, along the shorter arc.

    Args:
        q0: [4] unit quaternion (x, y, z, w) at alpha = 0.
        q1: [4] unit quaternion at alpha = 1.
        alpha: Fraction of the way from q0 to q1, in [0, 1].

    Returns:
        [4] unit quaternion.
    """
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # q and -q are the same rotation; take the shorter way round
        q1, dot = -q1, -dot
    if dot > SLERP_LINEAR_DOT:
        q = q0 + alpha * (q1 - q0)
        return q / np.linalg.norm(q)
    angle = np.arccos(dot)
    q = np.sin((1.0 - alpha) * angle) * q0 + np.sin(alpha * angle) * q1
    return q / np.sin(angle)


def rotate(quat_xyzw: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Rotate a vector by a unit quaternion: v' = q v q*.

    Args:
        quat_xyzw: [4] unit quaternion (x, y, z, w).
        vector: [3] vector in the rotated (child) frame.

    Returns:
        [3] the vector in the parent frame.
    """
    # Scalar arithmetic: np.cross on 3-vectors costs ~0.1 ms a call, and this runs once per
    # magnetometer reading in the node's callback.
    x, y, z, w = (float(c) for c in quat_xyzw)
    vx, vy, vz = (float(c) for c in vector)
    tx, ty, tz = 2.0 * (y * vz - z * vy), 2.0 * (z * vx - x * vz), 2.0 * (x * vy - y * vx)
    return np.array(
        [
            vx + w * tx + (y * tz - z * ty),
            vy + w * ty + (z * tx - x * tz),
            vz + w * tz + (x * ty - y * tx),
        ]
    )


class AddResult(enum.Enum):
    """What `PoseBuffer.add` did with a pose."""

    APPENDED = "appended"  # newer than every pose held
    INSERTED = "inserted"  # out of order, but within the buffer: put in its place
    LATE = "late"  # older than every pose held: dropped
    INVALID = "invalid"  # non-finite, zero quaternion or a stamp already held: dropped


class LookupStatus(enum.Enum):
    """Why a lookup did or did not give a pose."""

    OK = "ok"
    WAIT = "wait"  # the stamp is newer than every pose (or none yet): a later pose may bracket it
    BEFORE_OLDEST = "before_oldest"  # older than every pose held: it will never be bracketed
    GAP = "gap"  # the bracketing poses are further apart than max_gap
    JUMP = "jump"  # the bracketing poses imply a speed above max_speed
    UNCONNECTED = "unconnected"  # (a TF lookup) no known edges join the two frames yet


class PoseLookup(NamedTuple):
    """The result of `PoseBuffer.lookup`: a pose when `status` is OK, else None."""

    pose: Pose | None
    status: LookupStatus


class PoseBuffer:
    """Poses sorted by stamp, at most `capacity` of them (the oldest go first).

    Args:
        capacity: Poses kept.
        max_gap_ns: Largest stamp difference (ns) between two poses interpolated across.
        max_speed_mps: Largest speed (m/s) implied by two bracketing poses; faster is a jump
            (e.g. a map-frame correction, REP-105) and is not interpolated. 0 disables.
        horizon_ns: Poses older than the newest by more than this (ns) go too, as tf2's
            cache_time bounds a time cache; 0 bounds by `capacity` alone.
    """

    def __init__(
        self,
        capacity: int,
        max_gap_ns: int,
        max_speed_mps: float = 0.0,
        *,
        horizon_ns: int = 0,
    ) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2 poses; got {capacity}")
        if max_gap_ns <= 0:
            raise ValueError(f"max_gap_ns must be positive; got {max_gap_ns}")
        self._capacity = capacity
        self._max_gap_ns = int(max_gap_ns)
        self._max_speed = float(max_speed_mps)
        self._horizon_ns = int(horizon_ns)
        self._stamps: list[int] = []
        self._positions: list[np.ndarray] = []
        self._quats: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self._stamps)

    @property
    def oldest_ns(self) -> int | None:
        """Stamp of the oldest pose held (ns), or None when empty."""
        return self._stamps[0] if self._stamps else None

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest pose held (ns), or None when empty."""
        return self._stamps[-1] if self._stamps else None

    def clear(self) -> None:
        """Forget every pose."""
        self._stamps.clear()
        self._positions.clear()
        self._quats.clear()

    def add(self, pose: Pose) -> AddResult:
        """Insert a pose in stamp order; the oldest pose goes when over capacity.

        A pose older than the newest is inserted in its place if it is not older than the
        oldest pose held (the buffer's horizon); otherwise it is late and dropped.
        """
        stamp = int(pose.stamp_ns)
        position = np.asarray(pose.position_m, dtype=np.float64).reshape(-1)
        quat = np.asarray(pose.orientation_xyzw, dtype=np.float64).reshape(-1)
        if position.shape != (3,) or quat.shape != (4,):
            return AddResult.INVALID
        # Plain floats: numpy reductions on 3- and 4-vectors cost more than the whole pose.
        values = position.tolist() + quat.tolist()
        if not all(map(math.isfinite, values)):
            return AddResult.INVALID
        norm = math.sqrt(sum(c * c for c in values[3:]))
        if norm < MIN_QUATERNION_NORM:
            return AddResult.INVALID
        quat = quat / norm
        if not self._stamps or stamp > self._stamps[-1]:
            index, result = len(self._stamps), AddResult.APPENDED
        elif stamp < self._stamps[0]:
            return AddResult.LATE
        else:
            index = bisect.bisect_left(self._stamps, stamp)
            if self._stamps[index] == stamp:
                return AddResult.INVALID
            result = AddResult.INSERTED
        self._stamps.insert(index, stamp)
        self._positions.insert(index, position)
        self._quats.insert(index, quat)
        if len(self._stamps) > self._capacity:
            del self._stamps[0], self._positions[0], self._quats[0]
        if self._horizon_ns > 0:
            # Two poses stay whatever their age: the newest pair still brackets a stamp.
            while len(self._stamps) > 2 and self._stamps[-1] - self._stamps[0] > self._horizon_ns:
                del self._stamps[0], self._positions[0], self._quats[0]
        return result

    def lookup(self, stamp_ns: int) -> PoseLookup:
        """The pose at `stamp_ns`, interpolated between the two poses that bracket it.

        Position is linear in time; orientation is slerped along the shorter arc. A stamp equal
        to a held pose's returns that pose. Never extrapolates.
        """
        stamp = int(stamp_ns)
        if not self._stamps or stamp > self._stamps[-1]:
            return PoseLookup(None, LookupStatus.WAIT)
        if stamp < self._stamps[0]:
            return PoseLookup(None, LookupStatus.BEFORE_OLDEST)
        hi = bisect.bisect_left(self._stamps, stamp)
        if self._stamps[hi] == stamp:
            return PoseLookup(
                Pose(stamp, self._positions[hi].copy(), self._quats[hi].copy()), LookupStatus.OK
            )
        lo = hi - 1
        t0, t1 = self._stamps[lo], self._stamps[hi]
        dt_ns = t1 - t0
        if dt_ns > self._max_gap_ns:
            return PoseLookup(None, LookupStatus.GAP)
        p0, p1 = self._positions[lo], self._positions[hi]
        if self._max_speed > 0.0:
            speed = float(np.linalg.norm(p1 - p0)) * NS_PER_S / dt_ns
            if speed > self._max_speed:
                return PoseLookup(None, LookupStatus.JUMP)
        alpha = (stamp - t0) / dt_ns
        position = p0 + alpha * (p1 - p0)
        quat = slerp(self._quats[lo], self._quats[hi], alpha)
        return PoseLookup(Pose(stamp, position, quat), LookupStatus.OK)

    def interpolate(self, stamp_ns: int) -> Pose | None:
        """The interpolated pose at `stamp_ns`, or None (see `lookup` for why)."""
        return self.lookup(stamp_ns).pose
