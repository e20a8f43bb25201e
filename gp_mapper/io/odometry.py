"""Wheel odometry made from a ground-truth track, with the errors real odometry has.

For benchmarks and demos of localization where a recording has ground truth but no odometry
(the Aalto robot runs). The track's increments are read in the body frame and integrated
again with: a scale error on distance (wheel radius, a few percent), a gyro bias on the
turn rate and a random walk of that bias, and white noise on each increment. The odometry
starts at (0, 0, 0): its frame is not the map's, as a robot's ``odom`` frame is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.localization.motion import wrap_angle


@dataclass(frozen=True)
class OdometryErrors:
    """What the simulated odometry gets wrong.

    Attributes:
        scale: relative error of travelled distance (a wheel radius off by this share).
        gyro_bias_deg_s: constant error of the turn rate [°/s].
        gyro_walk_deg_s: random walk of the turn-rate error [°/s per √s].
        step_sd: white noise on each increment, relative to its size.
    """

    scale: float = 0.05
    gyro_bias_deg_s: float = 1.0
    gyro_walk_deg_s: float = 0.1
    step_sd: float = 0.02


class Odometry(NamedTuple):
    """Odometry poses at the track's stamps: x, y [m], yaw [rad], odom frame."""

    time_s: np.ndarray
    pose: np.ndarray  # [N, 3]


def simulate_odometry(
    time_s: np.ndarray, xy_m: np.ndarray, yaw_rad: np.ndarray, errors: OdometryErrors, seed: int
) -> Odometry:
    """Odometry of a track ``(time_s [N], xy_m [N, 2], yaw_rad [N])`` with ``errors``.

    The scale and the bias's sign are drawn per seed (|scale| and |bias| as given), so that
    seeds differ in the direction of the drift, not only its noise.
    """
    rng = np.random.default_rng(seed)
    time_s = np.asarray(time_s, dtype=np.float64)
    dt = np.diff(time_s)
    d = np.diff(xy_m, axis=0)
    c, s = np.cos(yaw_rad[:-1]), np.sin(yaw_rad[:-1])
    forward = c * d[:, 0] + s * d[:, 1]  # body-frame increments
    lateral = -s * d[:, 0] + c * d[:, 1]
    turn = wrap_angle(np.diff(yaw_rad))
    scale = 1.0 + errors.scale * rng.choice([-1.0, 1.0])
    bias = math.radians(errors.gyro_bias_deg_s) * rng.choice([-1.0, 1.0])
    walk = np.cumsum(rng.standard_normal(dt.size) * np.sqrt(dt)) * math.radians(
        errors.gyro_walk_deg_s
    )
    forward = forward * scale * (1.0 + errors.step_sd * rng.standard_normal(dt.size))
    lateral = lateral * scale * (1.0 + errors.step_sd * rng.standard_normal(dt.size))
    turn = turn * (1.0 + errors.step_sd * rng.standard_normal(dt.size)) + (bias + walk) * dt
    pose = np.zeros((time_s.size, 3))
    for k in range(dt.size):
        yaw = pose[k, 2]
        pose[k + 1, 0] = pose[k, 0] + math.cos(yaw) * forward[k] - math.sin(yaw) * lateral[k]
        pose[k + 1, 1] = pose[k, 1] + math.sin(yaw) * forward[k] + math.cos(yaw) * lateral[k]
        pose[k + 1, 2] = yaw + turn[k]
    pose[:, 2] = wrap_angle(pose[:, 2])
    return Odometry(time_s, pose)


def align_to_start(odometry: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Odometry poses [N, 3] moved into the map frame so the first is ``start`` (x, y, yaw):
    dead reckoning from a known start."""
    dyaw = start[2] - odometry[0, 2]
    c, s = math.cos(dyaw), math.sin(dyaw)
    rel = odometry[:, :2] - odometry[0, :2]
    out = np.empty_like(odometry)
    out[:, 0] = start[0] + c * rel[:, 0] - s * rel[:, 1]
    out[:, 1] = start[1] + s * rel[:, 0] + c * rel[:, 1]
    out[:, 2] = wrap_angle(odometry[:, 2] + dyaw)
    return out
