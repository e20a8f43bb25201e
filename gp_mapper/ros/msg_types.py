"""Resolve ROS type names (``pkg/msg/Name``) to installed rclpy message classes.

rosidl_runtime_py (``get_message``) is not installable here; the generated packages are
plain Python modules, so ``importlib`` does the same job.
"""

from __future__ import annotations

import importlib

from gp_mapper.ros.errors import MessageTypeError

# Interface kinds a type name may carry; bags hold messages only.
_KINDS = ("msg",)


def message_class(type_name: str) -> type:
    """``"sensor_msgs/msg/MagneticField"`` -> the generated class.

    Args:
        type_name: ``pkg/msg/Name`` (rosbag2, ROS 2) or ``pkg/Name`` (ROS 1 style).

    Raises:
        MessageTypeError: the name is malformed, the package is not installed or has no
            such message.
    """
    parts = type_name.split("/")
    if len(parts) == 2:
        package, kind, name = parts[0], "msg", parts[1]
    elif len(parts) == 3:
        package, kind, name = parts
    else:
        raise MessageTypeError(f"{type_name!r} is not a ROS type name (pkg/msg/Name)")
    if kind not in _KINDS or not package or not name:
        raise MessageTypeError(f"{type_name!r} is not a ROS message type name (pkg/msg/Name)")
    try:
        module = importlib.import_module(f"{package}.{kind}")
    except ImportError as err:
        raise MessageTypeError(
            f"{type_name}: package {package!r} is not installed ({err})"
        ) from err
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise MessageTypeError(f"{type_name}: package {package!r} has no message {name!r}")
    return cls


def type_name(cls: type) -> str:
    """The ROS type name of a generated message class, e.g. ``sensor_msgs/msg/MagneticField``.

    Raises:
        MessageTypeError: ``cls`` is not a generated ROS message class.
    """
    parts = cls.__module__.split(".")
    if len(parts) < 2 or parts[1] not in _KINDS or not hasattr(cls, "_TYPE_SUPPORT"):
        raise MessageTypeError(f"{cls!r} is not a generated ROS message class")
    return f"{parts[0]}/{parts[1]}/{cls.__name__}"
