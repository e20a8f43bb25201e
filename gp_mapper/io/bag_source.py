"""Read magnetometer and pose records from a rosbag2 (MCAP or sqlite3) with rosbags.

The records are the mapping layer's: :class:`~gp_mapper.mapping.records.FieldReading` (tesla,
sensor frame) and either :class:`~gp_mapper.mapping.records.Pose` (a pose topic of the sensor)
or the TF tree's :class:`~gp_mapper.mapping.records.Transform` (``/tf``) and
:class:`~gp_mapper.mapping.records.StaticTransform` (``/tf_static``), stamped with the message
HEADER stamps in integer nanoseconds (not the bag's receive times), and yielded in header-stamp
order within a small reorder window (static transforms first: they hold for all time).
"""

from __future__ import annotations

import heapq
import logging
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import apsw
import numpy as np
from rosbags.rosbag2 import Reader, ReaderError
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_typestore

from gp_mapper.mapping.pose_buffer import NS_PER_S
from gp_mapper.mapping.records import FieldReading, Pose, StaticTransform, Transform

from .bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC
from .errors import BagError
from .pose_types import FIELD_MSGTYPE, POSE_MSGTYPES, TF_MSGTYPE, TF_STATIC_TOPIC, TF_TOPIC

__all__ = [
    "DEFAULT_REORDER_WINDOW_S",
    "STORAGE_SUFFIXES",
    "BagInfo",
    "TopicSummary",
    "bag_info",
    "bag_pose_source",
    "read_bag",
]

# pose_source values (the node's parameter): poses from the TF tree, or from a pose topic.
TF_SOURCE = "tf"
TOPIC_SOURCE = "topic"

BagRecord = Pose | FieldReading | Transform | StaticTransform

_LOG = logging.getLogger(__name__)

# Header stamps of two topics reach a recorder with different latencies, so the bag order can
# disagree with the stamp order by a few tens of ms. Records are held this long (in stamp time)
# and released in stamp order; one arriving later than that is passed on as it is (the mapping
# pipeline counts it as out of order).
DEFAULT_REORDER_WINDOW_S = 0.2
# Storage file suffix -> storage identifier (the suffixes rosbag2 and rosbags use).
STORAGE_SUFFIXES: Mapping[str, str] = MappingProxyType({".mcap": "mcap", ".db3": "sqlite3"})
# Names of a folder's entries quoted in a "no bag here" error, at most.
MAX_LISTED = 10
# What a damaged bag raises inside rosbags (found by truncating and overwriting bytes of MCAP
# and sqlite3 bags): its ReaderError, its CDR SerdeError, apsw's CorruptError (rosbags reads
# sqlite3 through apsw), and, for garbage lengths and strings, struct / overflow / index /
# value (incl. UnicodeDecodeError) errors; OSError for unreadable files.
_DAMAGE_ERRORS: tuple[type[BaseException], ...] = (
    ReaderError,
    SerdeError,
    apsw.Error,
    struct.error,
    OverflowError,
    EOFError,
    IndexError,
    KeyError,
    ValueError,
    OSError,
)


class TopicSummary(NamedTuple):
    """One topic of a bag: message type and number of messages."""

    msgtype: str
    count: int


