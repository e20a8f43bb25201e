"""Play a rosbag2 bag (MCAP or sqlite3) onto a live ROS graph (``gp-mapper play``'s engine).

``ros2 bag play`` (rosbag2_py) is not installable here; this is its small core. Each
recorded message is published as its raw CDR bytes (rclpy publishes serialized data as
is), on a publisher created with the class resolved from the recorded type name, paced to
the bag's receive stamps divided by ``--rate``, with the bag time on ``/clock`` for nodes
running with ``use_sim_time``. The command line is ``gp_mapper.commands.play``.
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
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.publisher import Publisher
from rosbags.interfaces import Connection
from rosbags.rosbag2 import Reader, ReaderError
from rosgraph_msgs.msg import Clock

from gp_mapper.io.pose_types import TF_STATIC_TOPIC
from gp_mapper.ros.errors import BagError, MessageTypeError
from gp_mapper.ros.msg_types import message_class
from gp_mapper.ros.qos import playback_qos
from gp_mapper.ros.stamps import ns_to_stamp

logger = logging.getLogger(__name__)

DEFAULT_RATE = 1.0
# Seconds to wait for every played topic to have a subscriber before starting.
DEFAULT_WAIT_SUBSCRIBERS_S = 5.0
# History depth of the player's volatile publishers: a replay we verified (1250
# messages at x20) lost nothing with a depth-1000 reliable subscriber.
PLAY_QUEUE_DEPTH = 1000
# Longest single sleep, so a stop request or Ctrl-C is honoured promptly [s].
_SLEEP_SLICE_S = 0.05
# How often the subscriber wait re-checks the graph [s].
_POLL_S = 0.05
# After the last message, how long reliable publishers may take to have it acknowledged.
FLUSH_TIMEOUT_S = 5.0
NODE_NAME = "gp_mapper_player"
# Pause between seeing every subscriber and the first message (see _wait_for_subscribers).
DISCOVERY_SETTLE_S = 0.5
CLOCK_TOPIC = "/clock"


@dataclass
class PlayResult:
    """What a play published.

    Attributes:
        published: messages published per (remapped) topic.
        duration_s: wall time spent playing, excluding the subscriber wait [s].
        interrupted: stopped before the end of the bag.
    """

    published: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    interrupted: bool = False


def _open_reader(path: Path) -> Reader:
    path = Path(path)
    if not path.exists():
        raise BagError(f"{path}: no such bag")
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, OSError) as err:
        raise BagError(f"{path}: cannot open bag: {err}") from err
    return reader


def _select(
    connections: Sequence[Connection], topics: Sequence[str] | None, path: Path
) -> list[Connection]:
    if topics is None:
        return list(connections)
    recorded = {c.topic for c in connections}
    missing = sorted(set(topics) - recorded)
    if missing:
        raise BagError(f"{path}: no topic {', '.join(missing)} (has {', '.join(sorted(recorded))})")
    return [c for c in connections if c.topic in set(topics)]


def _make_publishers(
    node: Node, connections: Sequence[Connection], remaps: Mapping[str, str]
) -> dict[int, tuple[str, Publisher]]:
    """One publisher per output topic; connection id -> (topic, publisher)."""
    by_topic: dict[str, tuple[str, Publisher]] = {}
    out: dict[int, tuple[str, Publisher]] = {}
    for conn in connections:
        topic = remaps.get(conn.topic, conn.topic)
        if topic in by_topic:
            if by_topic[topic][0] != conn.msgtype:
                raise BagError(
                    f"topic {topic} is recorded with two types: {by_topic[topic][0]} and "
                    f"{conn.msgtype}"
                )
            out[conn.id] = (topic, by_topic[topic][1])
            continue
        try:
            cls = message_class(conn.msgtype)
        except MessageTypeError as err:
            logger.warning("skipping %s: %s", conn.topic, err)
            continue
        offered = getattr(conn.ext, "offered_qos_profiles", None) or []
        qos = playback_qos(offered, PLAY_QUEUE_DEPTH, latched=conn.topic == TF_STATIC_TOPIC)
        publisher = node.create_publisher(cls, topic, qos)
        by_topic[topic] = (conn.msgtype, publisher)
        out[conn.id] = (topic, publisher)
    return out


def _wait_for_subscribers(
    publishers: Mapping[str, Publisher], timeout_s: float, stop: threading.Event | None
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        waiting = sorted(t for t, p in publishers.items() if p.get_subscription_count() < 1)
        if not waiting:
            # The publisher sees a subscriber before that subscriber has matched the
            # publisher; best-effort messages sent in between are lost (seen: the first 3).
            _sleep_until(time.monotonic() + DISCOVERY_SETTLE_S, stop)
            return
        if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            logger.warning("no subscriber on %s after %.1f s; playing anyway", waiting, timeout_s)
            return
        time.sleep(_POLL_S)


def _sleep_until(deadline: float, stop: threading.Event | None) -> bool:
    """Sleep to a monotonic deadline; False if asked to stop first."""
    while True:
        if stop is not None and stop.is_set():
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0.0:
            return True
        time.sleep(min(remaining, _SLEEP_SLICE_S))


def play_bag(
    path: Path,
    *,
    rate: float = DEFAULT_RATE,
    topics: Sequence[str] | None = None,
    remaps: Mapping[str, str] | None = None,
    publish_clock: bool = True,
    wait_subscribers_s: float = DEFAULT_WAIT_SUBSCRIBERS_S,
    stop: threading.Event | None = None,
) -> PlayResult:
    """Publish every message of a bag at its recorded pace divided by ``rate``.

    Runs its own rclpy context (no signal handlers: Ctrl-C raises KeyboardInterrupt in
    the caller), so it can run beside other nodes of the same process.

    Args:
        path: the bag directory, or its single storage file.
        rate: playback speed factor (> 0).
        topics: recorded topics to play; None plays all.
        remaps: recorded topic -> published topic.
        publish_clock: publish the bag time (the receive stamp) on /clock before each
            message.
        wait_subscribers_s: wait up to this long for every topic to have a subscriber.
        stop: set it to stop early (the result says interrupted).

    Returns:
        PlayResult with the per-topic counts.

    Raises:
        BagError: the bag cannot be opened, lacks a requested topic, or has nothing
            playable.
        ValueError: rate is not positive.
    """
    if not rate > 0.0:
        raise ValueError(f"rate must be > 0; got {rate}")
    remaps = dict(remaps or {})
    reader = _open_reader(path)
    context = Context()
    rclpy.init(context=context, args=[])
    node = Node(NODE_NAME, context=context)
    result = PlayResult()
    try:
        connections = _select(reader.connections, topics, Path(path))
        publishers = _make_publishers(node, connections, remaps)
        if not publishers:
            raise BagError(f"{path}: no playable topic")
        unique = {topic: pub for topic, pub in publishers.values()}
        clock_pub = node.create_publisher(Clock, CLOCK_TOPIC, PLAY_QUEUE_DEPTH)
        if wait_subscribers_s > 0.0:
            _wait_for_subscribers(unique, wait_subscribers_s, stop)
        result.published = dict.fromkeys(unique, 0)
        wall_start = time.monotonic()
        bag_start: int | None = None
        last_clock = None
        selected = [c for c in connections if c.id in publishers]
        for conn, stamp_ns, raw in reader.messages(connections=selected):
            if bag_start is None:
                bag_start = stamp_ns
            due = wall_start + (stamp_ns - bag_start) / 1e9 / rate
            if not _sleep_until(due, stop):
                result.interrupted = True
                break
            if publish_clock and stamp_ns != last_clock:
                clock_pub.publish(Clock(clock=ns_to_stamp(stamp_ns)))
                last_clock = stamp_ns
            topic, publisher = publishers[conn.id]
            publisher.publish(bytes(raw))
            result.published[topic] += 1
        result.duration_s = time.monotonic() - wall_start
        flush = Duration(seconds=FLUSH_TIMEOUT_S)
        for topic, publisher in unique.items():
            if not publisher.wait_for_all_acked(flush):
                logger.warning("%s: not every subscriber acknowledged in time", topic)
    finally:
        reader.close()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return result
