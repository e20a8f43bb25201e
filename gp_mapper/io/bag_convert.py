"""Convert the Aalto magnetometer recordings into a rosbag2 the mapper can replay.

Time line: the Aalto times are seconds since the start of each trial, so the sequences are laid
one after another on one clock. The first sample of the first sequence is stamped
:data:`BASE_EPOCH_NS`; each later sequence starts :data:`SEQUENCE_GAP_S` after the last sample
of the one before. Within a sequence the recorded sample spacing is kept exactly. Every stamp is
therefore strictly increasing and the same on every run.

Orientation, honestly: the Aalto authors compensated the robot orientation, so the recorded
field vectors are ALREADY in the room (map) frame, and no orientation was published with them.
The pose orientation written here is a heading estimated from the direction of travel
(:func:`gp_mapper.io.heading.heading_from_track`), not a measured attitude. By default
(``rotate_field_to_body=True``) the vector is rotated by minus the estimated heading, so that
a consumer rotating it by the pose (the node's per-axis and vector targets) gets the recorded
room-frame vector back exactly. With ``rotate_field_to_body=False`` the field is written as
recorded (room-frame components under the ``imu_link`` frame id), which only a consumer of the
norm may use: rotating it by the pose applies the heading twice. The norm is the same either
way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.pose_buffer import NS_PER_S

from .aalto import MICROTESLA_SENSORS, AaltoSequence, read_aalto_sequence
from .bag_writer import (
    BASE_EPOCH_NS,
    DEFAULT_MAG_TOPIC,
    DEFAULT_POSE_TOPIC,
    MAG_FRAME_ID,
    MAP_FRAME_ID,
    ODOM_FRAME_ID,
    TESLA_PER_MICROTESLA,
    FieldStream,
    PoseStream,
    pose_sample_mask,
    write_field_pose_bag,
)
from .errors import DatasetError
from .heading import heading_from_track, rotate_z, yaw_to_quaternion
from .odometry import OdometryErrors, simulate_odometry

__all__ = ["SEQUENCE_GAP_S", "ConvertSummary", "convert_aalto"]

_LOG = logging.getLogger(__name__)

# Gap between sequences: far above the mapper's pose gap (0.2 s) and pose wait (0.5 s), so no
# pose is ever interpolated across two sequences.
SEQUENCE_GAP_S = 5.0


class ConvertSummary(NamedTuple):
    """What :func:`convert_aalto` wrote.

    Attributes:
        out_bag: the bag directory.
        storage: ``"mcap"`` or ``"sqlite3"``.
        sensor: the Aalto sensor.
        sequences: the sequences written, in time-line order.
        num_field: magnetometer messages written.
        num_pose: pose messages written.
        start_ns: first stamp (ns since the epoch).
        end_ns: last stamp (ns since the epoch).
        nan_rows_dropped: rows skipped because a value was NaN or inf.
        sequence_starts_ns: the stamp of each sequence's first sample, same order as sequences.
    """

    out_bag: Path
    storage: str
    sensor: str
    sequences: tuple[int, ...]
    num_field: int
    num_pose: int
    start_ns: int
    end_ns: int
    nan_rows_dropped: int
    sequence_starts_ns: tuple[int, ...]

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last stamp (gaps between sequences included)."""
        return (self.end_ns - self.start_ns) / NS_PER_S


