"""TF out: a planar transform as ``geometry_msgs/TransformStamped`` (TF in is
``input_messages.transforms_from_msg``).

Pure: maps its arguments to a new message, so it is tested on in-memory messages.
``tf2_msgs`` itself is imported by the node that needs it (it has no wheel; ``make venv``
builds it).
"""

from __future__ import annotations

import math

from geometry_msgs.msg import TransformStamped

from gp_mapper.ros.stamps import message_header


def planar_transform(
    parent: str, child: str, stamp_ns: int, x: float, y: float, yaw: float
) -> TransformStamped:
    """A ``geometry_msgs/TransformStamped`` of a planar transform: ``child``'s origin at
    (x, y) [m] in ``parent``, turned by ``yaw`` [rad] about z."""
    out = TransformStamped(header=message_header(parent, stamp_ns), child_frame_id=child)
    out.transform.translation.x, out.transform.translation.y = float(x), float(y)
    out.transform.rotation.z = math.sin(0.5 * yaw)
    out.transform.rotation.w = math.cos(0.5 * yaw)
    return out
