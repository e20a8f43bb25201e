"""The pose message types a bag may carry, by the short names the mapper's parameters use."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["FIELD_MSGTYPE", "POSE_MSGTYPES"]

# sensor_msgs/MagneticField: field in tesla, sensor frame (REP-103/145; message comments).
FIELD_MSGTYPE = "sensor_msgs/msg/MagneticField"

POSE_MSGTYPES: Mapping[str, str] = MappingProxyType(
    {
        "pose_stamped": "geometry_msgs/msg/PoseStamped",
        "pose_with_covariance_stamped": "geometry_msgs/msg/PoseWithCovarianceStamped",
        "odometry": "nav_msgs/msg/Odometry",
    }
)
