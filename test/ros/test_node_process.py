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

from gp_mapper.ros import diagnostic_messages
from gp_mapper.ros.node import INPUT_SILENCE_S

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
                    if (v := diagnostic_messages.diagnostic_values(m, name)) is not None
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


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        # values the selectors refuse: the table's range refuses them too, or the engine does
        (["vips.delta:=0.0"], "vips.delta"),
        (["vips.selector:=oips", "vips.rho:=0.0"], "vips.rho"),
        # accepted by every check but the engine's: no such device on this machine
        (["device:=cuda:99"], "cuda:99"),
    ],
)
def test_node_process_start_failure_is_one_line(parameters: list[str], named: str) -> None:
    """Whatever stops the start, the user reads one line with the reason, and exit 1."""
    args = [arg for value in parameters for arg in ("-p", value)]
    proc = subprocess.run(
        _command(*args), capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, proc.stderr
    assert named in errors[0]


def test_node_process_names_its_resolved_inputs_and_warns_when_they_stay_silent(
    tmp_path: Path,
) -> None:
    namespace = f"/silent{os.getpid()}"
    log = tmp_path / "node.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            _command(
                "-p", "pose_source:=topic", "-r", f"__ns:={namespace}", "-r", "mag:=/nowhere/mag"
            ),
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            # the start-up line names both inputs after remapping and namespacing
            wait_for(
                lambda: "mapping " in log.read_text(),
                timeout=STARTUP_TIMEOUT_S,
                what="the start-up line",
            )
            start = next(line for line in log.read_text().splitlines() if "mapping " in line)
            assert f"of /nowhere/mag posed by poses on {namespace}/pose " in start, start
            # nothing is published on them: after INPUT_SILENCE_S a warning names both
            wait_for(
                lambda: "no magnetometer message" in log.read_text(),
                timeout=INPUT_SILENCE_S + 10.0,
                what="the silent-input warning",
            )
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=EXIT_TIMEOUT_S)
    text = log.read_text()
    warning = next(line for line in text.splitlines() if "no magnetometer message" in line)
    assert "on /nowhere/mag since start (no publisher)" in warning
    assert f"no pose message on {namespace}/pose since start" in warning
    assert "remapping" in warning
    assert text.count("no magnetometer message") <= 2  # rate-limited, not once a second
