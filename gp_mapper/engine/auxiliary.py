"""The model inputs beyond position (heading, run label, time), computed in one place.

A model with nuisance components declares the columns it reads after the position
(:attr:`~gp_mapper.engine.model.Model.auxiliary_inputs`); the node's windows, the offline fit
and the warm-up all build them here, with one rule per column:

- ``yaw`` [rad]: the yaw of each sample's pose orientation (about +z, REP-103); where a pose
  had none (a NaN row), the direction of travel of the samples given
  (:func:`heading_from_track`: the whole log for a fit, the window in the stream).
- ``run``: a label 0, 1, 2, ... that starts a new run wherever two consecutive samples are at
  least ``run_gap_s`` apart. ``gp-mapper convert aalto`` lays its runs on one time line 5 s
  apart while its samples are 0.02 s apart, so a 5 s threshold finds exactly the runs; a robot
  that stops and is thinned away (``min_spacing``) for longer starts a new run too, which
  costs one more offset, not a wrong map.
- ``time`` [s]: seconds after ``time_origin_ns``. A fit measures from the log's first sample;
  the stream passes 0 (the model keeps its own clock from its first window).
- ``orientation_x`` .. ``orientation_w``: the pose orientation (sensor to map frame) that
  rotated the reading into the map frame, for a model of the sensor's own offset; where a pose
  had none the reading was not rotated, so the identity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The pose orientation's quaternion, one column per component (x, y, z, w).
ORIENTATION_NAMES = ("orientation_x", "orientation_y", "orientation_z", "orientation_w")
AUXILIARY_NAMES = ("yaw", "run", "time", *ORIENTATION_NAMES)
NS_PER_S = 1_000_000_000

# The Aalto robot drives at ~0.18 m/s (median speed, invensense sequences 1 and 3) and its Vicon
# positions carry ~0.5 mm of sample-to-sample noise (std of the second difference), i.e.
# ~0.025 m/s of raw velocity noise at 50 Hz: 5 cm/s separates "stopped" from "driving".
DEFAULT_MIN_SPEED_MPS = 0.05
# Half a second of smoothing: the robot moves ~9 cm, long enough to average position noise and
# short enough to follow the corners of a lawnmower path.
DEFAULT_HEADING_SMOOTHING_S = 0.5


def yaw_from_quaternion(quaternion_xyzw: np.ndarray) -> np.ndarray:
    """Yaw (rotation about +z, radians) of quaternions (x, y, z, w) [..., 4] -> [...]."""
    q = np.asarray(quaternion_xyzw, dtype=np.float64)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_to_quaternion(yaw_rad: np.ndarray) -> np.ndarray:
    """Quaternions (x, y, z, w) of rotations by ``yaw`` about +z.

    Args:
        yaw_rad: [N] yaw in radians.

    Returns:
        [N, 4] unit quaternions in ROS order (x, y, z, w).
    """
    half = 0.5 * np.asarray(yaw_rad, dtype=np.float64)
    zeros = np.zeros_like(half)
    return np.stack([zeros, zeros, np.sin(half), np.cos(half)], axis=-1)


def heading_from_track(
    time_s: np.ndarray,
    xy_m: np.ndarray,
    *,
    smoothing_s: float = DEFAULT_HEADING_SMOOTHING_S,
    min_speed_mps: float = DEFAULT_MIN_SPEED_MPS,
) -> np.ndarray:
    """Estimate the heading (yaw) of a planar track from its direction of travel.

    The velocity is the time derivative of the positions, box-averaged over ``smoothing_s``;
    the heading is its angle. Where the smoothed speed is below ``min_speed_mps`` the robot is
    taken as standing still and keeps the heading it last had (or, before it first moves, the
    heading it first moves with); a track that never moves gets yaw 0 (identity orientation).

    Args:
        time_s: [N] sample times in seconds, strictly increasing.
        xy_m: [N, 2] positions in metres.
        smoothing_s: width of the velocity moving average in seconds.
        min_speed_mps: speed below which the heading is held, in m/s.

    Returns:
        [N] yaw in radians, in (-pi, pi].
    """
    time_s = np.asarray(time_s, dtype=np.float64)
    xy_m = np.asarray(xy_m, dtype=np.float64)
    if time_s.ndim != 1 or xy_m.shape != (time_s.size, 2):
        raise ValueError(f"expected time_s [N], xy_m [N, 2]; got {time_s.shape}, {xy_m.shape}")
    n = time_s.size
    if n < 2:
        return np.zeros(n)
    velocity = np.gradient(xy_m, time_s, axis=0)  # [N, 2] m/s
    period = float(np.median(np.diff(time_s)))
    width = max(1, round(smoothing_s / period)) if period > 0.0 else 1
    velocity = _moving_average(velocity, width)
    moving = np.hypot(velocity[:, 0], velocity[:, 1]) >= min_speed_mps
    if not moving.any():
        return np.zeros(n)
    last_moving = np.maximum.accumulate(np.where(moving, np.arange(n), -1))
    last_moving[last_moving < 0] = int(np.argmax(moving))
    held = velocity[last_moving]
    return np.arctan2(held[:, 1], held[:, 0])


def run_labels(stamps_ns: np.ndarray, gap_s: float) -> np.ndarray:
    """Run labels [N] (0.0, 1.0, ...) of stamps [N] (ns, increasing) split at gaps ≥ gap_s."""
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    if gap_s <= 0.0:
        raise ValueError(f"gap_s must be positive, got {gap_s}")
    if stamps.size == 0:
        return np.empty(0)
    starts = np.diff(stamps) >= round(gap_s * NS_PER_S)
    return np.concatenate([[0], np.cumsum(starts)]).astype(np.float64)


def sample_yaw(xy_m: np.ndarray, stamps_ns: np.ndarray, orientation_xyzw: np.ndarray) -> np.ndarray:
    """Yaw [N] rad of each sample: its pose's, else the direction of travel of the samples."""
    yaw = yaw_from_quaternion(orientation_xyzw)
    missing = ~np.isfinite(yaw)
    if missing.any():
        stamps = np.asarray(stamps_ns, dtype=np.int64)
        time_s = (stamps - stamps[0]) / NS_PER_S
        yaw[missing] = heading_from_track(time_s, np.asarray(xy_m)[:, :2])[missing]
    return yaw


