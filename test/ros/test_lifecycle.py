"""gp_mapper.ros.lifecycle: autostart, transition failures with their reason, finalize."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rclpy.context import Context
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_msgs.msg import String

from gp_mapper.ros.errors import TransitionError
from gp_mapper.ros.lifecycle import AUTOSTART, Transitions, autostart, finalize

pytestmark = pytest.mark.ros


class Talker(LifecycleNode):
    """A lifecycle node as the module docstring shows one; ``fail`` makes configure raise."""

    def __init__(self, context: Context, fail: Exception | None = None, **overrides: Any) -> None:
        super().__init__(
            "lifecycle_talker",
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        )
        self.fail = fail
        self.calls: list[str] = []
        self.publisher: Any = None
        self._transitions = Transitions(self.get_logger(), failures=(ValueError,))
        self.started = autostart(self, self._transitions)

    def _configure(self) -> None:
        self.calls.append("configure")
        if self.fail is not None:
            raise self.fail
        self.publisher = self.create_lifecycle_publisher(String, "chatter", 10)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transitions.run("configure", self._configure)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.calls.append("activate")
        return super().on_activate(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.calls.append("shutdown")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.calls.append("error")
        return TransitionCallbackReturn.SUCCESS


def test_autostart_configures_and_activates(ros_context: Context) -> None:
    node = Talker(ros_context)
    try:
        assert node.started and node.calls == ["configure", "activate"]
        assert node.publisher.is_activated
        assert node.get_parameter(AUTOSTART).value is True
    finally:
        node.destroy_node()


def test_without_autostart_the_node_waits_unconfigured(ros_context: Context) -> None:
    node = Talker(ros_context, autostart=False)
    try:
        assert not node.started and node.calls == [] and node.publisher is None
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert not node.publisher.is_activated  # configured, not active
    finally:
        node.destroy_node()


def test_an_expected_failure_is_a_failure_with_its_reason(ros_context: Context) -> None:
    with pytest.raises(TransitionError, match=r"^configure failed: need a < b$"):
        Talker(ros_context, fail=ValueError("need a < b"))


def test_an_unexpected_failure_is_an_error_with_its_type(ros_context: Context) -> None:
    with pytest.raises(TransitionError, match=r"^configure failed: RuntimeError: boom$"):
        Talker(ros_context, fail=RuntimeError("boom"))


def test_a_failed_configure_leaves_the_node_unconfigured_to_try_again(
    ros_context: Context,
) -> None:
    node = Talker(ros_context, fail=ValueError("not yet"), autostart=False)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        node.fail = None
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()


def test_finalize_shuts_down_once(ros_context: Context) -> None:
    node = Talker(ros_context)
    finalize(node)
    finalize(node)  # finalized already: nothing
    assert node.calls == ["configure", "activate", "shutdown"]
    node.destroy_node()
