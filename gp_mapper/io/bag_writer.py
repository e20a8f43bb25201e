"""Write a magnetometer + pose rosbag2 (MCAP or sqlite3) with rosbags.

The one layout every bag gp_mapper writes shares (Aalto conversion, synthetic demo runs):

- ``mag_topic`` (default ``/imu/mag``): ``sensor_msgs/msg/MagneticField``, field in tesla,
  ``header.frame_id`` = the sensor frame (``imu_link``);
- ``pose_topic`` (default ``/pose``): ``geometry_msgs/msg/PoseStamped`` (or
  ``PoseWithCovarianceStamped`` / ``nav_msgs/msg/Odometry``), ``header.frame_id`` = ``map``;
- optionally ``odometry_topic`` (default ``/odom``): ``nav_msgs/msg/Odometry`` in frame ``odom``
  (child ``base_link``), wheel odometry beside the ground-truth poses, for localization;
- every message's bag (log) time equals its header stamp; a pose and a reading with the same
  stamp are written pose first, so a reader never waits for the pose of a reading.

The bag is built in a temporary directory beside ``out_bag`` and renamed into place when
complete, so a failed or interrupted write leaves no half bag behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

from gp_mapper.mapping.pose_buffer import NS_PER_S

from .errors import BagError
from .pose_types import FIELD_MSGTYPE, POSE_MSGTYPES

__all__ = [
    "BASE_EPOCH_NS",
    "DEFAULT_MAG_TOPIC",
    "DEFAULT_POSE_TOPIC",
    "MAG_FRAME_ID",
    "MAP_FRAME_ID",
    "STORAGE_PLUGINS",
    "TESLA_PER_MICROTESLA",
    "BagSummary",
    "FieldStream",
    "PoseStream",
    "field_msg",
    "header_msg",
    "new_bag",
    "pose_sample_mask",
    "write_field_pose_bag",
]

_LOG = logging.getLogger(__name__)

DEFAULT_MAG_TOPIC = "/imu/mag"
DEFAULT_POSE_TOPIC = "/pose"
# REP-105 names: the fixed world frame and the IMU's own frame.
MAP_FRAME_ID = "map"
ODOM_FRAME_ID = "odom"
DEFAULT_ODOMETRY_TOPIC = "/odom"
MAG_FRAME_ID = "imu_link"
ODOM_CHILD_FRAME_ID = "base_link"

STORAGE_PLUGINS: Mapping[str, StoragePlugin] = MappingProxyType(
    {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
)
# 2023-11-14T22:13:20Z: a fixed, round epoch that the stamps of generated bags start from, so
# they carry realistic, reproducible ROS times (the Aalto data hold no absolute time).
BASE_EPOCH_NS = 1_700_000_000 * 1_000_000_000
TESLA_PER_MICROTESLA = 1e-6
# rosbag2 metadata version written (rosbags' latest, what Jazzy's ros2 bag writes).
BAG_VERSION = 9


class FieldStream(NamedTuple):
    """Magnetometer readings to write.

    Attributes:
        stamps_ns: [N] int64 header stamps, nanoseconds since the epoch.
        field_t: [N, 3] magnetic field in tesla, in the frame ``frame_id``.
        frame_id: the sensor frame written into every header.
        covariance_t2: [9] row-major covariance in T², or None for "unknown" (all zeros, as the
            MagneticField message documents).
    """

    stamps_ns: np.ndarray
    field_t: np.ndarray
    frame_id: str = MAG_FRAME_ID
    covariance_t2: np.ndarray | None = None


class PoseStream(NamedTuple):
    """Poses to write.

    Attributes:
        stamps_ns: [K] int64 header stamps, nanoseconds since the epoch.
        position_m: [K, 3] positions in metres, frame ``frame_id``.
        orientation_xyzw: [K, 4] unit quaternions (x, y, z, w).
        frame_id: the fixed frame written into every header.
    """

    stamps_ns: np.ndarray
    position_m: np.ndarray
    orientation_xyzw: np.ndarray
    frame_id: str = MAP_FRAME_ID


class BagSummary(NamedTuple):
    """What a bag writer wrote.

    Attributes:
        out_bag: the bag directory.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        pose_topic: pose topic.
        pose_type: ``"pose_stamped"``, ``"pose_with_covariance_stamped"`` or ``"odometry"``.
        num_field: magnetometer messages written.
        num_pose: pose messages written.
        start_ns: first stamp (ns since the epoch).
        end_ns: last stamp (ns since the epoch).
    """

    out_bag: Path
    storage: str
    mag_topic: str
    pose_topic: str
    pose_type: str
    num_field: int
    num_pose: int
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last stamp."""
        return (self.end_ns - self.start_ns) / NS_PER_S


