"""A run of the walk: the field read in the sensor frame with per-pass offsets and white noise,
and its bag."""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ..bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC, BagSummary
from ..heading import rotate_z
from ..synthetic import write_walk_bag
from .field import BuildingWorld, make_building_world
from .walk import (
    DEFAULT_DURATION_S,
    DEFAULT_WALK_RATE_HZ,
    DEFAULT_WALK_SPEED_MPS,
    BuildingWalk,
    building_walk,
)

# White noise per axis, µT: a phone magnetometer's (e.g. AK09916: 0.15 µT/LSB, ~0.4 µT rms).
DEFAULT_NOISE_UT = 0.5
# Standard deviation of the per-pass offset of the field's norm, µT (what remains of a hard-iron
# calibration that drifts between passes).
DEFAULT_PASS_OFFSET_UT = 1.0
# Poses on every fourth 100 Hz reading: a visual-inertial odometry rate.
DEFAULT_POSE_RATE_HZ = 25.0


class BuildingRun(NamedTuple):
    """A simulated magnetometer run along a walk.

    Attributes:
        time_s: [N] seconds since the start.
        position_m: [N, 2] (x, y), map frame, metres.
        heading_rad: [N] yaw of the sensor (direction of travel), radians.
        mag_ut: [N, 3] readings in the SENSOR frame (pass offsets and noise included), µT.
        field_ut: [N, 3] true field at the positions, map frame, µT.
        pass_index: [N] int pass of each sample.
        pass_offset_ut: [P] offset added to the field's norm on each pass, µT.
    """

    time_s: np.ndarray
    position_m: np.ndarray
    heading_rad: np.ndarray
    mag_ut: np.ndarray
    field_ut: np.ndarray
    pass_index: np.ndarray
    pass_offset_ut: np.ndarray


def simulate_building_run(
    world: BuildingWorld,
    walk: BuildingWalk,
    *,
    noise_ut: float = DEFAULT_NOISE_UT,
    pass_offset_ut: float = DEFAULT_PASS_OFFSET_UT,
    seed: int = 0,
) -> BuildingRun:
    """Read the field along a walk in the sensor frame, with per-pass offsets and noise.

    The reading is the map-frame field stretched along itself by the pass's offset (its norm
    gains exactly the offset), rotated by minus the heading into the sensor frame, plus white
    noise per axis.

    Args:
        world: the field to read.
        walk: where and when.
        noise_ut: standard deviation of the white noise per axis, µT.
        pass_offset_ut: standard deviation of the per-pass offset of the norm, µT.
        seed: seed of the offsets and the noise.

    Returns:
        The run; with no noise ``|mag_ut| == |field_ut| + pass_offset_ut[pass_index]`` and
        ``rotate_z(mag_ut, heading_rad)`` points along ``field_ut``.
    """
    if not (noise_ut >= 0.0 and pass_offset_ut >= 0.0):
        raise ValueError(
            f"noise_ut and pass_offset_ut must be non-negative; got {noise_ut}, {pass_offset_ut}"
        )
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0.0, pass_offset_ut, size=walk.pass_edge.size)
    field_map = world.field_at(walk.position_m)
    norm = np.linalg.norm(field_map, axis=1)
    stretched = field_map * ((norm + offsets[walk.pass_index]) / norm)[:, None]
    mag = rotate_z(stretched, -walk.heading_rad) + rng.normal(0.0, noise_ut, size=field_map.shape)
    return BuildingRun(
        time_s=walk.time_s,
        position_m=walk.position_m,
        heading_rad=walk.heading_rad,
        mag_ut=mag,
        field_ut=field_map,
        pass_index=walk.pass_index,
        pass_offset_ut=offsets,
    )


def write_building_bag(
    out_bag: str | os.PathLike[str],
    world: BuildingWorld | None = None,
    *,
    seed: int = 0,
    duration_s: float = DEFAULT_DURATION_S,
    rate_hz: float = DEFAULT_WALK_RATE_HZ,
    pose_rate_hz: float | None = DEFAULT_POSE_RATE_HZ,
    speed_mps: float = DEFAULT_WALK_SPEED_MPS,
    noise_ut: float = DEFAULT_NOISE_UT,
    pass_offset_ut: float = DEFAULT_PASS_OFFSET_UT,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    force: bool = False,
) -> BagSummary:
    """Walk the floor and write the run in the layout of :func:`write_synthetic_bag`.

    ``mag_topic``: MagneticField in tesla, sensor frame ``imu_link``, covariance diag = noise
    variance (the pass offsets are not in it: they are the error a map must average out);
    ``pose_topic``: the true pose in frame ``map`` (z = 0, yaw = heading). Stamps start at
    ``BASE_EPOCH_NS``.

    Args:
        out_bag: the bag directory to create.
        world: the floor; None builds ``make_building_world(seed)``.
        seed: seed of the world (unless given), the walk and the run.
        duration_s: walk length in seconds.
        rate_hz: magnetometer rate in Hz.
        pose_rate_hz: pose rate in Hz; None writes one pose per reading.
        speed_mps: walking pace, m/s.
        noise_ut: magnetometer white noise per axis, µT.
        pass_offset_ut: standard deviation of the per-pass offset of the norm, µT.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        pose_topic: pose topic.
        pose_type: ``"pose_stamped"``, ``"pose_with_covariance_stamped"`` or ``"odometry"``.
        force: replace an existing bag at ``out_bag``.

    Returns:
        A summary of the bag written.

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, or the bag cannot be written.
    """
    world = make_building_world(seed) if world is None else world
    walk = building_walk(
        world, duration_s=duration_s, rate_hz=rate_hz, speed_mps=speed_mps, seed=seed
    )
    run = simulate_building_run(
        world, walk, noise_ut=noise_ut, pass_offset_ut=pass_offset_ut, seed=seed
    )
    width, depth = world.size_m
    return write_walk_bag(
        out_bag, run, noise_ut=noise_ut, pose_rate_hz=pose_rate_hz, storage=storage,
        mag_topic=mag_topic, pose_topic=pose_topic, pose_type=pose_type, force=force,
        custom_data={
            "gp_mapper.source": (
                f"building world {width:g} x {depth:g} m seed {world.seed}, walk seed {seed}"
            ),
            "gp_mapper.field_frame": "body (rotated by -heading)",
            "gp_mapper.pass_offset_ut": f"{pass_offset_ut:g}",
        },
    )  # fmt: skip
