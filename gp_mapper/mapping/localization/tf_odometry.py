"""Odometry and the magnetometer's mounting read from a TF tree at each reading's stamp.

Nav2's AMCL takes its odometry from TF, not from a topic: ``odom -> base_footprint`` looked up at
each scan's stamp (tf2_ros's MessageFilter holds a scan until the transform at its stamp is
there), and the laser's mounting, ``base -> laser frame``, the same way. Here a magnetometer
reading waits, in stamp order, until a `TransformBuffer` answers both lookups at its stamp:
``odom_frame -> base_frame`` and ``base_frame -> the reading's frame``. A reading that can
never be answered (older than an edge's cache, across a gap in one) or that is still waiting
when the newest reading is ``timeout`` later in stamp time is dropped and counted.

What the filter then gets (it knows a planar pose and a reading in the base's axes):

- the odometry of the point it tracks: the sensor's position with the base's heading,
  ``(x, y) + R(yaw) · lever`` and ``yaw`` of the base. The map is read where the sensor is;
  ``map -> odom`` is the same whichever point of the base is tracked
  (``T_map_point · T_odom_point⁻¹ = T_map_base · L · L⁻¹ · T_odom_base⁻¹``), and the base's own
  pose comes back with `base_pose`.
- the reading in the sensor's own axes and its attitude: the rotation into the base's
  levelled axes (the base's heading, z up), ``R_z(−yaw) · R_odom_base · R_base_sensor``, so the
  mounting and the base's roll and pitch are taken from TF. The filter's three-axis likelihood
  turns the reading with it and keeps the sensor's offset in the sensor's axes, where it is
  constant; a ‖B‖ map reads the norm, which no rotation changes.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy.spatial.transform import Rotation

from gp_mapper.engine.auxiliary import yaw_from_quaternion
from gp_mapper.mapping.pose_buffer import NS_PER_S, LookupStatus
from gp_mapper.mapping.records import Transform
from gp_mapper.mapping.transforms import REFUSALS, TransformAdd, TransformBuffer

if TYPE_CHECKING:
    from .localizer import Localizer

# Readings waiting for their transforms, at most: 100 s of a 100 Hz magnetometer, far past any
# transform_timeout; past it the oldest is dropped (``waiting_overflow``).
MAX_WAITING = 10_000


class PosedReading(NamedTuple):
    """A reading with what the filter needs at its stamp.

    Attributes:
        stamp_ns: the reading's stamp (ns).
        odometry: [3] (x, y, yaw) in the odom frame of the sensor's position with the base's
            heading (m, rad).
        field_ut: [3] the reading in the sensor's axes (µT).
        lever_m: [2] the sensor's origin in the base frame, x and y (m).
        attitude: [3, 3] the rotation from the sensor's axes into the base's levelled axes.
    """

    stamp_ns: int
    odometry: np.ndarray
    field_ut: np.ndarray
    lever_m: np.ndarray
    attitude: np.ndarray


class _Waiting(NamedTuple):
    stamp_ns: int
    field_ut: np.ndarray
    frame_id: str


def tracked_odometry(base_xy: np.ndarray, base_yaw: float, lever_m: np.ndarray) -> np.ndarray:
    """The odometry pose [3] of the sensor's position with the base's heading."""
    c, s = math.cos(base_yaw), math.sin(base_yaw)
    return np.array([
        base_xy[0] + c * lever_m[0] - s * lever_m[1],
        base_xy[1] + s * lever_m[0] + c * lever_m[1],
        base_yaw,
    ])  # fmt: skip


def levelled_attitude(odom_base_xyzw: np.ndarray, base_sensor_xyzw: np.ndarray) -> np.ndarray:
    """[3, 3] the rotation from the sensor's axes into the base's levelled axes: the mounting,
    then the base's attitude in the odom frame, less its yaw (module docstring)."""
    odom_sensor = Rotation.from_quat(odom_base_xyzw) * Rotation.from_quat(base_sensor_xyzw)
    yaw = float(yaw_from_quaternion(np.asarray(odom_base_xyzw, dtype=np.float64)))
    return (Rotation.from_euler("z", -yaw) * odom_sensor).as_matrix()


