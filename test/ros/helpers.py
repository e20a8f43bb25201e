"""Helpers for the ROS tests: polling with a deadline, a background spinner, a collector."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

# Generous: discovery plus a GP update on a loaded 2-core CI machine.
DEFAULT_TIMEOUT_S = 30.0
POLL_S = 0.02


def wait_for(
    condition: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT_S, what: str = "condition"
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def call(client: Any, request: Any, attempts: int = 3, timeout: float = 20.0) -> Any:
    """A service's answer, the request sent again when none comes within ``timeout``: a server
    that has not yet discovered the client's reply reader drops the reply (a DDS race that a
    loaded machine makes likely)."""
    for _ in range(attempts):
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if future.done() and future.result() is not None:
                return future.result()
            time.sleep(POLL_S)
        client.remove_pending_request(future)
    pytest.fail(f"no answer from {client.srv_name} after {attempts} tries of {timeout:.0f} s")


class Spinner:
    """Spins nodes of one context in a background thread (the test thread only polls)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._executor = SingleThreadedExecutor(context=context)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def node(self, name: str, **kwargs: Any) -> Node:
        """A new node in this context, spun in the background."""
        return self.add(Node(name, context=self.context, **kwargs))

    def add(self, node: Node) -> Node:
        self._executor.add_node(node)
        return node

    def _run(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._executor.shutdown()


class Collector:
    """Subscribes to topics and keeps every message received, per topic (thread-safe)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._messages: dict[str, list[Any]] = {}

    def listen(self, msg_type: type, topic: str, qos: QoSProfile | int, raw: bool = False) -> None:
        with self._lock:
            self._messages.setdefault(topic, [])

        def on_message(msg: Any) -> None:
            with self._lock:
                self._messages[topic].append(msg)

        self.node.create_subscription(msg_type, topic, on_message, qos, raw=raw)

    def messages(self, topic: str) -> list[Any]:
        with self._lock:
            return list(self._messages.get(topic, []))

    def count(self, topic: str) -> int:
        with self._lock:
            return len(self._messages.get(topic, []))

    def latest(self, topic: str) -> Any:
        with self._lock:
            msgs = self._messages.get(topic, [])
            return msgs[-1] if msgs else None
