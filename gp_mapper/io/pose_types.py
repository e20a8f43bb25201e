"""The pose message types a bag may carry, by the short names the mapper's parameters use."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["FIELD_MSGTYPE", "POSE_MSGTYPES", "TF_MSGTYPE", "TF_STATIC_TOPIC", "TF_TOPIC"]

# sensor_msgs/MagneticField: field in tesla, sensor frame (REP-103/145; message comments).
FIELD_MSGTYPE = "sensor_msgs/msg/MagneticField"

# The TF tree (REP-105): tf2_msgs/TFMessage on /tf (in time) and /tf_static (for all time).
TF_MSGTYPE = "tf2_msgs/msg/TFMessage"
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"

POSE_MSGTYPES: Mapping[str, str] = MappingProxyType(
    {
        "pose_stamped": "geometry_msgs/msg/PoseStamped",
        "pose_with_covariance_stamped": "geometry_msgs/msg/PoseWithCovarianceStamped",
        "odometry": "nav_msgs/msg/Odometry",
    }
)
