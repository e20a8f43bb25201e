"""The console script ``gp_mapper_node`` as a user runs it: a process with --ros-args."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from diagnostic_msgs.msg import DiagnosticArray
from std_srvs.srv import Trigger

from gp_mapper.ros import convert

from .helpers import Collector, Spinner, wait_for

pytestmark = pytest.mark.ros

NODE_SCRIPT = Path(sys.executable).with_name("gp_mapper_node")
# Start-up imports torch: allow for a slow, loaded machine.
STARTUP_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 20.0


def _command(*ros_args: str) -> list[str]:
    if NODE_SCRIPT.is_file():
        return [str(NODE_SCRIPT), "--ros-args", *ros_args]
    # not installed as a console script (no `pip install -e .`): the same main()
    code = "from gp_mapper.ros.node import main; main()"
    return [sys.executable, "-c", code, "--ros-args", *ros_args]


@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_node_process_serves_and_exits_cleanly_on_sigint(spinner: Spinner, executor: str) -> None:
    namespace = f"/proc{os.getpid()}_{executor}"
    probe = spinner.node(f"process_probe_{executor}")
    sink = Collector(probe)
    sink.listen(DiagnosticArray, "/diagnostics", 100)
    proc = subprocess.Popen(
        _command(
            "-r",
            f"__ns:={namespace}",
            "-p",
            "diagnostics_period:=0.2",
            "-p",
            f"executor:={executor}",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        name = f"{namespace.lstrip('/')}/gp_mapper: mapping"
        values = wait_for(
            lambda: next(
                (
                    v
                    for m in reversed(sink.messages("/diagnostics"))
                    if (v := convert.diagnostic_values(m, name)) is not None
                ),
                None,
            ),
            timeout=STARTUP_TIMEOUT_S,
            what="the node's diagnostics",
        )
        assert values["samples"] == "0" and values["map_frame"] == "map"

        client = probe.create_client(Trigger, f"{namespace}/gp_mapper/reset")
        wait_for(client.service_is_ready, what="~/reset")
        future = client.call_async(Trigger.Request())
        wait_for(future.done, what="~/reset reply")
        assert future.result().success
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Traceback" not in out


def test_node_process_refuses_bad_parameters_with_the_reason() -> None:
    proc = subprocess.run(
        _command("-p", "pose_type:=twist", "-p", "qos_depth:=5"),
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
    )
    assert proc.returncode == 1
    assert "pose_type must be one of" in proc.stderr
    assert "Traceback" not in proc.stderr
