"""The node's inputs as gp_mapper records: magnetometer readings and poses of each pose type.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose as PoseMsg
from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import MagneticField

from gp_mapper.mapping.records import FieldReading, Pose, Transform
from gp_mapper.ros.stamps import stamp_to_ns


def field_reading_from_msg(msg: MagneticField) -> FieldReading:
    """``sensor_msgs/MagneticField`` -> FieldReading, unchanged: tesla, sensor frame.

    NaN, infinite or all-zero vectors pass through; the pipeline counts and drops them.

    Args:
        msg: the magnetometer message (``magnetic_field`` in T, ``header.frame_id`` the
            sensor frame).

    Returns:
        FieldReading(stamp_ns, field_t [3] float64 in T, frame_id).
    """
    v = msg.magnetic_field
    field_t = np.array([v.x, v.y, v.z], dtype=np.float64)
    return FieldReading(stamp_to_ns(msg.header.stamp), field_t, msg.header.frame_id)


def transforms_from_msg(msg: Any) -> list[Transform]:
    """``tf2_msgs/TFMessage`` -> one Transform per ``geometry_msgs/TransformStamped``.

    Values pass through unchecked (a NaN, a non-unit quaternion); the pipeline counts and
    drops what tf2 would refuse.
    """
    out = []
    for stamped in msg.transforms:
        t, q = stamped.transform.translation, stamped.transform.rotation
        out.append(
            Transform(
                stamp_to_ns(stamped.header.stamp),
                stamped.header.frame_id,
                stamped.child_frame_id,
                np.array([t.x, t.y, t.z], dtype=np.float64),
                np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
            )
        )
    return out


def _pose_record(stamp: Time, pose: PoseMsg) -> Pose:
    p, q = pose.position, pose.orientation
    return Pose(
        stamp_to_ns(stamp),
        np.array([p.x, p.y, p.z], dtype=np.float64),
        np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
    )


def pose_from_pose_stamped(msg: PoseStamped) -> Pose:
    """``geometry_msgs/PoseStamped`` -> Pose (position [3] m, orientation xyzw [4])."""
    return _pose_record(msg.header.stamp, msg.pose)


def pose_from_pose_with_covariance(msg: PoseWithCovarianceStamped) -> Pose:
    """``geometry_msgs/PoseWithCovarianceStamped`` -> Pose; the covariance is not used."""
    return _pose_record(msg.header.stamp, msg.pose.pose)


def pose_from_odometry(msg: Odometry) -> Pose:
    """``nav_msgs/Odometry`` -> Pose of ``child_frame_id`` in ``header.frame_id``."""
    return _pose_record(msg.header.stamp, msg.pose.pose)


class PoseInput(NamedTuple):
    """A pose message type the node can subscribe to, and its conversion."""

    msg_type: type
    convert: Callable[[Any], Pose]  # takes a msg_type message


# Values of the node parameter ``pose_type``.
POSE_INPUTS: Mapping[str, PoseInput] = {
    "pose_stamped": PoseInput(PoseStamped, pose_from_pose_stamped),
    "pose_with_covariance": PoseInput(PoseWithCovarianceStamped, pose_from_pose_with_covariance),
    "odometry": PoseInput(Odometry, pose_from_odometry),
}
