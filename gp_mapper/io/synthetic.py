"""A small synthetic indoor magnetic world and robot runs through it (numpy only).

The world is a room of 8 m x 6 m (x in [0, 8], y in [0, 6], map frame, sensor plane z = 0) with
a uniform Earth field of about 50 µT plus indoor anomalies: magnetic dipoles buried below the
floor (reinforcement bars, cables, machines) and smooth Gaussian bumps, each 5-30 µT at its
peak. Everything is a smooth function of position, so a GP with a lengthscale of a few
decimetres can learn it. The field is expressed in µT in the map frame.

A run follows a lawnmower pattern across the room followed by loops around its centre, at
walking pace, and reads the field in the SENSOR frame: the map-frame field rotated by minus the
robot heading, plus white noise. Optionally the reading also carries a heading-dependent bias,
the compass-deviation curve of a magnetised robot body (:func:`heading_bias`), off by default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from gp_mapper.mapping.pose_buffer import NS_PER_S

from .bag_writer import (
    BASE_EPOCH_NS,
    DEFAULT_MAG_TOPIC,
    DEFAULT_POSE_TOPIC,
    MAG_FRAME_ID,
    MAP_FRAME_ID,
    TESLA_PER_MICROTESLA,
    BagSummary,
    FieldStream,
    PoseStream,
    pose_sample_mask,
    write_field_pose_bag,
)
from .heading import heading_from_track, rotate_z, yaw_to_quaternion

__all__ = [
    "EARTH_FIELD_UT",
    "HEADING_BIAS_SHAPE",
    "ROOM_BOUNDS_M",
    "SyntheticRun",
    "SyntheticWorld",
    "coverage_path",
    "coverage_track",
    "heading_bias",
    "make_synthetic_world",
    "simulate_run",
    "write_synthetic_bag",
]

# (xmin, xmax, ymin, ymax) in metres: an 8 m x 6 m room, about the Aalto Vicon area.
ROOM_BOUNDS_M: tuple[float, float, float, float] = (0.0, 8.0, 0.0, 6.0)
# A uniform Earth field of ~50 µT inclined ~70 deg below the horizontal, typical of northern
# mid-latitudes, in the map frame: ~16 µT horizontal, mostly downwards.
EARTH_FIELD_UT: tuple[float, float, float] = (16.0, 4.0, -47.0)
# Indoor anomaly peak strengths, µT (the Aalto data spreads 8-94 µT around a ~45 µT mean).
ANOMALY_PEAK_UT = (5.0, 30.0)
NUM_DIPOLES = 4
NUM_BUMPS = 3
# Depth of the dipoles below the sensor plane, m: deep enough that the field stays smooth on
# the scale of the 0.1 m map cells (a dipole's field varies on the scale of its depth).
DIPOLE_DEPTH_M = (0.6, 1.2)
# Gaussian bump widths (standard deviation), m.
BUMP_WIDTH_M = (0.4, 1.0)
# Anomaly centres keep this far from the walls, m.
ANOMALY_MARGIN_M = 1.0

# Run defaults: a slow indoor robot (0.5 m/s covers the ~90 m coverage path in ~3 minutes) and a
# 50 Hz magnetometer with 0.3 µT of white noise per axis, one LSB of the AK8975 magnetometer
# inside the MPU-9150 (the invensense sensor of the Aalto data, also logged at 50 Hz).
DEFAULT_SPEED_MPS = 0.5
DEFAULT_RATE_HZ = 50.0
DEFAULT_NOISE_UT = 0.3
# Lawnmower rows keep this far from the walls and lie this far apart, m.
PATH_MARGIN_M = 0.5
ROW_SPACING_M = 0.75
# The heading bias's curve per µT of amplitude: (A, B, C, D, E) of
# A + B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ, a hard-iron first harmonic and a weaker soft-iron
# second one (peak about 1.4 amplitudes). A = 0: a constant bias cannot be told from the field
# level (it is a calibration offset), so the known curve is the part a map can be cleaned of.
HEADING_BIAS_SHAPE: tuple[float, float, float, float, float] = (0.0, 1.0, -0.6, 0.4, 0.3)


@dataclass(frozen=True, eq=False)
class SyntheticWorld:
    """A room's magnetic field: a uniform Earth field plus dipoles and Gaussian bumps.

    Attributes:
        bounds_m: (xmin, xmax, ymin, ymax) of the room, metres.
        earth_field_ut: [3] uniform background field, µT, map frame.
        dipole_positions_m: [P, 3] dipole positions (z < 0: below the sensor plane), metres.
        dipole_moments: [P, 3] dipole moments scaled so that B = (3 (m.r^) r^ - m) / |r|^3
            is in µT with r in metres (units µT m^3).
        bump_centres_m: [B, 2] Gaussian bump centres, metres.
        bump_widths_m: [B] bump standard deviations, metres.
        bump_amplitudes_ut: [B, 3] bump peak vectors, µT.
    """

    bounds_m: tuple[float, float, float, float]
    earth_field_ut: np.ndarray
    dipole_positions_m: np.ndarray
    dipole_moments: np.ndarray
    bump_centres_m: np.ndarray
    bump_widths_m: np.ndarray
    bump_amplitudes_ut: np.ndarray
    seed: int = 0

    def field_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field at points.

        Args:
            points_m: [N, 2] (x, y) on the sensor plane z = 0, or [N, 3] (x, y, z), metres.

        Returns:
            [N, 3] field in µT, map frame.
        """
        p = np.asarray(points_m, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] not in (2, 3):
            raise ValueError(f"expected points [N, 2] or [N, 3], got {p.shape}")
        if p.shape[1] == 2:
            p = np.column_stack([p, np.zeros(p.shape[0])])
        total = np.broadcast_to(self.earth_field_ut, p.shape).copy()
        for position, moment in zip(self.dipole_positions_m, self.dipole_moments, strict=True):
            r = p - position  # [N, 3]
            dist = np.linalg.norm(r, axis=1, keepdims=True)
            unit = r / dist
            total += (3.0 * (unit @ moment)[:, None] * unit - moment) / dist**3
        for centre, width, amplitude in zip(
            self.bump_centres_m, self.bump_widths_m, self.bump_amplitudes_ut, strict=True
        ):
            sq = np.sum((p[:, :2] - centre) ** 2, axis=1)
            total += np.exp(-0.5 * sq / width**2)[:, None] * amplitude
        return total

    def norm_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field magnitude ||B|| at points [N, 2] or [N, 3] (metres) -> [N] µT."""
        return np.linalg.norm(self.field_at(points_m), axis=1)


class SyntheticRun(NamedTuple):
    """A simulated robot run.

    Attributes:
        time_s: [N] seconds since the start of the run.
        position_m: [N, 2] (x, y), map frame, metres.
        heading_rad: [N] yaw of the robot (direction of travel), radians.
        mag_ut: [N, 3] noisy magnetometer readings in the SENSOR frame, µT.
    """

    time_s: np.ndarray
    position_m: np.ndarray
    heading_rad: np.ndarray
    mag_ut: np.ndarray


def make_synthetic_world(
    seed: int = 0, bounds_m: tuple[float, float, float, float] = ROOM_BOUNDS_M
) -> SyntheticWorld:
    """Build a random but reproducible world: same seed, same field.

    Args:
        seed: seed of the anomaly positions, directions and strengths.
        bounds_m: (xmin, xmax, ymin, ymax) of the room, metres.

    Returns:
        The world.
    """
    rng = np.random.default_rng(seed)
    xmin, xmax, ymin, ymax = bounds_m
    low = (xmin + ANOMALY_MARGIN_M, ymin + ANOMALY_MARGIN_M)
    high = (xmax - ANOMALY_MARGIN_M, ymax - ANOMALY_MARGIN_M)

    depth = rng.uniform(*DIPOLE_DEPTH_M, size=NUM_DIPOLES)
    dipole_xy = rng.uniform(low, high, size=(NUM_DIPOLES, 2))
    dipole_positions = np.column_stack([dipole_xy, -depth])
    # On its axis at distance d a dipole gives 2|m| / d^3: choose |m| for the wanted peak.
    peak = rng.uniform(*ANOMALY_PEAK_UT, size=NUM_DIPOLES)
    moments = _unit_vectors(rng, NUM_DIPOLES) * (peak * depth**3 / 2.0)[:, None]

    bump_centres = rng.uniform(low, high, size=(NUM_BUMPS, 2))
    bump_widths = rng.uniform(*BUMP_WIDTH_M, size=NUM_BUMPS)
    bump_peak = rng.uniform(*ANOMALY_PEAK_UT, size=NUM_BUMPS)
    bump_amplitudes = _unit_vectors(rng, NUM_BUMPS) * bump_peak[:, None]

    return SyntheticWorld(
        bounds_m=tuple(float(b) for b in bounds_m),  # type: ignore[arg-type]
        earth_field_ut=np.array(EARTH_FIELD_UT, dtype=np.float64),
        dipole_positions_m=dipole_positions,
        dipole_moments=moments,
        bump_centres_m=bump_centres,
        bump_widths_m=bump_widths,
        bump_amplitudes_ut=bump_amplitudes,
        seed=seed,
    )


def coverage_path(bounds_m: tuple[float, float, float, float] = ROOM_BOUNDS_M) -> np.ndarray:
    """Waypoints of a closed lawnmower-plus-loops path covering the room.

    Rows along x, :data:`ROW_SPACING_M` apart, then two ellipses around the centre (a large one
    and a small one), then back to the start.

    Returns:
        [P, 2] waypoints in metres; the last equals the first.
    """
    xmin, xmax, ymin, ymax = bounds_m
    x0, x1 = xmin + PATH_MARGIN_M, xmax - PATH_MARGIN_M
    y0, y1 = ymin + PATH_MARGIN_M, ymax - PATH_MARGIN_M
    rows = max(2, int(np.ceil((y1 - y0) / ROW_SPACING_M)) + 1)
    points: list[tuple[float, float]] = []
    for i, y in enumerate(np.linspace(y0, y1, rows)):
        ends = (x0, x1) if i % 2 == 0 else (x1, x0)
        points.extend((float(x), float(y)) for x in ends)
    centre = np.array([(xmin + xmax) / 2.0, (ymin + ymax) / 2.0])
    half = np.array([(x1 - x0) / 2.0, (y1 - y0) / 2.0])
    # Ellipse resolution: 64 chords keep the polygon within ~0.5 % of the true ellipse.
    angle = np.linspace(0.0, 2.0 * np.pi, 65)
    ring = np.column_stack([np.cos(angle), np.sin(angle)])
    last = np.array(points[-1])
    for scale in (0.8, 0.4):
        loop = centre + scale * half * ring
        # start each loop at the point nearest the current position
        shift = int(np.argmin(np.linalg.norm(loop[:-1] - last, axis=1)))
        loop = np.vstack([loop[shift:-1], loop[:shift], loop[shift : shift + 1]])
        points.extend(map(tuple, loop))
        last = loop[-1]
    points.append(points[0])
    return np.asarray(points, dtype=np.float64)


def coverage_track(
    bounds_m: tuple[float, float, float, float], time_s: np.ndarray, speed_mps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Where a robot driving :func:`coverage_path` at constant speed is, and its heading.

    The path is repeated as often as ``time_s`` needs; the heading is the smoothed direction
    of travel (:func:`heading_from_track`), so it turns through the corners in about
    :data:`~gp_mapper.io.heading.DEFAULT_HEADING_SMOOTHING_S` rather than jumping.

    Args:
        bounds_m: (xmin, xmax, ymin, ymax) of the room, metres.
        time_s: [N] times since the start, seconds, increasing and evenly spaced (the
            heading's smoothing counts samples).
        speed_mps: speed in m/s.

    Returns:
        position_m [N, 2] (x, y) in the map frame, metres, and heading_rad [N], radians.
    """
    waypoints = coverage_path(bounds_m)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(waypoints, axis=0), axis=1))])
    travelled = np.mod(speed_mps * np.asarray(time_s, dtype=np.float64), arc[-1])
    position = np.column_stack(
        [np.interp(travelled, arc, waypoints[:, 0]), np.interp(travelled, arc, waypoints[:, 1])]
    )
    return position, heading_from_track(time_s, position)