def write_field_pose_bag(
    out_bag: str | os.PathLike[str],
    field: FieldStream,
    pose: PoseStream,
    *,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    force: bool = False,
    custom_data: Mapping[str, str] | None = None,
    odometry: PoseStream | None = None,
    odometry_topic: str = DEFAULT_ODOMETRY_TOPIC,
) -> BagSummary:
    """Write magnetometer readings and poses, merged in stamp order, into a new rosbag2.

    Args:
        out_bag: the bag directory to create.
        field: the magnetometer readings.
        pose: the poses.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: topic of the readings.
        pose_topic: topic of the poses.
        pose_type: key of :data:`POSE_MSGTYPES`.
        force: replace an existing bag at ``out_bag`` (a directory that is not a bag is never
            deleted).
        custom_data: string pairs stored in the bag metadata (``custom_data``).
        odometry: odometry poses (frame ``odom``) written as ``nav_msgs/msg/Odometry`` on
            ``odometry_topic``; None writes none.

    Returns:
        A summary of what was written.

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, the storage or pose type is
            unknown, the streams are malformed, or rosbags fails to write.
    """
    target = Path(out_bag)
    _lookup(STORAGE_PLUGINS, storage, "storage")  # fail on a bad name before checking data
    _lookup(_POSE_BUILDERS, pose_type, "pose type")  # a clear error for an unknown type
    stamps_f, field_t = _check_field(field)
    stamps_p, position, orientation = _check_pose(pose)
    streams = [(pose, pose_type, pose_topic, stamps_p, position, orientation)]
    if odometry is not None:
        streams.append((odometry, "odometry", odometry_topic, *_check_pose(odometry)))

    typestore = get_typestore(Stores.ROS2_JAZZY)
    with new_bag(target, storage=storage, force=force, custom_data=custom_data) as writer:
        mag_conn = writer.add_connection(mag_topic, FIELD_MSGTYPE, typestore=typestore)
        connections = [
            writer.add_connection(topic, POSE_MSGTYPES[kind], typestore=typestore)
            for _, kind, topic, *_ in streams
        ]
        covariance = np.zeros(9) if field.covariance_t2 is None else np.asarray(field.covariance_t2)
        # Every message as (stamp, stream, index): the streams' poses before the readings
        # at equal stamps (stream 0, 1, ... then the field as the last).
        stamps = np.concatenate([s[3] for s in streams] + [stamps_f])
        which = np.concatenate(
            [np.full(s[3].size, k) for k, s in enumerate(streams)]
            + [np.full(stamps_f.size, len(streams))]
        )
        index = np.concatenate([np.arange(s[3].size) for s in streams] + [np.arange(stamps_f.size)])
        order = np.lexsort((which, stamps))
        for k in order.tolist():
            stamp, i, stream = int(stamps[k]), int(index[k]), int(which[k])
            if stream == len(streams):
                msg = field_msg(typestore, stamp, field.frame_id, field_t[i], covariance)
                writer.write(mag_conn, stamp, typestore.serialize_cdr(msg, FIELD_MSGTYPE))
            else:
                poses, kind, _, _, where, turn = streams[stream]
                header = header_msg(typestore, stamp, poses.frame_id)
                msg = _POSE_BUILDERS[kind](typestore, header, where[i], turn[i])
                writer.write(
                    connections[stream], stamp,
                    typestore.serialize_cdr(msg, POSE_MSGTYPES[kind]),
                )  # fmt: skip

    summary = BagSummary(
        out_bag=target,
        storage=storage,
        mag_topic=mag_topic,
        pose_topic=pose_topic,
        pose_type=pose_type,
        num_field=int(stamps_f.size),
        num_pose=int(stamps_p.size),
        start_ns=int(min(stamps_f.min(initial=2**63 - 1), stamps_p.min(initial=2**63 - 1))),
        end_ns=int(max(stamps_f.max(initial=0), stamps_p.max(initial=0))),
    )
    _LOG.info(
        "wrote %s (%s): %d field, %d pose messages over %.1f s",
        target,
        storage,
        summary.num_field,
        summary.num_pose,
        summary.duration_s,
    )
    return summary