def base_pose(
    mean: np.ndarray, covariance: np.ndarray, lever_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The base's pose from the tracked point's: ``mean`` [3] less the lever arm turned by its
    yaw, and the covariance [3, 3] carried through that map to first order (the heading's
    uncertainty moves the base by the lever arm's length).

    Args:
        mean: (x, y, yaw) of the tracked point in the map frame (m, rad).
        covariance: [3, 3] its covariance.
        lever_m: [2] the sensor's origin in the base frame (m).
    """
    c, s = math.cos(mean[2]), math.sin(mean[2])
    lx, ly = float(lever_m[0]), float(lever_m[1])
    base = np.array([mean[0] - (c * lx - s * ly), mean[1] - (s * lx + c * ly), mean[2]])
    jacobian = np.array([
        [1.0, 0.0, s * lx + c * ly],
        [0.0, 1.0, -c * lx + s * ly],
        [0.0, 0.0, 1.0],
    ])  # fmt: skip
    return base, jacobian @ covariance @ jacobian.T


def base_poses(poses: np.ndarray, lever_m: np.ndarray) -> np.ndarray:
    """The base's poses [P, 3] from the tracked point's ``poses`` [P, 3] (a particle set)."""
    c, s = np.cos(poses[:, 2]), np.sin(poses[:, 2])
    lx, ly = float(lever_m[0]), float(lever_m[1])
    out = poses.copy()
    out[:, 0] -= c * lx - s * ly
    out[:, 1] -= s * lx + c * ly
    return out


class TfOdometry:
    """Readings in, readings with their odometry and in the base's axes out (module docstring).

    Args:
        odom_frame: the odometry's frame (``odom``).
        base_frame: the robot's base (``base_link``).
        timeout_ns: how long, in the readings' stamp time, a reading waits for its transforms.
        max_gap_ns: largest gap between two transforms of one edge interpolated across.
        ignored: (parent, child) edges not to keep, e.g. the localizer's own ``map -> odom``,
            which it post-dates and which no lookup here needs.
    """

    def __init__(
        self,
        odom_frame: str,
        base_frame: str,
        *,
        timeout_ns: int,
        max_gap_ns: int,
        ignored: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.odom_frame = odom_frame.lstrip("/")
        self.base_frame = base_frame.lstrip("/")
        self.timeout_ns = int(timeout_ns)
        self.buffer = TransformBuffer(max_gap_ns)
        self.drops: Counter[str] = Counter()
        self._ignored = {(p.lstrip("/"), c.lstrip("/")) for p, c in ignored}
        self._waiting: deque[_Waiting] = deque()
        self._newest_ns: int | None = None

    @property
    def pending(self) -> int:
        """Readings waiting for their transforms."""
        return len(self._waiting)

    def clear(self) -> None:
        """Forget the waiting readings and every transform."""
        self._waiting.clear()
        self.buffer.clear()
        self._newest_ns = None

    def add_transform(self, transform: Transform, *, static: bool) -> list[PosedReading]:
        """A transform of ``/tf`` (or ``/tf_static`` when ``static``); returns the readings it
        let through."""
        if (transform.parent.lstrip("/"), transform.child.lstrip("/")) in self._ignored:
            return []
        result = self.buffer.add(transform, static=static, now_ns=self._newest_ns)
        if result is not TransformAdd.ADDED:
            self.drops[REFUSALS[result][0]] += 1
            return []
        return self._resolve()

    def add_reading(self, stamp_ns: int, field_ut: np.ndarray, frame_id: str) -> list[PosedReading]:
        """A reading [µT] in frame ``frame_id`` (empty: the base's axes); returns every reading
        now resolved, in stamp order."""
        stamp = int(stamp_ns)
        if self._newest_ns is not None and stamp < self._newest_ns:
            self.drops["reading_stamp_backwards"] += 1
            return []
        self._newest_ns = stamp
        if len(self._waiting) >= MAX_WAITING:
            self._waiting.popleft()
            self.drops["waiting_overflow"] += 1
        field = np.asarray(field_ut, dtype=np.float64).reshape(3)
        self._waiting.append(_Waiting(stamp, field, frame_id.lstrip("/")))
        return self._resolve()

    def _resolve(self) -> list[PosedReading]:
        """Pose the waiting readings from the oldest on; stop at the first that must wait."""
        out: list[PosedReading] = []
        while self._waiting:
            reading = self._waiting[0]
            posed, blocked_by = self._pose(reading)
            if posed is None and blocked_by is None:  # dropped for good, counted
                self._waiting.popleft()
                continue
            if posed is not None:
                self._waiting.popleft()
                out.append(posed)
                continue
            assert self._newest_ns is not None
            if self._newest_ns - reading.stamp_ns <= self.timeout_ns:
                break
            self._waiting.popleft()
            self.drops[f"{blocked_by}_timeout"] += 1
        return out

    def _pose(self, reading: _Waiting) -> tuple[PosedReading | None, str | None]:
        """The posed reading; or (None, what it waits for); or (None, None) when it is dropped."""
        odometry = self.buffer.lookup(self.odom_frame, self.base_frame, reading.stamp_ns)
        if odometry.status in (LookupStatus.WAIT, LookupStatus.UNCONNECTED):
            return None, "odometry"
        if odometry.status is not LookupStatus.OK:
            self.drops[f"odometry_{odometry.status.value}"] += 1
            return None, None
        if reading.frame_id in ("", self.base_frame):
            rotation, lever = np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3)
        else:
            mounting = self.buffer.lookup(self.base_frame, reading.frame_id, reading.stamp_ns)
            if mounting.status in (LookupStatus.WAIT, LookupStatus.UNCONNECTED):
                return None, "mounting"
            if mounting.status is not LookupStatus.OK:
                self.drops[f"mounting_{mounting.status.value}"] += 1
                return None, None
            assert mounting.pose is not None
            rotation, lever = mounting.pose.orientation_xyzw, mounting.pose.position_m
        assert odometry.pose is not None
        yaw = float(yaw_from_quaternion(odometry.pose.orientation_xyzw))
        lever_xy = np.asarray(lever[:2], dtype=np.float64)
        attitude = levelled_attitude(odometry.pose.orientation_xyzw, rotation)
        return PosedReading(
            reading.stamp_ns,
            tracked_odometry(odometry.pose.position_m[:2], yaw, lever_xy),
            reading.field_ut,
            lever_xy,
            attitude,
        ), None


def feed_posed(localizer: Localizer, posed: PosedReading, last_odometry_ns: int | None) -> bool:
    """A posed reading into the filter as the node and ``gp-mapper localize`` feed it: the
    odometry of the sensor's point when its stamp is newer than ``last_odometry_ns`` (TF gives
    one pose per reading, and readings may share a stamp), then the reading with its attitude.
    Returns whether the odometry was added."""
    newer = last_odometry_ns is None or posed.stamp_ns > last_odometry_ns
    if newer:
        localizer.add_odometry(posed.stamp_ns, posed.odometry)
    localizer.add_field(posed.stamp_ns, posed.field_ut, posed.attitude)
    return newer


def seconds_to_ns(seconds: float) -> int:
    """A duration parameter [s] as integer nanoseconds."""
    return round(seconds * NS_PER_S)
