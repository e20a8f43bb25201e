"""The console script ``gp_localizer_node`` as a user runs it: a process with --ros-args."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from std_srvs.srv import Trigger

from .helpers import Spinner, call

pytestmark = pytest.mark.ros

NODE_SCRIPT = Path(sys.executable).with_name("gp_localizer_node")
STARTUP_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 20.0


def _command(*ros_args: str) -> list[str]:
    if NODE_SCRIPT.is_file():
        return [str(NODE_SCRIPT), "--ros-args", *ros_args]
    code = "from gp_mapper.ros.localizer_node import main; main()"  # not pip-installed
    return [sys.executable, "-c", code, "--ros-args", *ros_args]


def test_bad_parameters_stop_the_process_with_one_line() -> None:
    proc = subprocess.run(_command("-p", "min_particles:=900", "-p", "max_particles:=100"),
                          capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "min_particles" in errors[0], proc.stderr


def test_a_missing_map_is_reported_and_the_process_serves_until_sigint(
    spinner: Spinner, tmp_path: Path
) -> None:
    command = _command("-p", f"map_path:={tmp_path / 'none.npz'}")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        probe = spinner.node("localizer_process_probe")
        client = probe.create_client(Trigger, "/gp_localizer/load_map")
        assert client.wait_for_service(timeout_sec=STARTUP_TIMEOUT_S)
        response = call(client, Trigger.Request())
        assert not response.success and "none.npz" in response.message
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "map not loaded" in out and "none.npz" in out
