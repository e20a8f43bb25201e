"""Launch-argument values as ROS reads them (pure: no launch import, so it is unit-tested).

``ros2 launch ... use_sim_time:=True`` must work as ``ros2 run ... -p use_sim_time:=True``
does. ROS reads a parameter override as YAML, so ``True``, ``true``, ``TRUE``, ``yes`` and
``on`` are all true; launch conditions (``IfCondition``) also take ``1`` and ``0``. A
``choices=['true', 'false']`` launch argument refused all but two of these.
"""

from __future__ import annotations

from gp_mapper.ros.errors import RosLayerError

# YAML 1.1 booleans (PyYAML's safe_load, which rclpy and launch_ros use for parameter
# values) and the 1/0 of launch conditions, lower-cased.
TRUE_WORDS = frozenset({"true", "yes", "on", "y", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "n", "0"})


class LaunchArgumentError(RosLayerError, ValueError):
    """A launch argument's value cannot be read as its type; the message names both."""


def parse_bool(name: str, text: str) -> bool:
    """A launch argument's text -> bool, accepting every spelling ROS accepts.

    Args:
        name: the argument, for the error message.
        text: its value as given on the command line, e.g. ``"True"``.

    Raises:
        LaunchArgumentError: ``text`` is not a boolean in any of those spellings.
    """
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise LaunchArgumentError(
        f"{name}:={text!r} is not a boolean; use true or false (True, 1, 0, yes, no also work)"
    )


def normalize_namespace(text: str) -> str:
    """A ``namespace`` launch argument -> ``''`` (none) or ``/a/b``, however it was typed
    (``robot1``, ``/robot1/``, ``''``, ``/``)."""
    parts = [p for p in text.strip().split("/") if p]
    return "/" + "/".join(parts) if parts else ""


def namespaced_rviz_config(text: str, namespace: str, node_name: str) -> str:
    """An RViz config whose ``/<node_name>/...`` topics point at that node under ``namespace``.

    The shipped config names the node's topics absolutely (``/gp_mapper/mean``); under a
    namespace the node publishes ``/<namespace>/gp_mapper/mean`` instead.
    """
    namespace = normalize_namespace(namespace)
    if not namespace:
        return text
    return text.replace(f" /{node_name}/", f" {namespace}/{node_name}/")
