"""Stamps: ``builtin_interfaces/Time`` and integer nanoseconds, and message headers.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

from builtin_interfaces.msg import Time
from std_msgs.msg import Header

NS_PER_S = 1_000_000_000  # builtin_interfaces/Time: sec + nanosec, nanosec < 1e9


def stamp_to_ns(stamp: Time) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def ns_to_stamp(stamp_ns: int) -> Time:
    """Integer nanoseconds -> ``builtin_interfaces/Time`` (floor division for negatives)."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return Time(sec=sec, nanosec=nanosec)


def message_header(frame_id: str, stamp_ns: int) -> Header:
    return Header(stamp=ns_to_stamp(stamp_ns), frame_id=frame_id)
