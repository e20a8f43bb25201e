"""A robot's recording of the synthetic room: the magnetometer in its own frame, and TF.

What a real robot records (REP-105) instead of a pose of the sensor itself:

- ``/tf`` (``tf2_msgs/msg/TFMessage``, one transform per message): ``odom -> base_link`` from
  wheel odometry that drifts (a distance scale error and a gyro bias), and ``map -> odom``
  from a localizer at a few Hz, each one the correction that puts the base back on its true
  pose (within the localizer's noise) at that stamp, so ``map -> odom`` jumps at every one;
- ``/tf_static``: ``base_link -> imu_link``, the magnetometer's mounting (a lever arm and a
  yaw), once at the start and offered transient local, as ``static_transform_publisher`` does;
- the magnetometer (``sensor_msgs/msg/MagneticField``, tesla) in frame ``imu_link``: the field
  at the SENSOR's position turned into the sensor's axes, plus a hard-iron offset fixed in
  those axes (the robot's own magnetisation, which a map must not absorb) and white noise.

The base drives the synthetic room's coverage walk (:func:`~gp_mapper.io.synthetic.coverage_track`).
:func:`write_robot_pose_bag` writes the same walk in the pose-topic layout (the sensor's exact
pose in ``map``, the same readings): the baseline a TF-reading mapper is compared with.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

from gp_mapper.mapping.localization.motion import wrap_angle
from gp_mapper.mapping.pose_buffer import NS_PER_S

from .bag_writer import (
    BASE_EPOCH_NS,
    DEFAULT_MAG_TOPIC,
    DEFAULT_POSE_TOPIC,
    MAG_FRAME_ID,
    MAP_FRAME_ID,
    ODOM_CHILD_FRAME_ID,
    ODOM_FRAME_ID,
    TESLA_PER_MICROTESLA,
    BagSummary,
    FieldStream,
    PoseStream,
    field_msg,
    header_msg,
    new_bag,
    write_field_pose_bag,
)
from .errors import BagError
from .heading import rotate_z, yaw_to_quaternion
from .odometry import OdometryErrors, simulate_odometry
from .pose_types import FIELD_MSGTYPE, TF_MSGTYPE, TF_STATIC_TOPIC, TF_TOPIC
from .synthetic import (
    DEFAULT_NOISE_UT,
    DEFAULT_SPEED_MPS,
    SyntheticWorld,
    coverage_track,
    make_synthetic_world,
)

__all__ = [
    "BASE_FRAME_ID",
    "DEFAULT_HARD_IRON_UT",
    "TF_MSGTYPE",
    "TF_STATIC_QOS",
    "TF_STATIC_TOPIC",
    "TF_TOPIC",
    "RobotBagSummary",
    "RobotRun",
    "simulate_robot_run",
    "write_robot_bag",
    "write_robot_pose_bag",
    "write_synthetic_robot_bag",
]

# REP-105's robot body frame; the odometry writer's child frame is the same.
BASE_FRAME_ID = ODOM_CHILD_FRAME_ID

# rmw's RMW_DURATION_INFINITE as rosbag2 serialises it (INT64_MAX ns in sec + nsec).
_INFINITE = QosTime(sec=9_223_372_036, nsec=854_775_807)
# What tf2_ros's StaticTransformBroadcaster offers (StaticBroadcasterQoS: depth 1, reliable,
# transient local): a player that reads it from the metadata re-offers it, so a subscriber
# that joins late still gets the static transforms.
TF_STATIC_QOS = Qos(
    history=QosHistory.KEEP_LAST,
    depth=1,
    reliability=QosReliability.RELIABLE,
    durability=QosDurability.TRANSIENT_LOCAL,
    deadline=_INFINITE,
    lifespan=_INFINITE,
    liveliness=QosLiveliness.AUTOMATIC,
    liveliness_lease_duration=_INFINITE,
    avoid_ros_namespace_conventions=False,
)

# A magnetometer at IMU rates (100 Hz, a typical MEMS IMU's magnetometer output).
DEFAULT_ROBOT_RATE_HZ = 100.0
# The sensor 0.3 m ahead of the base's centre, turned a quarter turn (x of the sensor along the
# robot's left): a mounting that a mapper reading only positions, or only yaw, gets wrong.
DEFAULT_LEVER_ARM_M: tuple[float, float, float] = (0.3, 0.0, 0.0)
DEFAULT_MOUNT_YAW_RAD = math.pi / 2.0
# A hard-iron offset of ~15 µT, in the range of a small robot's motors and battery (tens of µT
# are common; the Earth field is ~50 µT).
DEFAULT_HARD_IRON_UT: tuple[float, float, float] = (12.0, -8.0, 5.0)
# Wheel odometry at a typical diff-drive controller's rate, with a 3 % distance scale error
# (worn or mis-measured wheels) and the bias of a MEMS gyro calibrated only at start-up. On the
# room's back-and-forth walk the scale error mostly cancels and the heading error does not:
# 0.25 °/s puts the dead-reckoned position 3-4 % of the distance travelled off at its worst, on
# runs of 1 to 6 minutes (0.1 °/s: ~1 %, 0.5 °/s: 5-7 %).
DEFAULT_ODOM_RATE_HZ = 50.0
DEFAULT_ODOM_SCALE_ERROR = 0.03
DEFAULT_GYRO_BIAS_DPS = 0.25
# A scan-matching localizer correcting map -> odom at 2 Hz to within 2 cm and ~0.3°.
DEFAULT_MAP_ODOM_RATE_HZ = 2.0
DEFAULT_LOCALIZER_NOISE_M = 0.02
DEFAULT_LOCALIZER_NOISE_RAD = 0.005

# Slack on "stamp k / rate is at or past t" against the float error of the product, s.
_STAMP_SLACK_S = 1e-9
# Independent random streams of one seed: magnetometer noise, odometry, localizer.
_NOISE_STREAM, _ODOMETRY_STREAM, _LOCALIZER_STREAM = range(3)
_STREAMS = 3


class RobotRun(NamedTuple):
    """A simulated robot run: the truth and what the robot records.

    Planar poses are (x, y, yaw): metres, metres, radians.

    Attributes:
        time_s: [N] magnetometer stamps, seconds since the start.
        base_xy_m: [N, 2] true ``base_link`` position in ``map``, metres.
        base_yaw_rad: [N] true ``base_link`` yaw in ``map``, radians.
        sensor_position_m: [N, 3] true ``imu_link`` position in ``map`` (z = the lever arm's),
            metres.
        sensor_orientation_xyzw: [N, 4] true ``imu_link`` orientation in ``map``.
        mag_ut: [N, 3] the readings, ``imu_link`` axes, µT (hard iron and noise included).
        lever_arm_m: [3] ``imu_link`` origin in ``base_link``, metres.
        mount_yaw_rad: yaw of ``imu_link`` in ``base_link``, radians.
        hard_iron_ut: [3] constant offset of the readings in ``imu_link`` axes, µT.
        noise_ut: white noise per axis of the readings, µT.
        odom_time_s: [K] odometry stamps, seconds since the start (the last at or past the
            last reading's, so that every reading lies between two, as a lookup that
            interpolates and never extrapolates, tf2's, needs).
        odom_pose: [K, 3] ``odom -> base_link`` as the wheel odometry has it.
        map_odom_time_s: [J] localizer correction stamps, seconds since the start (the last
            at or past the last reading's).
        map_odom_pose: [J, 3] ``map -> odom`` published at each correction.
    """

    time_s: np.ndarray
    base_xy_m: np.ndarray
    base_yaw_rad: np.ndarray
    sensor_position_m: np.ndarray
    sensor_orientation_xyzw: np.ndarray
    mag_ut: np.ndarray
    lever_arm_m: np.ndarray
    mount_yaw_rad: float
    hard_iron_ut: np.ndarray
    noise_ut: float
    odom_time_s: np.ndarray
    odom_pose: np.ndarray
    map_odom_time_s: np.ndarray
    map_odom_pose: np.ndarray


class RobotBagSummary(NamedTuple):
    """What :func:`write_robot_bag` wrote.

    Attributes:
        out_bag: the bag directory.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        num_field: magnetometer messages.
        num_odom: ``odom -> base_link`` messages on ``/tf``.
        num_map_odom: ``map -> odom`` messages on ``/tf``.
        num_static: messages on ``/tf_static``.
        start_ns: first stamp (ns since the epoch).
        end_ns: last stamp (ns since the epoch).
    """

    out_bag: Path
    storage: str
    mag_topic: str
    num_field: int
    num_odom: int
    num_map_odom: int
    num_static: int
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last stamp."""
        return (self.end_ns - self.start_ns) / NS_PER_S


def simulate_robot_run(
    world: SyntheticWorld,
    duration_s: float,
    rate_hz: float = DEFAULT_ROBOT_RATE_HZ,
    seed: int = 0,
    *,
    speed_mps: float = DEFAULT_SPEED_MPS,
    noise_ut: float = DEFAULT_NOISE_UT,
    lever_arm_m: tuple[float, float, float] | np.ndarray = DEFAULT_LEVER_ARM_M,
    mount_yaw_rad: float = DEFAULT_MOUNT_YAW_RAD,
    hard_iron_ut: tuple[float, float, float] | np.ndarray = DEFAULT_HARD_IRON_UT,
    odom_rate_hz: float = DEFAULT_ODOM_RATE_HZ,
    odom_scale_error: float = DEFAULT_ODOM_SCALE_ERROR,
    gyro_bias_dps: float = DEFAULT_GYRO_BIAS_DPS,
    map_odom_rate_hz: float = DEFAULT_MAP_ODOM_RATE_HZ,
    localizer_noise_m: float = DEFAULT_LOCALIZER_NOISE_M,
    localizer_noise_rad: float = DEFAULT_LOCALIZER_NOISE_RAD,
) -> RobotRun:
    """Drive the room's coverage walk with a mounted magnetometer, odometry and a localizer.

    The base follows :func:`~gp_mapper.io.synthetic.coverage_track` (yaw = smoothed direction
    of travel), sampled every 1/rate_hz s; between those samples the true pose is their linear
    interpolant (yaw unwrapped), which is where the odometry and the localizer read it. The
    odometry (:func:`~gp_mapper.io.odometry.simulate_odometry`) integrates the true increments
    with the scale error and the gyro bias (their signs drawn from the seed) from (0, 0, 0):
    ``odom`` is the base's start pose. Each correction draws the base pose with the
    localizer's noise and publishes the ``map -> odom`` that composes with the odometry at
    that stamp to it.

    Args:
        world: the field to read.
        duration_s: run length in seconds.
        rate_hz: magnetometer rate in Hz.
        seed: seed of the noise, the odometry's errors and the localizer's.
        speed_mps: speed of the base, m/s.
        noise_ut: white noise per axis of the readings, µT.
        lever_arm_m: [3] sensor origin in ``base_link``, metres.
        mount_yaw_rad: sensor yaw in ``base_link``, radians.
        hard_iron_ut: [3] offset of the readings in the sensor's axes, µT.
        odom_rate_hz: odometry rate in Hz.
        odom_scale_error: relative error of the odometry's distance.
        gyro_bias_dps: error of the odometry's turn rate, °/s.
        map_odom_rate_hz: localizer correction rate in Hz.
        localizer_noise_m: standard deviation of a correction's x and y, metres.
        localizer_noise_rad: standard deviation of a correction's yaw, radians.

    Returns:
        The run: ``rotate_z(mag_ut - hard_iron_ut - noise, yaw of sensor_orientation_xyzw)
        == world.field_at(sensor_position_m)``.

    Raises:
        ValueError: a non-positive duration, rate or speed, a negative noise or error, or a
            lever arm or hard iron that is not a finite 3-vector.
    """
    lever = _finite_vector(lever_arm_m, "lever_arm_m")
    hard_iron = _finite_vector(hard_iron_ut, "hard_iron_ut")
    positive = {
        "duration_s": duration_s,
        "rate_hz": rate_hz,
        "speed_mps": speed_mps,
        "odom_rate_hz": odom_rate_hz,
        "map_odom_rate_hz": map_odom_rate_hz,
    }
    non_negative = {
        "noise_ut": noise_ut,
        "odom_scale_error": odom_scale_error,
        "gyro_bias_dps": gyro_bias_dps,
        "localizer_noise_m": localizer_noise_m,
        "localizer_noise_rad": localizer_noise_rad,
    }
    for name, value in positive.items():
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"{name} must be positive and finite; got {value}")
    for name, value in non_negative.items():
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"{name} must be non-negative and finite; got {value}")
    if not math.isfinite(mount_yaw_rad):
        raise ValueError(f"mount_yaw_rad must be finite; got {mount_yaw_rad}")
    streams = np.random.SeedSequence(seed).spawn(_STREAMS)

    time_s = np.arange(int(np.floor(duration_s * rate_hz)) + 1) / rate_hz
    odom_time = _stamps_to(time_s[-1], odom_rate_hz, past=True)
    map_odom_time = _stamps_to(time_s[-1], map_odom_rate_hz, past=True)
    # The true track on the magnetometer's grid, extended to the last transform's stamp: the
    # readings' stamps are its first N samples.
    end = max(float(odom_time[-1]), float(map_odom_time[-1]))
    track_time = _stamps_to(end, rate_hz, past=True)
    track_xy, track_yaw = coverage_track(world.bounds_m, track_time, speed_mps)
    track = np.column_stack([track_xy, np.unwrap(track_yaw)])
    n = time_s.size
    base = track[:n]

    c, s = np.cos(base[:, 2]), np.sin(base[:, 2])
    sensor_position = np.column_stack(
        [
            base[:, 0] + c * lever[0] - s * lever[1],
            base[:, 1] + s * lever[0] + c * lever[1],
            np.full(n, lever[2]),
        ]
    )
    sensor_yaw = base[:, 2] + mount_yaw_rad
    field_map = world.field_at(sensor_position)
    noise = np.random.default_rng(streams[_NOISE_STREAM]).normal(0.0, noise_ut, size=(n, 3))
    mag = rotate_z(field_map, -sensor_yaw) + hard_iron + noise

    odom_truth = _interpolate_pose(track_time, track, odom_time)
    errors = OdometryErrors(
        scale=odom_scale_error, gyro_bias_deg_s=gyro_bias_dps, gyro_walk_deg_s=0.0, step_sd=0.0
    )
    odometry_seed = int(streams[_ODOMETRY_STREAM].generate_state(1)[0])
    odom = simulate_odometry(
        odom_time, odom_truth[:, :2], odom_truth[:, 2], errors, odometry_seed
    ).pose

    rng = np.random.default_rng(streams[_LOCALIZER_STREAM])
    sigma = np.array([localizer_noise_m, localizer_noise_m, localizer_noise_rad])
    estimate = _interpolate_pose(track_time, track, map_odom_time)
    estimate = estimate + rng.normal(size=estimate.shape) * sigma
    odom_then = _interpolate_pose(odom_time, _unwrapped(odom), map_odom_time)
    map_odom = _compose(estimate, _invert(odom_then))

    return RobotRun(
        time_s=time_s,
        base_xy_m=base[:, :2].copy(),
        base_yaw_rad=np.asarray(wrap_angle(base[:, 2])),
        sensor_position_m=sensor_position,
        sensor_orientation_xyzw=yaw_to_quaternion(np.asarray(wrap_angle(sensor_yaw))),
        mag_ut=mag,
        lever_arm_m=lever,
        mount_yaw_rad=float(mount_yaw_rad),
        hard_iron_ut=hard_iron,
        noise_ut=float(noise_ut),
        odom_time_s=odom_time,
        odom_pose=odom,
        map_odom_time_s=map_odom_time,
        map_odom_pose=map_odom,
    )


def write_robot_bag(
    out_bag: str | os.PathLike[str],
    run: RobotRun,
    *,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    force: bool = False,
    custom_data: Mapping[str, str] | None = None,
) -> RobotBagSummary:
    """Write a robot run as a robot records it: the magnetometer, ``/tf`` and ``/tf_static``.

    Stamps are ``BASE_EPOCH_NS`` plus the run's times; every message's bag time is its header
    stamp, and at equal stamps the transforms come before the reading (static, then
    ``map -> odom``, then ``odom -> base_link``), so a reader has the chain of every reading
    when it reaches it. ``/tf_static`` holds one message at the first stamp and is offered
    with :data:`TF_STATIC_QOS` (``offered_qos_profiles`` in the metadata). The readings'
    covariance is the white noise's (the hard iron is a bias, not noise).

    Args:
        out_bag: the bag directory to create.
        run: the run (:func:`simulate_robot_run`).
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        force: replace an existing bag at ``out_bag``.
        custom_data: string pairs for the metadata, beside the mounting and hard iron that
            are always recorded there (``gp_mapper.*``).

    Returns:
        A summary of what was written.

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, the storage is unknown, or the
            bag cannot be written.
    """
    target = Path(out_bag)
    field = _field_stream(run)
    covariance = np.asarray(field.covariance_t2)
    static_ns = np.array([BASE_EPOCH_NS], dtype=np.int64)
    map_odom_ns, odom_ns = _stamps_ns(run.map_odom_time_s), _stamps_ns(run.odom_time_s)
    mount = np.array([*run.lever_arm_m[:2], run.mount_yaw_rad])
    # (stamp, kind, index) of every message; kinds in the order written at equal stamps.
    parts = (static_ns, map_odom_ns, odom_ns, field.stamps_ns)
    stamps = np.concatenate(parts)
    kind = np.concatenate([np.full(p.size, k) for k, p in enumerate(parts)])
    index = np.concatenate([np.arange(p.size) for p in parts])
    order = np.lexsort((kind, stamps))
    transforms = (
        (MAP_FRAME_ID, ODOM_FRAME_ID, run.map_odom_pose),
        (ODOM_FRAME_ID, BASE_FRAME_ID, run.odom_pose),
    )

    typestore = get_typestore(Stores.ROS2_JAZZY)
    metadata = {**_mounting_metadata(run), **(custom_data or {})}
    with new_bag(target, storage=storage, force=force, custom_data=metadata) as writer:
        static_conn = writer.add_connection(
            TF_STATIC_TOPIC, TF_MSGTYPE, typestore=typestore, offered_qos_profiles=[TF_STATIC_QOS]
        )
        tf_conn = writer.add_connection(TF_TOPIC, TF_MSGTYPE, typestore=typestore)
        mag_conn = writer.add_connection(mag_topic, FIELD_MSGTYPE, typestore=typestore)
        for k in order.tolist():
            stamp, i = int(stamps[k]), int(index[k])
            if kind[k] == 0:
                msg = _tf_message(
                    typestore, stamp, BASE_FRAME_ID, MAG_FRAME_ID, mount, run.lever_arm_m[2]
                )
                writer.write(static_conn, stamp, typestore.serialize_cdr(msg, TF_MSGTYPE))
            elif kind[k] == len(parts) - 1:
                msg = field_msg(typestore, stamp, field.frame_id, field.field_t[i], covariance)
                writer.write(mag_conn, stamp, typestore.serialize_cdr(msg, FIELD_MSGTYPE))
            else:
                parent, child, poses = transforms[int(kind[k]) - 1]
                msg = _tf_message(typestore, stamp, parent, child, poses[i], 0.0)
                writer.write(tf_conn, stamp, typestore.serialize_cdr(msg, TF_MSGTYPE))

    return RobotBagSummary(
        out_bag=target,
        storage=storage,
        mag_topic=mag_topic,
        num_field=int(field.stamps_ns.size),
        num_odom=int(odom_ns.size),
        num_map_odom=int(map_odom_ns.size),
        num_static=int(static_ns.size),
        start_ns=int(stamps.min()),
        end_ns=int(stamps.max()),
    )


def write_robot_pose_bag(
    out_bag: str | os.PathLike[str],
    run: RobotRun,
    *,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    force: bool = False,
    custom_data: Mapping[str, str] | None = None,
) -> BagSummary:
    """Write the same run in the pose-topic layout: the sensor's exact pose in ``map``.

    The readings are those of :func:`write_robot_bag` (same stamps, values, frame and
    covariance); the pose topic carries the true ``imu_link`` pose at every reading's stamp.
    A map from this bag is what a map from the robot bag is compared with: same walk, exact
    sensor pose, no TF.

    Args:
        out_bag: the bag directory to create.
        run: the run (:func:`simulate_robot_run`).
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        pose_topic: pose topic.
        pose_type: key of :data:`~gp_mapper.io.pose_types.POSE_MSGTYPES`.
        force: replace an existing bag at ``out_bag``.
        custom_data: string pairs for the metadata, beside the mounting and hard iron.

    Returns:
        A summary of what was written.

    Raises:
        BagError: as :func:`~gp_mapper.io.bag_writer.write_field_pose_bag`.
    """
    field = _field_stream(run)
    pose = PoseStream(
        stamps_ns=field.stamps_ns,
        position_m=run.sensor_position_m,
        orientation_xyzw=run.sensor_orientation_xyzw,
        frame_id=MAP_FRAME_ID,
    )
    return write_field_pose_bag(
        out_bag, field, pose, storage=storage, mag_topic=mag_topic, pose_topic=pose_topic,
        pose_type=pose_type, force=force,
        custom_data={**_mounting_metadata(run), **(custom_data or {})},
    )  # fmt: skip


def write_synthetic_robot_bag(
    out_bag: str | os.PathLike[str],
    *,
    seed: int = 0,
    duration_s: float = 180.0,
    rate_hz: float = DEFAULT_ROBOT_RATE_HZ,
    noise_ut: float = DEFAULT_NOISE_UT,
    hard_iron_ut: tuple[float, float, float] | np.ndarray = DEFAULT_HARD_IRON_UT,
    world: SyntheticWorld | None = None,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    force: bool = False,
) -> RobotBagSummary:
    """Simulate a robot run through the synthetic room and write it (:func:`write_robot_bag`).

    Args:
        out_bag: the bag directory to create.
        seed: seed of the world (unless ``world`` is given) and of the run.
        duration_s: run length in seconds.
        rate_hz: magnetometer rate in Hz.
        noise_ut: white noise per axis of the readings, µT.
        hard_iron_ut: [3] offset of the readings in the sensor's axes, µT.
        world: the world to drive through; None builds ``make_synthetic_world(seed)``.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        force: replace an existing bag at ``out_bag``.

    Returns:
        A summary of the bag written.

    Raises:
        ValueError: as :func:`simulate_robot_run`.
        BagError: as :func:`write_robot_bag`.
    """
    world = make_synthetic_world(seed) if world is None else world
    run = simulate_robot_run(
        world, duration_s, rate_hz, seed, noise_ut=noise_ut, hard_iron_ut=hard_iron_ut
    )
    source = f"synthetic robot run: world seed {world.seed}, run seed {seed}"
    return write_robot_bag(
        out_bag, run, storage=storage, mag_topic=mag_topic, force=force,
        custom_data={"gp_mapper.source": source},
    )  # fmt: skip


def _finite_vector(value: tuple[float, float, float] | np.ndarray, name: str) -> np.ndarray:
    vector = np.asarray(value, dtype=np.float64)
    if vector.shape != (3,) or not np.isfinite(vector).all():
        raise ValueError(f"{name} must be a finite 3-vector; got {value!r}")
    return vector


def _stamps_to(end_s: float, rate_hz: float, *, past: bool) -> np.ndarray:
    """Times k / rate_hz from 0 whose last is at or before ``end_s``, or (``past``) the first
    at or after it, seconds."""
    slots = end_s * rate_hz
    if past:
        count = math.ceil(slots - _STAMP_SLACK_S * rate_hz)
    else:
        count = math.floor(slots + _STAMP_SLACK_S * rate_hz)
    return np.arange(count + 1) / rate_hz


def _unwrapped(pose: np.ndarray) -> np.ndarray:
    return np.column_stack([pose[:, :2], np.unwrap(pose[:, 2])])


def _interpolate_pose(time_s: np.ndarray, pose: np.ndarray, at_s: np.ndarray) -> np.ndarray:
    """Planar poses [K, 3] (yaw unwrapped) interpolated linearly at ``at_s`` [J] -> [J, 3]."""
    return np.column_stack([np.interp(at_s, time_s, pose[:, j]) for j in range(3)])


def _compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Planar ``a ∘ b`` [N, 3]: the pose b (given in a's frame) in a's parent."""
    c, s = np.cos(a[:, 2]), np.sin(a[:, 2])
    return np.column_stack(
        [
            a[:, 0] + c * b[:, 0] - s * b[:, 1],
            a[:, 1] + s * b[:, 0] + c * b[:, 1],
            wrap_angle(a[:, 2] + b[:, 2]),
        ]
    )


def _invert(a: np.ndarray) -> np.ndarray:
    """Planar inverse [N, 3]: ``_compose(a, _invert(a))`` is the identity."""
    c, s = np.cos(a[:, 2]), np.sin(a[:, 2])
    return np.column_stack(
        [-c * a[:, 0] - s * a[:, 1], s * a[:, 0] - c * a[:, 1], wrap_angle(-a[:, 2])]
    )


def _stamps_ns(time_s: np.ndarray) -> np.ndarray:
    return BASE_EPOCH_NS + np.rint(np.asarray(time_s) * NS_PER_S).astype(np.int64)


def _field_stream(run: RobotRun) -> FieldStream:
    """The readings in tesla in ``imu_link`` with the white noise's covariance."""
    variance_t2 = (run.noise_ut * TESLA_PER_MICROTESLA) ** 2
    if not np.isfinite(run.mag_ut).all():
        raise BagError("robot run: mag_ut holds NaN or inf")
    return FieldStream(
        stamps_ns=_stamps_ns(run.time_s),
        field_t=run.mag_ut * TESLA_PER_MICROTESLA,
        frame_id=MAG_FRAME_ID,
        covariance_t2=np.diag(np.full(3, variance_t2)).ravel(),
    )


def _mounting_metadata(run: RobotRun) -> dict[str, str]:
    def join(v: np.ndarray) -> str:
        return " ".join(repr(float(x)) for x in v)

    return {
        "gp_mapper.lever_arm_m": join(run.lever_arm_m),
        "gp_mapper.mount_yaw_rad": repr(float(run.mount_yaw_rad)),
        "gp_mapper.hard_iron_ut": join(run.hard_iron_ut),
    }


def _tf_message(
    typestore: Typestore, stamp_ns: int, parent: str, child: str, pose: np.ndarray, z_m: float
) -> Any:
    """A one-transform ``TFMessage``: ``child`` at planar ``pose`` [3] (and height ``z_m``) in
    ``parent``."""
    types = typestore.types
    q = yaw_to_quaternion(np.array([pose[2]]))[0]
    transform = types["geometry_msgs/msg/Transform"](
        translation=types["geometry_msgs/msg/Vector3"](
            x=float(pose[0]), y=float(pose[1]), z=float(z_m)
        ),
        rotation=types["geometry_msgs/msg/Quaternion"](
            x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3])
        ),
    )
    stamped = types["geometry_msgs/msg/TransformStamped"](
        header=header_msg(typestore, stamp_ns, parent), child_frame_id=child, transform=transform
    )
    return types[TF_MSGTYPE](transforms=[stamped])