def heading_bias(yaw_rad: np.ndarray, amplitude_ut: float) -> np.ndarray:
    """The synthetic robot's heading bias of ‖B‖ [N] µT at headings yaw_rad [N] (radians).

    ``amplitude_ut`` times the fixed curve :data:`HEADING_BIAS_SHAPE`.
    """
    a, b, c, d, e = HEADING_BIAS_SHAPE
    psi = np.asarray(yaw_rad, dtype=np.float64)
    curve = a + b * np.sin(psi) + c * np.cos(psi) + d * np.sin(2.0 * psi) + e * np.cos(2.0 * psi)
    return amplitude_ut * curve


def simulate_run(
    world: SyntheticWorld,
    duration_s: float,
    rate_hz: float = DEFAULT_RATE_HZ,
    seed: int = 0,
    *,
    speed_mps: float = DEFAULT_SPEED_MPS,
    noise_ut: float = DEFAULT_NOISE_UT,
    heading_bias_ut: float = 0.0,
) -> SyntheticRun:
    """Drive the coverage path at constant speed (repeating it as needed) and read the field.

    Args:
        world: the field to sample.
        duration_s: run length in seconds.
        rate_hz: magnetometer rate in Hz.
        seed: seed of the measurement noise.
        speed_mps: robot speed in m/s.
        noise_ut: standard deviation of the white noise per axis, µT.
        heading_bias_ut: amplitude of the heading bias (:func:`heading_bias`), µT; 0 = none.
            The noiseless reading is stretched along itself so that its norm gains exactly
            the bias: ‖B‖ (the node's default target) reads ``‖B‖ + heading_bias(ψ)``.

    Returns:
        The run; without bias ``rotate_z(mag_ut - noise, heading_rad) ==
        world.field_at(position_m)``.
    """
    if not np.isfinite(heading_bias_ut):
        raise ValueError(f"heading_bias_ut must be finite; got {heading_bias_ut}")
    if duration_s <= 0.0 or rate_hz <= 0.0 or speed_mps <= 0.0 or noise_ut < 0.0:
        raise ValueError(
            "duration_s, rate_hz and speed_mps must be positive and noise_ut non-negative; got "
            f"{duration_s}, {rate_hz}, {speed_mps}, {noise_ut}"
        )
    rng = np.random.default_rng(seed)
    count = int(np.floor(duration_s * rate_hz)) + 1
    time_s = np.arange(count) / rate_hz
    position, heading = coverage_track(world.bounds_m, time_s, speed_mps)
    field_map = world.field_at(position)
    clean = rotate_z(field_map, -heading)
    if heading_bias_ut != 0.0:
        norm = np.linalg.norm(clean, axis=1)
        clean = clean * ((norm + heading_bias(heading, heading_bias_ut)) / norm)[:, None]
    mag = clean + rng.normal(0.0, noise_ut, size=field_map.shape)
    return SyntheticRun(time_s=time_s, position_m=position, heading_rad=heading, mag_ut=mag)


