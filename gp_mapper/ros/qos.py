"""Named QoS profiles of the gp_mapper node.

Map products follow REP-2003 and Nav2's map server: reliable + transient local, keep last 1,
so a late subscriber (RViz started after the node) still receives the current map. Sensor
inputs use ``qos_profile_sensor_data`` (best effort, compatible with both reliable and
best-effort publishers) with a deeper queue, because a 100 Hz magnetometer can outrun one
executor turn while a service call runs.
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

# Messages kept per sensor subscription: one second of a 100 Hz magnetometer (the spec's
# 50-200 range for batch windows); the default of qos_profile_sensor_data is only 5.
SENSOR_QUEUE_DEPTH = 100

# /diagnostics: reliable, volatile, depth 10, as diagnostic_updater publishes it.
DIAGNOSTICS_QUEUE_DEPTH = 10

MAP_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Map topics (``~/mean``, ``~/variance``, ``~/field``, ``~/inducing_points``)."""

DIAGNOSTICS_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=DIAGNOSTICS_QUEUE_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""``/diagnostics``."""


def sensor_qos(depth: int = SENSOR_QUEUE_DEPTH) -> QoSProfile:
    """``qos_profile_sensor_data`` (best effort, volatile) with a deeper queue.

    Args:
        depth: messages kept per subscription (>= 1).
    """
    if depth < 1:
        raise ValueError(f"sensor queue depth must be >= 1; got {depth}")
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=qos_profile_sensor_data.reliability,
        durability=qos_profile_sensor_data.durability,
    )


SENSOR_QOS = sensor_qos()
"""Sensor inputs (``mag``, ``pose``) at the default depth."""