def convert_aalto(
    data_dir: str | os.PathLike[str],
    out_bag: str | os.PathLike[str],
    sensor: str = "invensense",
    sequences: Sequence[int] = (1, 2, 3, 4, 5),
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    *,
    max_seconds: float | None = None,
    pose_rate_hz: float | None = None,
    rotate_field_to_body: bool = True,
    force: bool = False,
    odometry_seed: int | None = None,
) -> ConvertSummary:
    """Write Aalto sequences as one rosbag2 of MagneticField (tesla) and PoseStamped messages.

    Args:
        data_dir: the folder holding one sub-folder per sensor (``invensense/`` ...).
        out_bag: the bag directory to create.
        sensor: Aalto sensor; only sensors logged in µT are accepted.
        sequences: sequence numbers, written in this order on one time line.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: topic of the ``sensor_msgs/msg/MagneticField`` messages (frame ``imu_link``).
        pose_topic: topic of the ``geometry_msgs/msg/PoseStamped`` messages (frame ``map``;
            position (x, y, 0) in metres, orientation = yaw from the direction of travel).
        max_seconds: keep only the first ``max_seconds`` seconds of each sequence (None: all).
        pose_rate_hz: pose rate in Hz; None writes one pose per magnetometer sample.
        rotate_field_to_body: rotate the room-frame field by minus the estimated heading (see the
            module docstring); False writes the recorded vector unchanged (a norm-only bag).
        force: replace an existing bag at ``out_bag``.
        odometry_seed: also write wheel odometry made from the track (``io.odometry`` at its
            default errors, this seed plus the sequence number) as ``nav_msgs/msg/Odometry``
            on ``/odom``, for localization; each sequence's odometry starts at the odom
            origin. None: no odometry.

    Returns:
        A summary of the bag written.

    Raises:
        DatasetError: the data directory, sensor or a sequence is missing or malformed, the
            sensor is not in µT, no sequences were given, or a slice is empty.
        BagError: ``out_bag`` exists and ``force`` is false, or the bag cannot be written.
    """
    if sensor not in MICROTESLA_SENSORS:
        raise DatasetError(
            f"sensor {sensor!r} is not logged in µT (those are {sorted(MICROTESLA_SENSORS)}); "
            "it cannot be written as tesla"
        )
    if not sequences:
        raise DatasetError("no sequences to convert")
    if max_seconds is not None and max_seconds <= 0.0:
        raise DatasetError(f"max_seconds must be positive, got {max_seconds}")

    field_parts: list[tuple[np.ndarray, np.ndarray]] = []
    pose_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    odom_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    starts: list[int] = []
    dropped_total = 0
    next_start_ns = BASE_EPOCH_NS
    for seq in sequences:
        data, dropped = read_aalto_sequence(data_dir, sensor, int(seq))
        if dropped:
            _LOG.warning("%s sequence %d: dropped %d non-finite rows", sensor, seq, dropped)
        dropped_total += dropped
        data = _first_seconds(data, max_seconds)
        stamps = next_start_ns + np.rint((data.time_s - data.time_s[0]) * NS_PER_S).astype(np.int64)
        yaw = heading_from_track(data.time_s, data.loc_m)
        field_t = data.mag_ut * TESLA_PER_MICROTESLA
        if rotate_field_to_body:
            field_t = rotate_z(field_t, -yaw)
        keep = pose_sample_mask(data.time_s, pose_rate_hz)
        position = np.column_stack([data.loc_m, np.zeros(data.loc_m.shape[0])])
        field_parts.append((stamps, field_t))
        pose_parts.append((stamps[keep], position[keep], yaw_to_quaternion(yaw[keep])))
        if odometry_seed is not None:
            odom = simulate_odometry(
                data.time_s, data.loc_m, yaw, OdometryErrors(), odometry_seed + int(seq)
            ).pose
            odom_xyz = np.column_stack([odom[:, :2], np.zeros(odom.shape[0])])
            odom_parts.append((stamps[keep], odom_xyz[keep], yaw_to_quaternion(odom[keep, 2])))
        starts.append(int(stamps[0]))
        next_start_ns = int(stamps[-1]) + round(SEQUENCE_GAP_S * NS_PER_S)

    field = FieldStream(
        stamps_ns=np.concatenate([p[0] for p in field_parts]),
        field_t=np.concatenate([p[1] for p in field_parts]),
        frame_id=MAG_FRAME_ID,
    )
    pose = PoseStream(
        stamps_ns=np.concatenate([p[0] for p in pose_parts]),
        position_m=np.concatenate([p[1] for p in pose_parts]),
        orientation_xyzw=np.concatenate([p[2] for p in pose_parts]),
        frame_id=MAP_FRAME_ID,
    )
    odometry = (
        PoseStream(
            stamps_ns=np.concatenate([p[0] for p in odom_parts]),
            position_m=np.concatenate([p[1] for p in odom_parts]),
            orientation_xyzw=np.concatenate([p[2] for p in odom_parts]),
            frame_id=ODOM_FRAME_ID,
        )
        if odom_parts
        else None
    )
    seq_text = ",".join(str(int(s)) for s in sequences)
    written = write_field_pose_bag(
        out_bag,
        field,
        pose,
        storage=storage,
        mag_topic=mag_topic,
        pose_topic=pose_topic,
        force=force,
        odometry=odometry,
        custom_data={
            "gp_mapper.source": f"Aalto magnetic-data, sensor {sensor}, sequences {seq_text}",
            "gp_mapper.field_frame": "body (rotated by -heading)"
            if rotate_field_to_body
            else "room (as recorded)",
        },
    )
    return ConvertSummary(
        out_bag=written.out_bag,
        storage=written.storage,
        sensor=sensor,
        sequences=tuple(int(s) for s in sequences),
        num_field=written.num_field,
        num_pose=written.num_pose,
        start_ns=written.start_ns,
        end_ns=written.end_ns,
        nan_rows_dropped=dropped_total,
        sequence_starts_ns=tuple(starts),
    )


def _first_seconds(data: AaltoSequence, max_seconds: float | None) -> AaltoSequence:
    if max_seconds is None:
        return data
    # Compared in whole nanoseconds, as stamped: 20.00 - 0.00 is 19.99999999 in float seconds.
    elapsed_ns = np.rint((data.time_s - data.time_s[0]) * NS_PER_S)
    keep = elapsed_ns < round(max_seconds * NS_PER_S)
    return AaltoSequence(data.time_s[keep], data.loc_m[keep], data.mag_ut[keep])
