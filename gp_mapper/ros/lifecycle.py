"""Lifecycle nodes that can start themselves: the ``autostart`` parameter and its helpers.

A managed node (``rclpy.lifecycle.LifecycleNode``, REP-2007's state machine, as Nav2's nodes
are) waits unconfigured for a lifecycle manager. ``ros2 run`` and a plain launch file have
none, so with ``autostart`` true (the default) the node configures and activates itself at
the end of its constructor; with it false a manager (or ``ros2 lifecycle set``) drives it.

Usage, for a node that creates its publishers, subscriptions, services and timers in
``on_configure`` (ros2/demos ``lifecycle_py/talker.py``)::

    class MyNode(LifecycleNode):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__("my_node", **kwargs)
            declare_autostart(self)   # or a table row named "autostart" (read-only bool)
            self._transitions = Transitions(self.get_logger(), failures=(ValueError,))
            autostart(self, self._transitions)   # configure + activate, or TransitionError

        def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
            # Each transition's work goes through Transitions.run: an expected failure
            # (invalid parameters) is FAILURE with the reason logged once; rclpy would
            # otherwise swallow the exception and say nothing.
            return self._transitions.run("configure", self._configure)

        def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
            self._active = True
            return super().on_activate(state)   # enables the lifecycle publishers

        def destroy_node(self) -> None:
            finalize(self)   # the shutdown transition first: on_shutdown releases the work
            super().destroy_node()

    def main(args: list[str] | None = None) -> None:
        run_node("my_node", MyNode, spin_multithreaded, (ValueError,), args)

``run_node`` (``gp_mapper.ros.entry``) exits with status 1 on a ``TransitionError`` without
logging it again. rclpy's EventsExecutor runs every callback on one thread and did not run a
coroutine service callback at all, so a node whose service takes seconds (a map load) spins
on ``spin_multithreaded`` and puts that service in a callback group of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from gp_mapper.ros.errors import TransitionError, one_line

AUTOSTART = "autostart"
AUTOSTART_DESCRIPTION = (
    "configure and activate the node at start (false: wait for a lifecycle manager or "
    "`ros2 lifecycle set`)"
)


def declare_autostart(node: LifecycleNode, default: bool = True) -> bool:
    """Declare the read-only ``autostart`` parameter unless the node already has it, and
    return its value."""
    if not node.has_parameter(AUTOSTART):
        descriptor = ParameterDescriptor(description=AUTOSTART_DESCRIPTION, read_only=True)
        node.declare_parameter(AUTOSTART, default, descriptor)
    return bool(node.get_parameter(AUTOSTART).value)


class Transitions:
    """Runs a lifecycle node's transition work and keeps why the last one failed.

    Args:
        logger: the node's logger; each failure is logged once, at ERROR.
        failures: exceptions that mean "refused, try again with other parameters": the
            transition returns FAILURE and the node stays where it was. Any other exception
            is ERROR (rclpy then runs ``on_error``).
    """

    def __init__(
        self, logger: RcutilsLogger, failures: tuple[type[Exception], ...] = (ValueError,)
    ) -> None:
        self._logger = logger
        self._failures = failures
        self.last_failure: str | None = None

    def run(
        self, transition: str, work: Callable[[], TransitionCallbackReturn | None]
    ) -> TransitionCallbackReturn:
        """``work()``'s return, SUCCESS if it returns None, or FAILURE/ERROR if it raises."""
        try:
            result = work()
        except self._failures as err:
            return self._failed(transition, one_line(err, with_type=False),
                                TransitionCallbackReturn.FAILURE)  # fmt: skip
        except Exception as err:  # rclpy would turn it into a silent ERROR
            return self._failed(transition, one_line(err), TransitionCallbackReturn.ERROR)
        if result is None:
            return TransitionCallbackReturn.SUCCESS
        if result != TransitionCallbackReturn.SUCCESS:
            self.last_failure = f"{transition} did not succeed"
        return result

    def _failed(
        self, transition: str, reason: str, code: TransitionCallbackReturn
    ) -> TransitionCallbackReturn:
        self.last_failure = f"{transition} failed: {reason}"
        self._logger.error(self.last_failure)
        return code


def autostart(node: LifecycleNode, transitions: Transitions) -> bool:
    """Configure, then activate ``node`` if its ``autostart`` parameter is true.

    Returns:
        Whether the node was started (False: autostart is off, the node is unconfigured).

    Raises:
        TransitionError: a transition did not succeed; the message is the reason
            ``transitions`` kept (the node has logged it).
    """
    if not declare_autostart(node):
        return False
    for name, trigger in (("configure", node.trigger_configure),
                          ("activate", node.trigger_activate)):  # fmt: skip
        transitions.last_failure = None
        if trigger() != TransitionCallbackReturn.SUCCESS:
            raise TransitionError(transitions.last_failure or f"{name} did not succeed")
    return True


def finalize(node: LifecycleNode) -> None:
    """Run the shutdown transition from whichever primary state the node is in (its
    ``on_shutdown`` releases what configure made); nothing if it is already finalized or its
    context is gone."""
    # RCLError: finalized already, or the context was shut down first.
    with contextlib.suppress(_rclpy.RCLError):
        node.trigger_shutdown()
