"""Planar heading helpers: yaw quaternions and z rotations (and, from the model inputs, the
heading from the direction of travel).

Conventions (REP-103): x forward, y left, z up; yaw is the counter-clockwise angle about +z from
the map x axis, in radians. ``rotate_z(v, yaw)`` maps a body-frame vector into the map frame.
"""

from __future__ import annotations

import numpy as np

from gp_mapper.engine.auxiliary import (
    DEFAULT_HEADING_SMOOTHING_S,
    DEFAULT_MIN_SPEED_MPS,
    heading_from_track,
    yaw_from_quaternion,
)

__all__ = [
    "DEFAULT_HEADING_SMOOTHING_S",
    "DEFAULT_MIN_SPEED_MPS",
    "heading_from_track",
    "rotate_z",
    "yaw_from_quaternion",
    "yaw_to_quaternion",
]


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
