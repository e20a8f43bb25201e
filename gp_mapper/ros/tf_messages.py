"""TF messages: ``tf2_msgs/TFMessage`` in as Transform records, a planar transform out.

Pure: every function maps its arguments to a new record or message, so each is tested on
in-memory messages. ``tf2_msgs`` itself is imported by the node that needs it (it has no
wheel; ``make venv`` builds it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from geometry_msgs.msg import TransformStamped

from gp_mapper.mapping.records import Transform
from gp_mapper.ros.stamps import message_header, stamp_to_ns


def transform_from_msg(stamped: TransformStamped) -> Transform:
    """``geometry_msgs/TransformStamped`` -> Transform, values unchecked (the buffer refuses
    what tf2 would)."""
    t, q = stamped.transform.translation, stamped.transform.rotation
    return Transform(
        stamp_to_ns(stamped.header.stamp),
        stamped.header.frame_id,
        stamped.child_frame_id,
        np.array([t.x, t.y, t.z], dtype=np.float64),
        np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
    )


def transforms_from_msg(msg: Any) -> list[Transform]:
    """``tf2_msgs/TFMessage`` -> one Transform per transform it carries."""
    return [transform_from_msg(stamped) for stamped in msg.transforms]


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
