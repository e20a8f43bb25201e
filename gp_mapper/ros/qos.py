"""Named QoS profiles of the gp_mapper node.

Map products follow REP-2003 and Nav2's map server: reliable + transient local, keep last 1,
so a late subscriber (RViz started after the node) still receives the current map. Sensor
inputs use ``qos_profile_sensor_data`` (best effort, compatible with both reliable and
best-effort publishers) with a deeper queue, because a 100 Hz magnetometer can outrun one
executor turn while a service call runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)

# Messages kept per sensor subscription: one second of a 100 Hz magnetometer (within the
# 50-200 a batching subscriber needs); the default of qos_profile_sensor_data is only 5.
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

POSE_QOS = MAP_QOS
"""The localizer's ``amcl_pose``, as AMCL publishes it: a late subscriber gets the last
pose."""

DIAGNOSTICS_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=DIAGNOSTICS_QUEUE_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""``/diagnostics``."""


# tf2_ros's queue for /tf and /tf_static (its DynamicListenerQoS and StaticListenerQoS).
TF_QUEUE_DEPTH = 100

TF_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=TF_QUEUE_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""``/tf``, subscribed and broadcast as tf2_ros does (TransformListener, TransformBroadcaster)."""

TF_STATIC_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=TF_QUEUE_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""``/tf_static``: transient local, so a node started after the static broadcaster (which
sends once) still gets the mounting."""


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


# --------------------------------------------------------------------------------------
# rosbag2 metadata <-> rclpy profiles (for the bag player and recorder)

# rosbags stores "infinite" deadline/lifespan/lease as this sentinel (rosbag2's
# RMW_DURATION_INFINITE in metadata.yaml: sec 9223372036, nsec 854775807).
_INFINITE_SEC = 9_223_372_036
_INFINITE_NSEC = 854_775_807


def qos_to_bag(profile: QoSProfile) -> Qos:
    """An rclpy profile -> the rosbags record of it stored in the bag metadata."""
    infinite = QosTime(_INFINITE_SEC, _INFINITE_NSEC)
    return Qos(
        history=QosHistory(int(profile.history)),
        depth=int(profile.depth),
        reliability=QosReliability(int(profile.reliability)),
        durability=QosDurability(int(profile.durability)),
        deadline=infinite,
        lifespan=infinite,
        liveliness=QosLiveliness(int(profile.liveliness)),
        liveliness_lease_duration=infinite,
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


def playback_qos(offered: Sequence[Qos], depth: int, *, latched: bool = False) -> QoSProfile:
    """The profile to republish a bag topic with.

    Reliable always (a reliable publisher matches reliable and best-effort subscribers);
    transient local if every recorded publisher offered it (map topics, so a late RViz
    still gets them) or ``latched`` says so, volatile otherwise.

    Args:
        offered: the QoS profiles recorded for the topic (may be empty).
        depth: history depth for volatile topics; transient-local topics keep their
            recorded depth (at least 1).
        latched: transient local whatever was recorded (``/tf_static``: its listeners ask
            for transient local, which a volatile publisher cannot serve).
    """
    latched = latched or (
        bool(offered) and all(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered)
    )
    if latched:
        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=max([1, *(int(q.depth) for q in offered)]),
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


def recording_qos(offered: Sequence[QoSProfile], depth: int) -> QoSProfile:
    """The subscription profile that matches every publisher of a topic (as rosbag2 adapts).

    Reliable only if every publisher is reliable (a reliable subscription does not match
    a best-effort publisher); transient local only if every publisher is (a transient-local
    subscription does not match a volatile publisher), so latched maps published before
    the recorder started are still received.

    Args:
        offered: the profiles of the topic's current publishers (may be empty: then
            best effort + volatile, which matches any publisher).
        depth: history depth of the subscription.
    """
    reliable = bool(offered) and all(p.reliability == ReliabilityPolicy.RELIABLE for p in offered)
    latched = bool(offered) and all(
        p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in offered
    )
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )
