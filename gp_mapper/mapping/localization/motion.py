"""The odometry motion model: AMCL's ``diff`` model (Thrun, Burgard & Fox, Probabilistic
Robotics, 2005, table 5.6, ``sample_motion_model_odometry``).

An odometry step from pose a to pose b (odom frame) is read as a turn, a straight move and a
turn; each particle takes the same three with noise whose variance grows with the step, as
AMCL's ``alpha1`` ... ``alpha4`` (Nav2's parameter names and defaults).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gp_mapper.engine.auxiliary import yaw_from_quaternion
from gp_mapper.mapping.records import Pose

# Below this translation [m] the direction of travel is undefined: the step is a turn.
MIN_TRANSLATION_M = 0.01


def wrap_angle(angle: np.ndarray | float) -> np.ndarray | float:
    """Angles into [-π, π)."""
    return (np.asarray(angle) + math.pi) % (2.0 * math.pi) - math.pi


def planar_pose(pose: Pose) -> np.ndarray:
    """A pose record as the filter's planar pose [3]: x, y [m] and yaw [rad]."""
    yaw = float(yaw_from_quaternion(pose.orientation_xyzw))
    return np.array([pose.position_m[0], pose.position_m[1], yaw], dtype=np.float64)


@dataclass(frozen=True)
class MotionNoise:
    """AMCL's odometry noise (Nav2 ``amcl`` parameters and defaults; the localizer's own
    defaults are lower, ``localizer.LocalizerConfig``).

    Attributes:
        alpha1: rotation noise from rotation [rad²/rad²].
        alpha2: rotation noise from translation [rad²/m²].
        alpha3: translation noise from translation [m²/m²].
        alpha4: translation noise from rotation [m²/rad²].
    """

    alpha1: float = 0.2
    alpha2: float = 0.2
    alpha3: float = 0.2
    alpha4: float = 0.2

    def __post_init__(self) -> None:
        for name in ("alpha1", "alpha2", "alpha3", "alpha4"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be finite and >= 0; got {value}")


def odometry_step(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    """(rot1, trans, rot2) of the odometry step from pose ``before`` to ``after`` (x, y, yaw)."""
    dx, dy = float(after[0] - before[0]), float(after[1] - before[1])
    trans = math.hypot(dx, dy)
    rot1 = 0.0 if trans < MIN_TRANSLATION_M else float(wrap_angle(math.atan2(dy, dx) - before[2]))
    rot2 = float(wrap_angle(after[2] - before[2] - rot1))
    return rot1, trans, rot2


def sample_motion(
    poses: np.ndarray,
    step: tuple[float, float, float],
    noise: MotionNoise,
    rng: np.random.Generator,
) -> np.ndarray:
    """Move particles ``poses`` [P, 3] (x, y, yaw) by one odometry step with sampled noise.

    As AMCL, a step driven backwards is read as a forward step turned by π, so its rotation
    noise is that of the small turn it is (``min(|rot|, |π - rot|)``).
    """
    rot1, trans, rot2 = step
    P = poses.shape[0]
    r1 = min(abs(rot1), abs(float(wrap_angle(rot1 - math.pi))))
    r2 = min(abs(rot2), abs(float(wrap_angle(rot2 - math.pi))))
    sd_rot1 = math.sqrt(noise.alpha1 * r1**2 + noise.alpha2 * trans**2)
    sd_trans = math.sqrt(noise.alpha3 * trans**2 + noise.alpha4 * (r1**2 + r2**2))
    sd_rot2 = math.sqrt(noise.alpha1 * r2**2 + noise.alpha2 * trans**2)
    rot1_hat = rot1 - sd_rot1 * rng.standard_normal(P)
    trans_hat = trans - sd_trans * rng.standard_normal(P)
    rot2_hat = rot2 - sd_rot2 * rng.standard_normal(P)
    heading = poses[:, 2] + rot1_hat
    out = np.empty_like(poses)
    out[:, 0] = poses[:, 0] + trans_hat * np.cos(heading)
    out[:, 1] = poses[:, 1] + trans_hat * np.sin(heading)
    out[:, 2] = wrap_angle(heading + rot2_hat)
    return out
