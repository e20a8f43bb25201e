"""Fixtures of the ROS tests: an rclpy context per test and a background spinner.

Each test gets its own rclpy Context (test/conftest.py already isolates the DDS domain),
so the nodes of one test never leak into the next. rclpy is imported inside the fixtures:
each test module skips itself (with the reason) when rclpy cannot be imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def ros_context() -> Iterator[Any]:
    """An initialised rclpy context of its own, shut down after the test."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, args=[])
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def spinner(ros_context: Any) -> Iterator[Any]:
    """A background executor thread for the test's probe nodes."""
    from .helpers import Spinner

    spin = Spinner(ros_context)
    try:
        yield spin
    finally:
        spin.close()


@pytest.fixture(scope="session")
def localizer_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The localizer tests' map file of the synthetic room, written once per session."""
    from ..mapping.localization_scene import write_world_map

    return write_world_map(tmp_path_factory.mktemp("localizer") / "map.npz")


@pytest.fixture(scope="session")
def localizer_vector_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A map of the synthetic room's field vector, written once per session."""
    from ..mapping.localization_scene import write_world_vector_map

    return write_world_vector_map(tmp_path_factory.mktemp("localizer") / "vector_map.npz")


@pytest.fixture(scope="session")
def localizer_walk() -> tuple[Any, Any]:
    """The localizer tests' walk through the room and its drifting odometry."""
    from .localizer_harness import make_walk

    return make_walk()
