"""Test helpers for the IO layer: a tiny Aalto-format data set and hand-built bags.

The bags here are written message by message with rosbags directly, not with
gp_mapper.io.bag_writer, so the reader is checked against an independent writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

NS = 1_000_000_000
STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


class TinySequence(NamedTuple):
    """What was written into one tiny sequence's three CSV files (all rows, NaN included)."""

    time_s: np.ndarray
    loc_m: np.ndarray
    mag_ut: np.ndarray


def write_csv(path: Path, rows: np.ndarray) -> None:
    """Header-less CSV, as the Aalto files are; NaN written as ``NaN``."""
    rows = np.atleast_2d(rows)
    lines = (",".join("NaN" if np.isnan(v) else repr(float(v)) for v in row) for row in rows)
    path.write_text("\n".join(lines) + "\n")


def write_tiny_aalto(
    data_dir: Path, sensor: str = "invensense", nan_row: int | None = 3
) -> dict[int, TinySequence]:
    """Two short sequences in the Aalto layout under ``data_dir/sensor``.

    Sequence 1 drives along +x at 0.2 m/s, sequence 2 along +y; both at 50 Hz, 30 rows, times
    starting at 15.00 s and 20.00 s as in the real data. Sequence 2 has a NaN in row ``nan_row``
    of its mag file (None: no NaN).
    """
    folder = data_dir / sensor
    folder.mkdir(parents=True)
    rng = np.random.default_rng(20240611)
    rows = 30
    out: dict[int, TinySequence] = {}
    for seq, (t0, direction) in {1: (15.0, (1.0, 0.0)), 2: (20.0, (0.0, 1.0))}.items():
        time_s = np.round(t0 + 0.02 * np.arange(rows), 2)
        travelled = 0.2 * (time_s - time_s[0])
        loc = np.round(np.array([1.0, -1.0]) + travelled[:, None] * np.array(direction), 4)
        mag = np.round(np.array([-22.0, -2.5, -43.0]) + rng.normal(0.0, 3.0, (rows, 3)), 3)
        if seq == 2 and nan_row is not None:
            mag[nan_row, 1] = np.nan
        write_csv(folder / f"{seq}-time.csv", time_s[:, None])
        write_csv(folder / f"{seq}-loc.csv", loc)
        write_csv(folder / f"{seq}-mag.csv", mag)
        out[seq] = TinySequence(time_s, loc, mag)
    return out


class HandPose(NamedTuple):
    """A pose to hand-write: header stamp, frame, position [3], quaternion (x, y, z, w)."""

    stamp_ns: int
    position: tuple[float, float, float]
    quaternion: tuple[float, float, float, float]


class HandField(NamedTuple):
    """A reading to hand-write: header stamp, frame, field (T)."""

    stamp_ns: int
    field_t: tuple[float, float, float]
    frame_id: str = "imu_link"


def _header(ts: Any, stamp_ns: int, frame_id: str) -> Any:
    sec, nanosec = divmod(stamp_ns, NS)
    return ts.types["std_msgs/msg/Header"](
        stamp=ts.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame_id
    )


def _geometry_pose(ts: Any, pose: HandPose) -> Any:
    t = ts.types
    return t["geometry_msgs/msg/Pose"](
        position=t["geometry_msgs/msg/Point"](*pose.position),
        orientation=t["geometry_msgs/msg/Quaternion"](*pose.quaternion),
    )


def _pose_message(ts: Any, msgtype: str, pose: HandPose) -> Any:
    t = ts.types
    header = _header(ts, pose.stamp_ns, "map")
    if msgtype == "geometry_msgs/msg/PoseStamped":
        return t[msgtype](header=header, pose=_geometry_pose(ts, pose))
    with_cov = t["geometry_msgs/msg/PoseWithCovariance"](
        pose=_geometry_pose(ts, pose), covariance=np.arange(36, dtype=np.float64)
    )
    if msgtype == "geometry_msgs/msg/PoseWithCovarianceStamped":
        return t[msgtype](header=header, pose=with_cov)
    v = t["geometry_msgs/msg/Vector3"]
    twist = t["geometry_msgs/msg/TwistWithCovariance"](
        twist=t["geometry_msgs/msg/Twist"](linear=v(0.3, 0.0, 0.0), angular=v(0.0, 0.0, 0.1)),
        covariance=np.zeros(36),
    )
    return t[msgtype](header=header, child_frame_id="base_link", pose=with_cov, twist=twist)


def write_hand_bag(
    path: Path,
    *,
    storage: str = "mcap",
    fields: Sequence[HandField] = (),
    poses: Sequence[HandPose] = (),
    pose_msgtype: str = "geometry_msgs/msg/PoseStamped",
    mag_topic: str | None = "/imu/mag",
    pose_topic: str = "/pose",
    extra_topic: str | None = None,
    log_times: Sequence[int] | None = None,
) -> Path:
    """Write a bag message by message: readings then poses, each logged at its header stamp
    unless ``log_times`` (one per message, readings first) says otherwise. ``mag_topic=None``
    leaves the magnetometer topic out; ``extra_topic`` adds an unrelated std_msgs/String topic.
    """
    ts = get_typestore(Stores.ROS2_JAZZY)
    messages: list[tuple[str, str, Any, int]] = []
    for reading in fields:
        msg = ts.types["sensor_msgs/msg/MagneticField"](
            header=_header(ts, reading.stamp_ns, reading.frame_id),
            magnetic_field=ts.types["geometry_msgs/msg/Vector3"](*reading.field_t),
            magnetic_field_covariance=np.zeros(9),
        )
        messages.append((str(mag_topic), "sensor_msgs/msg/MagneticField", msg, reading.stamp_ns))
    for pose in poses:
        msg = _pose_message(ts, pose_msgtype, pose)
        messages.append((pose_topic, pose_msgtype, msg, pose.stamp_ns))
    if log_times is not None:
        messages = [(*m[:3], t) for m, t in zip(messages, log_times, strict=True)]
    if mag_topic is None:
        messages = [m for m in messages if m[1] != "sensor_msgs/msg/MagneticField"]
    with Writer(path, version=9, storage_plugin=STORAGES[storage]) as writer:
        connections = {}
        for topic, msgtype, _, _ in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=ts)
        if extra_topic:
            conn = writer.add_connection(extra_topic, "std_msgs/msg/String", typestore=ts)
            msg = ts.types["std_msgs/msg/String"](data="hello")
            writer.write(conn, 1, ts.serialize_cdr(msg, "std_msgs/msg/String"))
        for topic, msgtype, msg, log_time in sorted(messages, key=lambda m: m[3]):
            writer.write(connections[topic], log_time, ts.serialize_cdr(msg, msgtype))
    return path


def storage_file(bag: Path) -> Path:
    """The single .mcap or .db3 file of a bag directory."""
    (found,) = [p for p in bag.iterdir() if p.suffix in (".mcap", ".db3")]
    return found