def auxiliary_columns(
    names: Sequence[str],
    xy_m: np.ndarray,
    stamps_ns: np.ndarray | None,
    orientation_xyzw: np.ndarray | None,
    *,
    run_gap_s: float = 0.0,
    time_origin_ns: int = 0,
) -> np.ndarray:
    """The columns [N, len(names)] of ``names`` (each of :data:`AUXILIARY_NAMES`), in order.

    Args:
        names: the columns, as the model's ``auxiliary_inputs`` lists them.
        xy_m: [N, ≥2] sample positions (the track ``yaw`` falls back to).
        stamps_ns: [N] stamps (ns, increasing); needed by every column.
        orientation_xyzw: [N, 4] pose orientations, NaN rows where a pose had none; needed
            by ``yaw``.
        run_gap_s: the gap that starts a new run (``run`` only; > 0).
        time_origin_ns: the stamp ``time`` counts from.

    Raises:
        ValueError: an unknown name, or a column whose stamps or orientations are missing.
    """
    unknown = [n for n in names if n not in AUXILIARY_NAMES]
    if unknown:
        raise ValueError(f"unknown auxiliary inputs {unknown}; known: {AUXILIARY_NAMES}")
    n = len(xy_m)
    if not names:
        return np.empty((n, 0))
    quaternion = any(name in ORIENTATION_NAMES for name in names)
    if stamps_ns is None or (("yaw" in names or quaternion) and orientation_xyzw is None):
        raise ValueError(f"the samples have no stamps or orientations for the inputs {names}")
    if n == 0:
        return np.empty((0, len(names)))
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    # One copy for the four quaternion columns.
    orientation = _orientation_or_identity(orientation_xyzw) if quaternion else None
    columns = {
        "yaw": lambda: sample_yaw(xy_m, stamps, orientation_xyzw),
        "run": lambda: run_labels(stamps, run_gap_s),
        "time": lambda: (stamps - time_origin_ns) / NS_PER_S,
        **{
            name: (lambda k=k: orientation[:, k])  # type: ignore[index]
            for k, name in enumerate(ORIENTATION_NAMES)
        },
    }
    return np.column_stack([columns[name]() for name in names]).reshape(n, len(names))


def _orientation_or_identity(orientation_xyzw: np.ndarray) -> np.ndarray:
    """[N, 4] orientations with the identity (0, 0, 0, 1) where a row is not finite."""
    q = np.array(orientation_xyzw, dtype=np.float64).reshape(-1, 4)
    q[~np.isfinite(q).all(axis=1)] = (0.0, 0.0, 0.0, 1.0)
    return q


def _moving_average(values: np.ndarray, width: int) -> np.ndarray:
    """Centred box average of [N, C] values over ``width`` samples, edges padded by repetition."""
    if width <= 1:
        return values
    left = width // 2
    padded = np.pad(values, ((left, width - 1 - left), (0, 0)), mode="edge")
    cumulative = np.cumsum(np.vstack([np.zeros((1, values.shape[1])), padded]), axis=0)
    return (cumulative[width:] - cumulative[:-width]) / width
