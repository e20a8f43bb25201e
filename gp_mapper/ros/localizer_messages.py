"""The localizer's outputs as messages: the pose with its covariance and the particle cloud.

Pure: every function maps its arguments to a new message, so each is tested on in-memory
messages.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose, PoseArray, PoseWithCovarianceStamped

from gp_mapper.engine.auxiliary import yaw_from_quaternion
from gp_mapper.ros.stamps import message_header

# Rows/columns of (x, y, yaw) in a geometry_msgs 6 x 6 pose covariance (x, y, z, rx, ry, rz).
PLANAR_AXES = [0, 1, 5]


def yaw_of(q: Any) -> float:
    """The yaw [rad] of a ``geometry_msgs/Quaternion``."""
    return float(yaw_from_quaternion(np.array([q.x, q.y, q.z, q.w])))


def planar_pose_msg(pose: Pose, x: float, y: float, yaw: float) -> Pose:
    """``pose`` set to (x, y) [m] and yaw [rad] about z; returned for chaining."""
    pose.position.x, pose.position.y = float(x), float(y)
    pose.orientation.z, pose.orientation.w = math.sin(0.5 * yaw), math.cos(0.5 * yaw)
    return pose


def pose_with_covariance(
    frame_id: str, stamp_ns: int, mean: np.ndarray, covariance: np.ndarray
) -> PoseWithCovarianceStamped:
    """A planar pose (x, y, yaw) [3] and its covariance [3, 3] as AMCL publishes
    ``amcl_pose``: the 6 x 6 covariance zero but for the x, y and yaw rows and columns."""
    msg = PoseWithCovarianceStamped(header=message_header(frame_id, stamp_ns))
    planar_pose_msg(msg.pose.pose, *mean)
    full = np.zeros((6, 6))
    full[np.ix_(PLANAR_AXES, PLANAR_AXES)] = covariance
    msg.pose.covariance = full.ravel().tolist()
    return msg


def planar_covariance(msg: PoseWithCovarianceStamped) -> np.ndarray:
    """The (x, y, yaw) block [3, 3] of a message's 6 x 6 covariance."""
    full = np.asarray(msg.pose.covariance, dtype=np.float64).reshape(6, 6)
    return full[np.ix_(PLANAR_AXES, PLANAR_AXES)]


def particle_cloud(frame_id: str, stamp_ns: int, poses: np.ndarray, shown: int) -> PoseArray:
    """Particles (x, y, yaw) [P, 3] as a PoseArray of at most ``shown`` (an even subsample)."""
    stride = max(1, math.ceil(poses.shape[0] / shown))
    cloud = PoseArray(header=message_header(frame_id, stamp_ns))
    cloud.poses = [planar_pose_msg(Pose(), *p) for p in poses[::stride]]
    return cloud