def write_synthetic_bag(
    out_bag: str | os.PathLike[str],
    *,
    seed: int = 0,
    duration_s: float = 180.0,
    rate_hz: float = DEFAULT_RATE_HZ,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    pose_rate_hz: float | None = None,
    noise_ut: float = DEFAULT_NOISE_UT,
    world: SyntheticWorld | None = None,
    force: bool = False,
    heading_bias_ut: float = 0.0,
) -> BagSummary:
    """Simulate a run and write it in the layout of :func:`gp_mapper.io.convert_aalto`.

    ``mag_topic``: MagneticField in tesla, sensor frame ``imu_link`` (rotated by the heading,
    unlike the converted Aalto data), covariance diag = noise variance; ``pose_topic``: the
    true pose in frame ``map`` (z = 0, yaw = heading). Stamps start at ``BASE_EPOCH_NS``.

    Args:
        out_bag: the bag directory to create.
        seed: seed of the world (unless ``world`` is given) and of the noise.
        duration_s: run length in seconds.
        rate_hz: magnetometer rate in Hz.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        pose_topic: pose topic.
        pose_type: ``"pose_stamped"``, ``"pose_with_covariance_stamped"`` or ``"odometry"``.
        pose_rate_hz: pose rate in Hz; None writes one pose per magnetometer sample.
        noise_ut: magnetometer white noise per axis, µT (also written as the covariance).
        world: the world to drive through; None builds ``make_synthetic_world(seed)``.
        force: replace an existing bag at ``out_bag``.
        heading_bias_ut: amplitude of a heading-dependent bias of ‖B‖ (:func:`heading_bias`),
            µT; 0 (default) = none.

    Returns:
        A summary of the bag written.

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, or the bag cannot be written.
    """
    world = make_synthetic_world(seed) if world is None else world
    run = simulate_run(
        world, duration_s, rate_hz, seed, noise_ut=noise_ut, heading_bias_ut=heading_bias_ut
    )
    return write_walk_bag(
        out_bag, run, noise_ut=noise_ut, pose_rate_hz=pose_rate_hz, storage=storage,
        mag_topic=mag_topic, pose_topic=pose_topic, pose_type=pose_type, force=force,
        custom_data={
            "gp_mapper.source": f"synthetic world seed {world.seed}, run seed {seed}",
            "gp_mapper.field_frame": "body (rotated by -heading)",
            "gp_mapper.heading_bias_ut": f"{heading_bias_ut:g}",
        },
    )  # fmt: skip


class WalkRun(Protocol):
    """What a bag is written from: a simulated run along a walk (``SyntheticRun``,
    ``building.BuildingRun``)."""

    time_s: np.ndarray  # [N] s since the start
    position_m: np.ndarray  # [N, 2] map frame
    heading_rad: np.ndarray  # [N] yaw
    mag_ut: np.ndarray  # [N, 3] sensor frame


def write_walk_bag(
    out_bag: str | os.PathLike[str],
    run: WalkRun,
    *,
    noise_ut: float,
    pose_rate_hz: float | None,
    storage: str,
    mag_topic: str,
    pose_topic: str,
    pose_type: str,
    force: bool,
    custom_data: dict[str, str],
) -> BagSummary:
    """A simulated run (``time_s``, ``position_m``, ``heading_rad``, sensor-frame ``mag_ut``)
    as a bag: MagneticField in tesla in frame ``imu_link`` with the white noise's covariance,
    and the true planar pose in frame ``map``, stamps from ``BASE_EPOCH_NS``."""
    stamps = BASE_EPOCH_NS + np.rint(run.time_s * NS_PER_S).astype(np.int64)
    keep = pose_sample_mask(run.time_s, pose_rate_hz)
    variance_t2 = (noise_ut * TESLA_PER_MICROTESLA) ** 2
    field_stream = FieldStream(
        stamps_ns=stamps,
        field_t=run.mag_ut * TESLA_PER_MICROTESLA,
        frame_id=MAG_FRAME_ID,
        covariance_t2=np.diag(np.full(3, variance_t2)).ravel(),
    )
    pose_stream = PoseStream(
        stamps_ns=stamps[keep],
        position_m=np.column_stack([run.position_m[keep], np.zeros(int(keep.sum()))]),
        orientation_xyzw=yaw_to_quaternion(run.heading_rad[keep]),
        frame_id=MAP_FRAME_ID,
    )
    return write_field_pose_bag(
        out_bag, field_stream, pose_stream, storage=storage, mag_topic=mag_topic,
        pose_topic=pose_topic, pose_type=pose_type, force=force, custom_data=custom_data,
    )  # fmt: skip


def _unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` directions uniform on the sphere, [count, 3]."""
    v = rng.normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)
