"""Record the mapper's topics into a rosbag2 MCAP bag (``gp-mapper record``'s engine).

``ros2 bag record`` (rosbag2_py) is not installable here; this is its small core. Each
topic is subscribed with ``raw=True`` (the callback gets the CDR bytes) and written with
rosbags, whose MCAP output (profile ``ros2``, ``ros2msg`` schemas, ``cdr`` channels) opens
in Foxglove and in ``ros2 bag``. Stops when asked (a ``threading.Event``) or after a
duration. The command line is ``gp_mapper.commands.record``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node, NodeNameNonExistentError
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.typesys import Stores, get_typestore

from gp_mapper.ros.errors import BagError, MessageTypeError
from gp_mapper.ros.msg_types import message_class
from gp_mapper.ros.qos import DIAGNOSTICS_QOS, MAP_QOS, qos_to_bag, recording_qos

logger = logging.getLogger(__name__)

DEFAULT_NODE = "/gp_mapper"
# The mapper's outputs (relative to its node name) and /diagnostics, with the type and
# the QoS the node publishes them with, so they are subscribed before the node appears
# and the latched maps are received even when the recorder starts later.
NODE_OUTPUTS: Mapping[str, tuple[str, QoSProfile]] = {
    "mean": ("nav_msgs/msg/OccupancyGrid", MAP_QOS),
    "variance": ("nav_msgs/msg/OccupancyGrid", MAP_QOS),
    "field": ("sensor_msgs/msg/PointCloud2", MAP_QOS),
    "inducing_points": ("visualization_msgs/msg/MarkerArray", MAP_QOS),
    "field_cells": ("visualization_msgs/msg/Marker", MAP_QOS),
}
DIAGNOSTICS_TOPIC = ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", DIAGNOSTICS_QOS)
# Graph topics every node has; never worth recording as a node's "inputs".
_INFRASTRUCTURE_TOPICS = frozenset({"/parameter_events", "/rosout", "/clock"})
# History depth of discovered (volatile) topics: a 100 Hz sensor for 10 s of executor lag.
RECORD_QUEUE_DEPTH = 1000
# How often the recorder re-checks the graph for topics it still waits for [s]; topics
# that appear late (a bag player started after the recorder) are picked up then.
_DISCOVERY_PERIOD_S = 0.5
# Executor turn length: bounds how late a stop request is noticed [s].
_SPIN_SLICE_S = 0.05
# After a stop, messages already delivered to the subscriptions are still written for
# this long [s], so a stop right after a publish does not lose it.
_DRAIN_S = 0.25
STORAGES: Mapping[str, StoragePlugin] = {
    "mcap": StoragePlugin.MCAP,
    "sqlite3": StoragePlugin.SQLITE3,
}
NODE_NAME = "gp_mapper_recorder"


@dataclass
class RecordResult:
    """What a recording wrote.

    Attributes:
        path: the bag directory.
        counts: messages written per topic.
        missing: requested topics that never had a publisher while recording.
    """

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def _split_node_name(node_name: str) -> tuple[str, str]:
    """``/ns/name`` -> (``name``, ``/ns``); ``name`` -> (``name``, ``/``)."""
    full = node_name if node_name.startswith("/") else f"/{node_name}"
    namespace, _, name = full.rpartition("/")
    return name, namespace or "/"


class _Recording:
    """Subscriptions writing raw CDR into one rosbags Writer (executor thread only)."""

    def __init__(self, node: Node, writer: Writer) -> None:
        self._node = node
        self._writer = writer
        self._typestore = get_typestore(Stores.ROS2_JAZZY)
        self.counts: dict[str, int] = {}

    def add(self, topic: str, type_name: str, qos: QoSProfile) -> bool:
        """Subscribe to ``topic`` and add its connection; False if the type is unusable."""
        if topic in self.counts:
            return True
        try:
            cls = message_class(type_name)
        except MessageTypeError as err:
            logger.warning("not recording %s: %s", topic, err)
            return False
        if type_name not in self._typestore.types:
            logger.warning("not recording %s: no message definition for %s", topic, type_name)
            return False
        connection = self._writer.add_connection(
            topic, type_name, typestore=self._typestore, offered_qos_profiles=[qos_to_bag(qos)]
        )
        self.counts[topic] = 0

        def on_message(raw: bytes) -> None:
            self._writer.write(connection, self._node.get_clock().now().nanoseconds, raw)
            self.counts[topic] += 1

        self._node.create_subscription(cls, topic, on_message, qos, raw=True)
        logger.info("recording %s [%s]", topic, type_name)
        return True


def _discover(node: Node, pending: dict[str, None], recording: _Recording) -> None:
    """Subscribe to every pending topic that now has a publisher on the graph."""
    if not pending:
        return
    graph = dict(node.get_topic_names_and_types())
    for topic in list(pending):
        types = graph.get(topic)
        if not types:
            continue
        if len(types) > 1:
            logger.warning("%s has several types %s; recording %s", topic, types, types[0])
        offered = [info.qos_profile for info in node.get_publishers_info_by_topic(topic)]
        if not offered:
            continue
        recording.add(topic, types[0], recording_qos(offered, RECORD_QUEUE_DEPTH))
        del pending[topic]


def _node_inputs(node: Node, node_name: str) -> list[str]:
    name, namespace = _split_node_name(node_name)
    try:
        subs = node.get_subscriber_names_and_types_by_node(name, namespace)
    except NodeNameNonExistentError:
        return []
    return [topic for topic, _ in subs if topic not in _INFRASTRUCTURE_TOPICS]


def record_bag(
    out: Path,
    *,
    node_name: str = DEFAULT_NODE,
    inputs: bool = False,
    topics: Sequence[str] = (),
    duration_s: float | None = None,
    storage: str = "mcap",
    use_sim_time: bool = False,
    stop: threading.Event | None = None,
) -> RecordResult:
    """Record the mapper's outputs (and optionally its inputs and extra topics) to a bag.

    Runs its own rclpy context, so it can run beside other nodes of the same process.

    Args:
        out: bag directory to create; must not exist.
        node_name: fully qualified name of the mapper node (outputs are ``<node>/mean``...).
        inputs: also record the node's subscribed topics, found on the graph.
        topics: extra topics; types and QoS come from their publishers on the graph.
            Input and extra topics are looked for during the whole recording and
            subscribed once they have a publisher.
        duration_s: stop after this many seconds (None: until ``stop`` is set).
        storage: ``"mcap"`` or ``"sqlite3"``.
        use_sim_time: stamp with /clock time instead of the system clock.
        stop: set it to stop; the bag is closed either way.

    Returns:
        RecordResult with the per-topic message counts.

    Raises:
        BagError: the output exists or cannot be written, or the storage is unknown.
    """
    out = Path(out)
    if storage not in STORAGES:
        raise BagError(f"{out}: unknown storage {storage!r} (one of {', '.join(STORAGES)})")
    if out.exists():
        raise BagError(f"{out}: already exists; choose a new bag directory")
    stop = stop if stop is not None else threading.Event()
    writer = Writer(out, version=Writer.VERSION_LATEST, storage_plugin=STORAGES[storage])
    try:
        writer.open()
    except (WriterError, OSError) as err:
        raise BagError(f"{out}: cannot create bag: {err}") from err

    context = Context()
    rclpy.init(context=context, args=[])
    node = Node(
        NODE_NAME,
        context=context,
        parameter_overrides=[Parameter("use_sim_time", value=use_sim_time)],
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    recording = _Recording(node, writer)
    try:
        base = node_name.rstrip("/") or ""
        for suffix, (type_name, qos) in NODE_OUTPUTS.items():
            recording.add(f"{base}/{suffix}", type_name, qos)
        recording.add(*DIAGNOSTICS_TOPIC)
        pending: dict[str, None] = dict.fromkeys(t for t in topics if t not in recording.counts)
        look_for_inputs = inputs
        start = time.monotonic()
        next_discovery = start
        while not stop.is_set() and context.ok():
            now = time.monotonic()
            if duration_s is not None and now - start >= duration_s:
                break
            if now >= next_discovery:
                if look_for_inputs:
                    found = [t for t in _node_inputs(node, node_name) if t not in recording.counts]
                    if found:
                        pending.update(dict.fromkeys(found))
                        look_for_inputs = False
                _discover(node, pending, recording)
                next_discovery = now + _DISCOVERY_PERIOD_S
            executor.spin_once(timeout_sec=_SPIN_SLICE_S)
        drain_until = time.monotonic() + _DRAIN_S
        while context.ok() and time.monotonic() < drain_until:
            executor.spin_once(timeout_sec=_SPIN_SLICE_S)
        missing = sorted(pending)
        if look_for_inputs:
            missing.append(f"inputs of {node_name}")
        if missing:
            logger.warning("never found on the graph: %s", ", ".join(missing))
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        writer.close()
    return RecordResult(out, dict(recording.counts), missing)