@contextmanager
def new_bag(
    out_bag: str | os.PathLike[str],
    *,
    storage: str = "mcap",
    force: bool = False,
    custom_data: Mapping[str, str] | None = None,
) -> Iterator[Writer]:
    """An open rosbags ``Writer`` on a new bag that appears at ``out_bag`` only when complete.

    The bag is written in a temporary directory beside ``out_bag`` and renamed into place when
    the ``with`` block ends without an error (an old bag is replaced last, under ``force``), so
    a failed or interrupted write leaves no half bag behind.

    Args:
        out_bag: the bag directory to create.
        storage: ``"mcap"`` or ``"sqlite3"``.
        force: replace an existing bag at ``out_bag`` (a directory that is not a bag is never
            deleted).
        custom_data: string pairs stored in the bag metadata (``custom_data``).

    Yields:
        The writer, open, with ``custom_data`` set and no connections.

    Raises:
        BagError: the storage is unknown, ``out_bag`` exists and ``force`` is false, or rosbags
            or the file system fails.
    """
    target = Path(out_bag)
    plugin = _lookup(STORAGE_PLUGINS, storage, "storage")
    _check_target(target, force)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=_existing_parent(target)))
    try:
        staged = staging / target.name
        with Writer(staged, version=BAG_VERSION, storage_plugin=plugin) as writer:
            for key, value in (custom_data or {}).items():
                writer.set_custom_data(key, value)
            yield writer
        _move_into_place(staged, target, force)
    except (WriterError, OSError) as err:
        raise BagError(f"{target}: could not write the bag ({err})") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def pose_sample_mask(time_s: np.ndarray, rate_hz: float | None) -> np.ndarray:
    """Which samples carry a pose when poses are thinned to ``rate_hz``.

    Keeps the first sample of every 1/rate_hz slot (slots counted from the first sample), so the
    kept stamps are a subset of the sample stamps.

    Args:
        time_s: [N] sample times in seconds, increasing.
        rate_hz: pose rate in Hz, or None to keep every sample.

    Returns:
        [N] bool mask.
    """
    time_s = np.asarray(time_s, dtype=np.float64)
    if rate_hz is None:
        return np.ones(time_s.size, dtype=bool)
    if rate_hz <= 0.0:
        raise ValueError(f"pose rate must be positive, got {rate_hz} Hz")
    # Half a nanosecond of slack keeps samples exactly on a slot boundary in that slot despite
    # the float error of the multiplication.
    slot = np.floor((time_s - time_s[0]) * rate_hz + 0.5e-9).astype(np.int64)
    mask = np.ones(time_s.size, dtype=bool)
    mask[1:] = slot[1:] != slot[:-1]
    return mask


def _lookup(table: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return table[key]
    except KeyError:
        raise BagError(f"unknown {what} {key!r}; expected one of {sorted(table)}") from None


def _check_field(field: FieldStream) -> tuple[np.ndarray, np.ndarray]:
    stamps = np.asarray(field.stamps_ns, dtype=np.int64)
    values = np.asarray(field.field_t, dtype=np.float64)
    if stamps.ndim != 1 or values.shape != (stamps.size, 3):
        raise BagError(
            f"field stream: expected stamps_ns [N], field_t [N, 3]; got {stamps.shape}, "
            f"{values.shape}"
        )
    if not np.isfinite(values).all():
        raise BagError("field stream: field_t holds NaN or inf")
    if field.covariance_t2 is not None and np.shape(field.covariance_t2) != (9,):
        raise BagError(
            f"field stream: covariance_t2 must be [9], got {np.shape(field.covariance_t2)}"
        )
    _check_stamps(stamps, "field stream")
    return stamps, values


def _check_pose(pose: PoseStream) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    stamps = np.asarray(pose.stamps_ns, dtype=np.int64)
    position = np.asarray(pose.position_m, dtype=np.float64)
    orientation = np.asarray(pose.orientation_xyzw, dtype=np.float64)
    if (
        stamps.ndim != 1
        or position.shape != (stamps.size, 3)
        or orientation.shape != (stamps.size, 4)
    ):
        raise BagError(
            "pose stream: expected stamps_ns [K], position_m [K, 3], orientation_xyzw [K, 4]; got "
            f"{stamps.shape}, {position.shape}, {orientation.shape}"
        )
    if not (np.isfinite(position).all() and np.isfinite(orientation).all()):
        raise BagError("pose stream: position or orientation holds NaN or inf")
    _check_stamps(stamps, "pose stream")
    return stamps, position, orientation


def _check_stamps(stamps: np.ndarray, what: str) -> None:
    if stamps.size and stamps.min() < 0:
        raise BagError(f"{what}: negative stamps")
    if (bad := np.flatnonzero(np.diff(stamps) <= 0)).size:
        raise BagError(f"{what}: stamps do not increase at index {int(bad[0]) + 1}")


def _existing_parent(target: Path) -> Path:
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def _is_bag_dir(path: Path) -> bool:
    return path.is_dir() and (path / "metadata.yaml").is_file()


def _check_target(target: Path, force: bool) -> None:
    if not target.exists() and not target.is_symlink():
        return
    if not force:
        raise BagError(f"{target} exists already; not overwriting it (pass force=True / --force)")
    if target.is_dir() and not _is_bag_dir(target) and any(target.iterdir()):
        raise BagError(
            f"{target} is a non-empty directory without metadata.yaml, not a bag; "
            "refusing to replace it even with force"
        )


def _move_into_place(staged: Path, target: Path, force: bool) -> None:
    """Rename the finished bag to ``target``, replacing an old one (under ``force``) last."""
    if target.exists() or target.is_symlink():
        _check_target(target, force)
        old = staged.parent / f"{target.name}.old"
        target.rename(old)  # same file system: atomic; `old` goes with the staging directory
        try:
            staged.rename(target)
        except OSError:
            old.rename(target)  # put the previous bag back before reporting the failure
            raise
        return
    staged.rename(target)


def header_msg(typestore: Typestore, stamp_ns: int, frame_id: str) -> Any:
    """A ``std_msgs/msg/Header`` at ``stamp_ns`` (ns since the epoch) in ``frame_id``."""
    types = typestore.types
    sec, nanosec = divmod(stamp_ns, NS_PER_S)
    return types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame_id
    )


