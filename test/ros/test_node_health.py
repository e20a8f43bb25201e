"""The node's /diagnostics level follows the map's health: a rejected update warns, three err."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rclpy.context import Context

from gp_mapper.mapping.records import UNHEALTHY_FOR_ERROR
from gp_mapper.ros import diagnostic_messages

from .helpers import Spinner, wait_for
from .mapper_harness import (
    PACE_S,
    READING_PERIOD_NS,
    MapperHarness,
    harness,
    mag_msg,
    path,
    pose_msg,
    stamp,
)

pytestmark = pytest.mark.ros

WINDOW = 100  # = batch_size of the harness
GLITCH_UT = 1.0e6  # 1 T: a motor passing the sensor


@pytest.fixture
def mapper(ros_context: Context, spinner: Spinner, tmp_path: Path) -> Iterator[MapperHarness]:
    # The plausibility gate open, so that the glitches reach the engine's outlier screen.
    parameters = {"map_path": str(tmp_path / "map.npz"), "field_max": 1.0e9}
    with harness(ros_context, spinner, parameters) as h:
        yield h


def feed_glitches(mapper: MapperHarness, n: int) -> None:
    """Like ``MapperHarness.feed``, but every reading is ``GLITCH_UT``."""
    first = mapper.next_step
    for k in range(first, first + n + 1):
        if k % 2 == 0:
            mapper.pose_pub.publish(pose_msg(stamp(k), *path(k)))
        if k < first + n:
            mapper.mag_pub.publish(mag_msg(stamp(k) + READING_PERIOD_NS // 2, GLITCH_UT))
        time.sleep(PACE_S)
    k = first + n + 2
    mapper.pose_pub.publish(pose_msg(stamp(k), *path(k)))
    mapper.next_step += n + 4


def health_levels(mapper: MapperHarness) -> list[tuple[bytes, str]]:
    return [(s.level, s.message) for s in mapper.our_statuses()]


def test_rejected_windows_turn_the_status_to_warn_then_error_and_back(
    mapper: MapperHarness,
) -> None:
    mapper.feed(WINDOW)
    assert mapper.wait_samples(WINDOW)["health"] == "OK"
    for _ in range(UNHEALTHY_FOR_ERROR):
        feed_glitches(mapper, WINDOW)

    def erred() -> dict[str, str] | None:
        d = mapper.diagnostics()
        return d if d is not None and d["health"] == "ERROR" else None

    diag = wait_for(erred, what="health ERROR after rejected windows")
    assert int(diag["failed_updates"]) == UNHEALTHY_FOR_ERROR
    assert int(diag["drop_failed_update"]) == UNHEALTHY_FOR_ERROR * WINDOW
    assert "all 100 readings are outliers" in diag["health_message"]
    wait_for(
        lambda: any(
            level == diagnostic_messages.DIAGNOSTIC_ERROR for level, _ in health_levels(mapper)
        ),
        what="a DiagnosticStatus at ERROR",
    )
    levels = health_levels(mapper)
    errors = [message for level, message in levels if level == diagnostic_messages.DIAGNOSTIC_ERROR]
    assert errors[0].startswith("update rejected, the previous map stands: ")
    assert "all 100 readings are outliers" in errors[0]
    warned = [message for level, message in levels if level == diagnostic_messages.DIAGNOSTIC_WARN]
    assert any("1 unhealthy update(s) in a row" in message for message in warned)

    # Good data again: the map takes them and the status is OK once no new drop is counted.
    mapper.feed(WINDOW)
    samples = mapper.wait_samples(2 * WINDOW)
    assert samples["health"] == "OK" and samples["health_message"] == ""
    count = len(mapper.our_statuses())
    wait_for(
        lambda: any(
            s.level == diagnostic_messages.DIAGNOSTIC_OK for s in mapper.our_statuses()[count:]
        ),
        what="a DiagnosticStatus at OK",
    )
