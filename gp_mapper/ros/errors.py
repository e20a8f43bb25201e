"""Errors raised by the ROS layer (gp_mapper.ros)."""

from __future__ import annotations


class RosLayerError(Exception):
    """Base class of every error raised by gp_mapper.ros."""


class ConversionError(RosLayerError, ValueError):
    """A ROS message or array cannot be converted (wrong shape, layout or field set)."""


class MessageTypeError(RosLayerError, LookupError):
    """A ROS type name (``pkg/msg/Name``) does not resolve to an installed message class."""


class BagError(RosLayerError):
    """A bag cannot be played or recorded; the message names the path and the fault."""


class TransitionError(RosLayerError):
    """A lifecycle transition that ``autostart`` asked for did not succeed; the message is the
    reason, which the node has already logged."""


def one_line(err: BaseException, *, with_type: bool = True) -> str:
    """``err`` on one line, after its type name (``MemoryError`` has no message at all)."""
    text = " ".join(str(err).split())
    if not with_type:
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