def field_msg(
    typestore: Typestore, stamp_ns: int, frame_id: str, field_t: np.ndarray, covariance: np.ndarray
) -> Any:
    """A ``sensor_msgs/msg/MagneticField``: ``field_t`` [3] in tesla, ``covariance`` [9] in T²."""
    types = typestore.types
    vector = types["geometry_msgs/msg/Vector3"](
        x=float(field_t[0]), y=float(field_t[1]), z=float(field_t[2])
    )
    return types[FIELD_MSGTYPE](
        header=header_msg(typestore, stamp_ns, frame_id),
        magnetic_field=vector,
        magnetic_field_covariance=covariance,
    )


def _pose(typestore: Typestore, position: np.ndarray, orientation: np.ndarray) -> Any:
    types = typestore.types
    return types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](
            x=float(position[0]), y=float(position[1]), z=float(position[2])
        ),
        orientation=types["geometry_msgs/msg/Quaternion"](
            x=float(orientation[0]),
            y=float(orientation[1]),
            z=float(orientation[2]),
            w=float(orientation[3]),
        ),
    )


def _pose_stamped(typestore: Typestore, header: Any, position: np.ndarray, q: np.ndarray) -> Any:
    return typestore.types["geometry_msgs/msg/PoseStamped"](
        header=header, pose=_pose(typestore, position, q)
    )


def _pose_with_covariance(typestore: Typestore, position: np.ndarray, q: np.ndarray) -> Any:
    # Zero covariance: the writer knows no pose uncertainty (the Aalto poses are Vicon truth).
    return typestore.types["geometry_msgs/msg/PoseWithCovariance"](
        pose=_pose(typestore, position, q), covariance=np.zeros(36)
    )


def _pose_with_covariance_stamped(
    typestore: Typestore, header: Any, position: np.ndarray, q: np.ndarray
) -> Any:
    return typestore.types["geometry_msgs/msg/PoseWithCovarianceStamped"](
        header=header, pose=_pose_with_covariance(typestore, position, q)
    )


def _odometry(typestore: Typestore, header: Any, position: np.ndarray, q: np.ndarray) -> Any:
    # The twist is not estimated: it is written as zero and must not be read as "standing still".
    types = typestore.types
    zero = types["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0)
    twist = types["geometry_msgs/msg/TwistWithCovariance"](
        twist=types["geometry_msgs/msg/Twist"](linear=zero, angular=zero), covariance=np.zeros(36)
    )
    return types["nav_msgs/msg/Odometry"](
        header=header,
        child_frame_id=ODOM_CHILD_FRAME_ID,
        pose=_pose_with_covariance(typestore, position, q),
        twist=twist,
    )


_POSE_BUILDERS: Mapping[str, Callable[[Typestore, Any, np.ndarray, np.ndarray], Any]] = (
    MappingProxyType(
        {
            "pose_stamped": _pose_stamped,
            "pose_with_covariance_stamped": _pose_with_covariance_stamped,
            "odometry": _odometry,
        }
    )
)
