"""Localization against a magnetic map: a Monte Carlo filter on the map's predictive
distribution (ROS-free; the node and ``gp-mapper localize`` drive it)."""

from gp_mapper.mapping.localization.correction import CorrectionSchedule, map_to_odom
from gp_mapper.mapping.localization.field_lookup import FieldLookup, MapNoise
from gp_mapper.mapping.localization.localizer import Localizer, LocalizerConfig, Step
from gp_mapper.mapping.localization.motion import MotionNoise, odometry_step, sample_motion
from gp_mapper.mapping.localization.particles import (
    CHI2_2D_95,
    ParticleSet,
    PoseEstimate,
    kld_size,
)
from gp_mapper.mapping.localization.tf_odometry import (
    PosedReading,
    TfOdometry,
    base_pose,
    base_poses,
    tracked_odometry,
)

__all__ = [
    "CHI2_2D_95",
    "CorrectionSchedule",
    "FieldLookup",
    "Localizer",
    "LocalizerConfig",
    "MapNoise",
    "MotionNoise",
    "ParticleSet",
    "PoseEstimate",
    "PosedReading",
    "Step",
    "TfOdometry",
    "base_pose",
    "base_poses",
    "kld_size",
    "map_to_odom",
    "odometry_step",
    "sample_motion",
    "tracked_odometry",
]
