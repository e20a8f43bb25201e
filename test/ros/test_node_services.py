"""The node's services under failure and load: never fatal, no input lost.

The services are the node's own. With ``executor: multi_threaded`` they run in a callback
group of their own, so readings keep reaching the map while a load, save or flush is in
progress; on one thread (events, single_threaded) the readings published meanwhile wait in
the subscription's queue and are all mapped after it. Any failure of reset or load (whatever
its type) is answered with the reason and leaves the current map.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rclpy.context import Context
from rclpy.parameter import Parameter

from gp_mapper.mapping.pipeline import MappingPipeline

from .helpers import POLL_S, Spinner
from .mapper_harness import MapperHarness, harness

pytestmark = pytest.mark.ros

WINDOW = 100  # = batch_size of the harness
# How long the stand-in for a slow load (a 54 MB map takes ~3 s) holds the service at most [s]:
# it lets go once the readings sent meanwhile have arrived, so only a loaded machine waits long.
SLOW_SERVICE_S = 10.0
# How long the one-thread test's save holds the executor [s].
HOLD_S = 2.0
# Readings published while the slow service runs; all must reach the pipeline meanwhile.
READINGS_DURING = 20


@pytest.fixture
def mapper(ros_context: Context, spinner: Spinner, tmp_path: Path) -> Iterator[MapperHarness]:
    with harness(ros_context, spinner, {"map_path": str(tmp_path / "map.npz")}) as h:
        yield h


@pytest.fixture
def threaded_mapper(
    ros_context: Context, spinner: Spinner, tmp_path: Path
) -> Iterator[MapperHarness]:
    params = {"map_path": str(tmp_path / "map.npz"), "executor": "multi_threaded"}
    with harness(ros_context, spinner, params, executor="multi_threaded") as h:
        yield h


def _received(pipeline: MappingPipeline) -> int:
    """Readings the pipeline has taken in, wherever they are now."""
    d = pipeline.diagnostics()
    return int(d["samples"]) + int(d["open_window_samples"]) + int(d["pending_readings"])


@pytest.mark.parametrize("service", ["load_map", "save_map", "flush"])
def test_sensor_callbacks_flow_while_a_slow_service_runs(
    threaded_mapper: MapperHarness, service: str
) -> None:
    mapper = threaded_mapper
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    pipeline = mapper.node.pipeline
    started = threading.Event()
    seen: dict[str, int] = {}

    def slow(*_args: Any, **_kwargs: Any) -> bool:
        # Stands in for a 3 s load / a long save or flush: while it holds the service, the
        # readings published now must still reach the pipeline.
        before = _received(pipeline)
        started.set()
        deadline = time.monotonic() + SLOW_SERVICE_S
        while time.monotonic() < deadline and _received(pipeline) < before + READINGS_DURING:
            time.sleep(POLL_S)
        seen["during"] = _received(pipeline) - before
        return True

    patched = {"load_map": "load", "save_map": "save", "flush": "wait_idle"}[service]
    setattr(pipeline, patched, slow)
    reply: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: reply.update(r=mapper.call(service)))
    caller.start()
    assert started.wait(30.0), f"{service} never started"
    mapper.feed(READINGS_DURING)
    caller.join(timeout=60.0)
    assert reply["r"].success, reply["r"].message
    assert seen["during"] >= READINGS_DURING, (
        f"only {seen['during']} of {READINGS_DURING} readings arrived during {service}"
    )


def test_on_one_thread_readings_sent_during_a_slow_service_are_all_mapped_after_it(
    mapper: MapperHarness,
) -> None:
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    pipeline = mapper.node.pipeline
    started = threading.Event()
    real_save = pipeline.save

    def slow_save(*args: Any, **kwargs: Any) -> None:
        started.set()
        time.sleep(HOLD_S)
        real_save(*args, **kwargs)

    pipeline.save = slow_save  # type: ignore[method-assign]
    reply: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: reply.update(r=mapper.call("save_map")))
    caller.start()
    assert started.wait(30.0), "save_map never started"
    before = _received(pipeline)
    mapper.feed(READINGS_DURING)
    caller.join(timeout=60.0)
    assert reply["r"].success, reply["r"].message
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and _received(pipeline) < before + READINGS_DURING:
        time.sleep(POLL_S)
    assert _received(pipeline) - before == READINGS_DURING


@pytest.mark.parametrize(
    "error", [RecursionError("maximum recursion depth exceeded"), MemoryError(), OSError("EIO")]
)
def test_a_load_failing_with_any_error_keeps_the_map(
    mapper: MapperHarness, error: BaseException
) -> None:
    mapper.feed(WINDOW)
    before = mapper.wait_samples(WINDOW)
    pipeline = mapper.node.pipeline

    def hostile(_path: object) -> None:
        raise error

    pipeline.load = hostile  # type: ignore[method-assign]
    reply = mapper.call("load_map")
    assert not reply.success
    assert "current map is kept" in reply.message and type(error).__name__ in reply.message
    # the node lives on with the same map
    assert mapper.node.pipeline is pipeline
    after = mapper.fresh_diagnostics()
    assert after["samples"] == before["samples"] and after["seq"] == before["seq"]
    assert mapper.call("save_map").success


def test_a_reset_that_cannot_build_the_new_map_answers_why(mapper: MapperHarness) -> None:
    mapper.feed(WINDOW)
    before = mapper.wait_samples(WINDOW)
    pipeline = mapper.node.pipeline

    def refuse(_config: object) -> MappingPipeline:
        raise ValueError("rho must be > 0, got 0.0")

    mapper.node._make_pipeline = refuse  # type: ignore[method-assign]
    (ok,) = mapper.set_parameters([Parameter("batch_size", value=50)])
    assert ok.successful, ok.reason
    reply = mapper.call("reset")
    assert not reply.success
    assert "current map is kept" in reply.message and "rho must be > 0" in reply.message
    assert mapper.node.pipeline is pipeline
    assert mapper.fresh_diagnostics()["samples"] == before["samples"]

    # the same when nothing changed and the fresh engine cannot be built
    def broken_reset() -> None:
        raise RuntimeError("no engine")

    pipeline.reset = broken_reset  # type: ignore[method-assign]
    (ok,) = mapper.set_parameters([Parameter("batch_size", value=100)])
    reply = mapper.call("reset")
    assert not reply.success and "no engine" in reply.message

    # mapping goes on on the old map
    mapper.feed(WINDOW)
    mapper.wait_samples(2 * WINDOW)


@pytest.mark.parametrize("name", ["vips.delta", "vips.rho"])
def test_no_value_the_node_accepts_kills_it_on_reset(mapper: MapperHarness, name: str) -> None:
    """``ros2 param set /gp_mapper vips.delta 0.0`` then ``~/reset``: refused, or a failed reset."""
    (result,) = mapper.set_parameters([Parameter(name, value=0.0)])
    reply = mapper.call("reset")
    if result.successful:
        assert not reply.success and name in reply.message, reply.message
    else:
        assert reply.success, reply.message  # refused at set time: nothing changed
    # alive and mapping
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)


def test_start_removes_what_an_interrupted_save_left(
    ros_context: Context, spinner: Spinner, tmp_path: Path
) -> None:
    map_path = tmp_path / "map.npz"
    # named as save_map names its temporary, and old: the save that wrote it died
    stale = tmp_path / ".map.npz.k3x9_q2a.tmp"
    stale.write_bytes(b"half a map")
    hour_ago = time.time() - 3600.0
    os.utime(stale, (hour_ago, hour_ago))
    other = tmp_path / "notes.txt"
    other.write_text("not ours")
    with harness(ros_context, spinner, {"map_path": str(map_path)}):
        assert not stale.exists()
        assert other.exists()
