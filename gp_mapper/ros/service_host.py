"""Trigger services served from a thread of their own, so slow ones never stall the inputs.

A map load takes seconds and a flush up to minutes. On the node's executor thread either
would stop the sensor callbacks, and rclpy's EventsExecutor cannot run a coroutine callback
that would let a service wait without blocking. ``ServiceHost`` serves the node's services
from a hidden helper node on its own executor thread instead; each still answers when its
work is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

# Longest wait of one spin before the thread checks whether it should stop [s].
SPIN_TIMEOUT_S = 0.1
# How long teardown waits for a service still at work (a flush) before going on [s].
SERVICE_JOIN_TIMEOUT_S = 5.0


def one_line(err: BaseException, *, with_type: bool = True) -> str:
    """``err`` on one line, after its type name (``MemoryError`` has no message at all)."""
    text = " ".join(str(err).split())
    if not with_type:
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


TriggerHandler = Callable[[Trigger.Request, Trigger.Response], Trigger.Response]


class ServiceHost:
    """Serves Trigger services under ``owner``'s name from a thread of their own.

    A hidden helper node (name ``_<owner>_services``; the leading underscore hides it from
    ``ros2 node list``) in the owner's context and namespace, spun by its own
    SingleThreadedExecutor: a handler that takes seconds blocks only this thread, never the
    owner's executor. Handlers run one at a time.

    Args:
        owner: the node whose services these are (``<owner>/<name>``).
        handlers: service name -> handler; a handler must not raise (the host logs and
            answers failure if one does).
    """

    def __init__(self, owner: Node, handlers: Mapping[str, TriggerHandler]) -> None:
        self._logger = owner.get_logger()
        # Global --ros-args (node-name remaps) must not give the helper the owner's name.
        self._node = Node(
            f"_{owner.get_name()}_services",
            context=owner.context,
            namespace=owner.get_namespace(),
            use_global_arguments=False,
            start_parameter_services=False,
        )
        base = owner.get_fully_qualified_name()
        for name, handler in handlers.items():
            self._node.create_service(Trigger, f"{base}/{name}", self._guarded(name, handler))
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self._node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="gp_mapper_services", daemon=True)
        self._thread.start()

    def _guarded(self, name: str, handler: TriggerHandler) -> TriggerHandler:
        def call(request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                return handler(request, response)
            except Exception as err:  # the last guard: a service never kills the node
                response.success = False
                response.message = f"{name} failed: {one_line(err)}"
                self._logger.error(response.message)
                return response

        return call

    def _spin(self) -> None:
        while not self._stop.is_set() and self._node.context.ok():
            try:
                self._executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
            except ExternalShutdownException:
                return
            except Exception as err:  # keep serving: one bad request must not end the thread
                self._logger.error(f"service thread: {one_line(err)}")

    def close(self) -> None:
        """Stop serving (after the request in progress, up to SERVICE_JOIN_TIMEOUT_S)."""
        self._stop.set()
        self._thread.join(timeout=SERVICE_JOIN_TIMEOUT_S)
        self._executor.shutdown(timeout_sec=0.0)
        self._node.destroy_node()
