"""Planar heading helpers: heading from the direction of travel, yaw quaternions, z rotations.

Conventions (REP-103): x forward, y left, z up; yaw is the counter-clockwise angle about +z from
the map x axis, in radians. ``rotate_z(v, yaw)`` maps a body-frame vector into the map frame.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DEFAULT_HEADING_SMOOTHING_S",
    "DEFAULT_MIN_SPEED_MPS",
    "heading_from_track",
    "rotate_z",
    "yaw_from_quaternion",
    "yaw_to_quaternion",
]

# The Aalto robot drives at ~0.18 m/s (median speed, invensense sequences 1 and 3) and its Vicon
# positions carry ~0.5 mm of sample-to-sample noise (std of the second difference), i.e.
# ~0.025 m/s of raw velocity noise at 50 Hz: 5 cm/s separates "stopped" from "driving".
DEFAULT_MIN_SPEED_MPS = 0.05
# Half a second of smoothing: the robot moves ~9 cm, long enough to average position noise and
# short enough to follow the corners of a lawnmower path.
DEFAULT_HEADING_SMOOTHING_S = 0.5


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


def yaw_from_quaternion(quaternion_xyzw: np.ndarray) -> np.ndarray:
    """Yaw (rotation about +z, radians) of quaternions (x, y, z, w) [..., 4] -> [...]."""
    q = np.asarray(quaternion_xyzw, dtype=np.float64)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def rotate_z(vectors: np.ndarray, yaw_rad: np.ndarray) -> np.ndarray:
    """Rotate 3-vectors about +z by ``yaw`` (body -> map when yaw is the body heading).

    Args:
        vectors: [N, 3] vectors.
        yaw_rad: [N] angles in radians (or a scalar).

    Returns:
        [N, 3] rotated vectors; z is unchanged. ``rotate_z(rotate_z(v, a), -a) == v``.
    """
    v = np.asarray(vectors, dtype=np.float64)
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.stack([c * v[:, 0] - s * v[:, 1], s * v[:, 0] + c * v[:, 1], v[:, 2]], axis=-1)


def _moving_average(values: np.ndarray, width: int) -> np.ndarray:
    """Centred box average of [N, C] values over ``width`` samples, edges padded by repetition."""
    if width <= 1:
        return values
    left = width // 2
    padded = np.pad(values, ((left, width - 1 - left), (0, 0)), mode="edge")
    cumulative = np.cumsum(np.vstack([np.zeros((1, values.shape[1])), padded]), axis=0)
    return (cumulative[width:] - cumulative[:-width]) / width
