"""Planar heading helpers: z rotations, and (defined with the model inputs in
``gp_mapper.engine.auxiliary``) yaw quaternions and the heading from the direction of travel.

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
    yaw_to_quaternion,
)

__all__ = [
    "DEFAULT_HEADING_SMOOTHING_S",
    "DEFAULT_MIN_SPEED_MPS",
    "heading_from_track",
    "rotate_z",
    "yaw_from_quaternion",
    "yaw_to_quaternion",
]


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