class BagInfo(NamedTuple):
    """A bag's contents.

    Attributes:
        path: the bag (directory, or a single .mcap / .db3 file).
        storage: ``"mcap"`` or ``"sqlite3"``.
        topics: topic name -> (message type, count), sorted by name.
        message_count: all messages.
        start_ns: earliest bag (receive) time, ns since the epoch; 0 for an empty bag.
        end_ns: latest bag (receive) time, ns since the epoch; 0 for an empty bag.
    """

    path: Path
    storage: str
    topics: dict[str, TopicSummary]
    message_count: int
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last message (bag time)."""
        return (self.end_ns - self.start_ns) / NS_PER_S


def bag_info(path: str | os.PathLike[str]) -> BagInfo:
    """Describe a bag: storage, topics with types and counts, time span.

    Args:
        path: a rosbag2 directory, or a single .mcap / .db3 file.

    Returns:
        The bag's summary.

    Raises:
        BagError: the path does not exist, is not a bag, or the bag is damaged.
    """
    bag = Path(path)
    with _open(bag) as reader:
        try:
            topics = {
                name: TopicSummary(str(info.msgtype), int(info.msgcount))
                for name, info in sorted(reader.topics.items())
            }
            count = int(reader.message_count)
            start = int(reader.start_time) if count else 0
            # rosbags reports end_time one past the last message.
            end = int(reader.end_time) - 1 if count else 0
        except _DAMAGE_ERRORS as err:
            raise BagError(f"{bag}: damaged bag ({type(err).__name__}: {err})") from err
    return BagInfo(bag, _storage_of(bag), topics, count, start, end)


def bag_pose_source(info: BagInfo, pose_source: str, pose_topic: str, mag_topic: str) -> str:
    """The pose source a replay of this bag uses: ``pose_source`` if the bag carries it, else
    the other one where the bag has it (a bag of the sensor's pose has no /tf, an older
    robot bag no pose topic).

    Raises:
        BagError: the bag has neither /tf nor the pose topic; the message names every topic
            missing (the magnetometer's too) and lists the bag's topics.
    """
    if pose_source not in (TF_SOURCE, TOPIC_SOURCE):
        raise BagError(f"unknown pose_source {pose_source!r}; expected 'tf' or 'topic'")
    has = {TF_SOURCE: TF_TOPIC in info.topics, TOPIC_SOURCE: pose_topic in info.topics}
    if has[pose_source]:
        return pose_source
    other = TOPIC_SOURCE if pose_source == TF_SOURCE else TF_SOURCE
    if has[other]:
        return other
    # One answer naming every missing topic, not a fix-one-rerun-find-the-next loop.
    missing = [topic for topic in (mag_topic, pose_topic) if topic not in info.topics]
    what = "topic" if len(missing) == 1 else "topics"
    listing = ", ".join(f"{name} [{t.msgtype}]" for name, t in info.topics.items())
    raise BagError(
        f"{info.path}: no {what} {' and '.join(missing)} (nor {TF_TOPIC}: no poses for "
        f"pose_source topic or tf); the bag holds {listing or 'no topics'}"
    )


def read_bag(
    path: str | os.PathLike[str],
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    *,
    reorder_window_s: float = DEFAULT_REORDER_WINDOW_S,
    pose_source: str = TOPIC_SOURCE,
) -> Iterator[BagRecord]:
    """Stream the poses (or transforms) and magnetometer readings of a bag, in stamp order.

    The bag is checked before this returns (path, storage, both topics, their types), so a
    missing topic fails here, not at the first ``next()``. Damage found while reading (a
    truncated file) raises :class:`BagError` from the iteration.

    Args:
        path: a rosbag2 directory, or a single .mcap / .db3 file.
        mag_topic: topic of ``sensor_msgs/msg/MagneticField`` messages (tesla).
        pose_topic: topic of the poses.
        pose_type: ``"pose_stamped"``, ``"pose_with_covariance_stamped"``, ``"odometry"``, or
            ``"auto"`` to take whichever of the three the pose topic carries.
        reorder_window_s: seconds (of stamp time) a record is held to restore stamp order; 0
            yields in bag order.
        pose_source: ``"topic"`` reads ``pose_topic``; ``"tf"`` reads ``/tf`` and
            ``/tf_static`` instead (``pose_topic`` and ``pose_type`` are then unused).

    Returns:
        An iterator of :class:`FieldReading` (field [3] T, sensor frame id) and either
        :class:`Pose` (position [3] m, orientation (x, y, z, w) [4]) or :class:`Transform`
        and :class:`StaticTransform`, stamps in integer nanoseconds.

    Raises:
        BagError: the path is missing or not a bag, a topic is missing (the message lists the
            bag's topics), a topic has an unexpected type, or the bag is damaged.
    """
    if reorder_window_s < 0.0:
        raise ValueError(f"reorder_window_s must be >= 0, got {reorder_window_s}")
    bag = Path(path)
    if pose_type != "auto" and pose_type not in POSE_MSGTYPES:
        raise BagError(
            f"unknown pose type {pose_type!r}; expected 'auto' or one of {sorted(POSE_MSGTYPES)}"
        )
    if pose_source not in (TF_SOURCE, TOPIC_SOURCE):
        raise BagError(f"unknown pose_source {pose_source!r}; expected 'tf' or 'topic'")
    with _open(bag) as reader:
        if pose_source == TF_SOURCE:
            _check_tf_topics(bag, reader, mag_topic)
            readers = {mag_topic: _to_fields, TF_TOPIC: _to_transforms}
            if TF_STATIC_TOPIC in reader.topics:
                readers[TF_STATIC_TOPIC] = _to_static_transforms
        else:
            pose_type = _check_topics(bag, reader, mag_topic, pose_topic, pose_type)
            to_pose = _POSE_READERS[pose_type]
            readers = {mag_topic: _to_fields, pose_topic: lambda msg: [to_pose(msg)]}
    window_ns = round(reorder_window_s * NS_PER_S)
    return _records(bag, readers, window_ns)


def _records(
    bag: Path, readers: Mapping[str, Callable[[Any], list[BagRecord]]], window_ns: int
) -> Iterator[BagRecord]:
    typestore = get_typestore(Stores.ROS2_JAZZY)
    heap: list[tuple[int, int, BagRecord]] = []
    newest = -(2**63)
    index = 0
    with _open(bag) as reader:
        wanted = [c for c in reader.connections if c.topic in readers]
        try:
            for connection, _, raw in reader.messages(connections=wanted):
                msg = typestore.deserialize_cdr(raw, connection.msgtype)
                for record in readers[connection.topic](msg):
                    # A static transform holds for all time: it goes before every record.
                    key = -(2**63) if isinstance(record, StaticTransform) else record.stamp_ns
                    heapq.heappush(heap, (key, index, record))
                    index += 1
                    newest = max(newest, key)
                while heap and heap[0][0] <= newest - window_ns:
                    yield heapq.heappop(heap)[2]
        except _DAMAGE_ERRORS as err:
            raise BagError(
                f"{bag}: damaged or truncated bag after {index} records "
                f"({type(err).__name__}: {err})"
            ) from err
    while heap:
        yield heapq.heappop(heap)[2]


@contextmanager
def _open(bag: Path) -> Iterator[Reader]:
    """Open a bag with rosbags, turning every way it can fail into a BagError naming the bag."""
    if not bag.exists():
        if not bag.parent.is_dir():
            raise BagError(f"no bag at {bag}: the folder {bag.parent} does not exist")
        near = sorted(p.name for p in bag.parent.iterdir())
        shown = ", ".join(near[:MAX_LISTED]) + (", ..." if len(near) > MAX_LISTED else "")
        raise BagError(f"no bag at {bag} (the folder {bag.parent} holds: {shown or 'nothing'})")
    try:
        reader = Reader(bag)
        reader.open()
    except FileNotFoundError as err:
        raise BagError(f"{bag} is not a rosbag2 bag ({err})") from err
    except _DAMAGE_ERRORS as err:
        raise BagError(f"{bag}: cannot open bag ({type(err).__name__}: {err})") from err
    try:
        yield reader
    finally:
        reader.close()


def _check_topics(
    bag: Path, reader: Reader, mag_topic: str, pose_topic: str, pose_type: str
) -> str:
    """Check both topics exist with the right types; return the (resolved) pose type."""
    types = _require(bag, reader, mag_topic, pose_topic, "")
    found = types[pose_topic]
    if pose_type == "auto":
        by_msgtype = {msgtype: name for name, msgtype in POSE_MSGTYPES.items()}
        if found not in by_msgtype:
            raise BagError(f"{bag}: topic {pose_topic} is {found}, not one of {sorted(by_msgtype)}")
        return by_msgtype[found]
    if found != POSE_MSGTYPES[pose_type]:
        hint = next((name for name, t in POSE_MSGTYPES.items() if t == found), None)
        advice = f"; pass pose_type={hint!r}" if hint else ""
        raise BagError(
            f"{bag}: topic {pose_topic} is {found}, expected {POSE_MSGTYPES[pose_type]} "
            f"(pose_type={pose_type!r}){advice}"
        )
    return pose_type


def _require(
    bag: Path, reader: Reader, mag_topic: str, pose_topic: str, note: str
) -> dict[str, str]:
    """The bag's topic -> type, once the magnetometer's and the pose's topics are both there
    and the magnetometer's has its type. ``note`` follows the missing topics' names."""
    types = {name: info.msgtype for name, info in reader.topics.items()}
    listing = ", ".join(f"{name} [{msgtype}]" for name, msgtype in sorted(types.items()))
    # Every missing topic at once: a bag recorded under other names lacks both, and the
    # user should rename both in one go.
    missing = [topic for topic in (mag_topic, pose_topic) if topic not in types]
    if missing:
        what = "topic" if len(missing) == 1 else "topics"
        raise BagError(
            f"{bag}: no {what} {' and '.join(missing)}{note}; the bag holds "
            f"{listing or 'no topics'}"
        )
    if types[mag_topic] != FIELD_MSGTYPE:
        raise BagError(f"{bag}: topic {mag_topic} is {types[mag_topic]}, expected {FIELD_MSGTYPE}")
    return types


def _check_tf_topics(bag: Path, reader: Reader, mag_topic: str) -> None:
    """Check the magnetometer topic and /tf exist with the right types (/tf_static may not)."""
    types = _require(bag, reader, mag_topic, TF_TOPIC, " (pose_source tf)")
    for topic in (TF_TOPIC, TF_STATIC_TOPIC):
        if topic in types and types[topic] != TF_MSGTYPE:
            raise BagError(f"{bag}: topic {topic} is {types[topic]}, expected {TF_MSGTYPE}")


def _storage_of(bag: Path) -> str:
    candidates = [bag] if bag.is_file() else sorted(bag.iterdir())
    for candidate in candidates:
        if candidate.suffix in STORAGE_SUFFIXES:
            return STORAGE_SUFFIXES[candidate.suffix]
    return "unknown"


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * NS_PER_S + int(header.stamp.nanosec)


def _to_fields(msg: Any) -> list[BagRecord]:
    v = msg.magnetic_field
    return [
        FieldReading(
            stamp_ns=_stamp_ns(msg.header),
            field_t=np.array([v.x, v.y, v.z], dtype=np.float64),
            frame_id=str(msg.header.frame_id),
        )
    ]


def _transform(stamped: Any) -> Transform:
    t, q = stamped.transform.translation, stamped.transform.rotation
    return Transform(
        stamp_ns=_stamp_ns(stamped.header),
        parent=str(stamped.header.frame_id),
        child=str(stamped.child_frame_id),
        translation_m=np.array([t.x, t.y, t.z], dtype=np.float64),
        rotation_xyzw=np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
    )


def _to_transforms(msg: Any) -> list[BagRecord]:
    return [_transform(stamped) for stamped in msg.transforms]


def _to_static_transforms(msg: Any) -> list[BagRecord]:
    return [StaticTransform(_transform(stamped)) for stamped in msg.transforms]


def _pose_record(header: Any, pose: Any) -> Pose:
    p, q = pose.position, pose.orientation
    return Pose(
        stamp_ns=_stamp_ns(header),
        position_m=np.array([p.x, p.y, p.z], dtype=np.float64),
        orientation_xyzw=np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
    )


_POSE_READERS: Mapping[str, Callable[[Any], Pose]] = MappingProxyType(
    {
        "pose_stamped": lambda msg: _pose_record(msg.header, msg.pose),
        "pose_with_covariance_stamped": lambda msg: _pose_record(msg.header, msg.pose.pose),
        "odometry": lambda msg: _pose_record(msg.header, msg.pose.pose),
    }
)
