"""Bad TF into a live node: each fault a counted drop with its reason in /diagnostics, and the
map goes on.

The node (in-process, its own namespace; ``/tf`` and ``/tf_static`` remapped into it, as a
namespaced robot does) is fed a robot's TF and magnetometer over DDS by a probe node, with a
mounting that arrives late (a missing edge), a non-unit quaternion, a loop, a transform an hour
in the future and readings from a frame renamed mid-run.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")
pytest.importorskip("tf2_msgs", reason="tf2_msgs is not built (make venv builds it)")

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TransformStamped
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import MagneticField
from tf2_msgs.msg import TFMessage

from gp_mapper.ros import diagnostic_messages, stamps
from gp_mapper.ros.diagnostic_messages import DIAGNOSTIC_WARN
from gp_mapper.ros.node import GpMapperNode
from gp_mapper.ros.qos import TF_QOS, TF_STATIC_QOS

from .helpers import Collector, Spinner, wait_for
from .mapper_harness import PROBE_QOS, mag_msg, overrides, path, stamp, true_field

pytestmark = pytest.mark.ros

STEPS = 600  # readings of the walk (12 s at 50 Hz)
PACE_S = 0.002


def transform(stamp_ns: int, parent: str, child: str, xy=(0.0, 0.0), yaw: float = 0.0,
              q: tuple[float, float, float, float] | None = None) -> TransformStamped:  # fmt: skip
    msg = TransformStamped()
    msg.header.stamp = stamps.ns_to_stamp(stamp_ns)
    msg.header.frame_id = parent
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y = float(xy[0]), float(xy[1])
    x, y, z, w = q if q is not None else (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = x, y, z, w
    return msg


class TfRobot:
    """A node posed from TF, and a probe that publishes a robot's TF and magnetometer."""

    def __init__(self, context: Context, spinner: Spinner) -> None:
        self.ns = f"/tfin{os.getpid()}"
        self.node = GpMapperNode(
            context=context,
            namespace=self.ns,
            parameter_overrides=overrides({"pose_source": "tf", "transform_timeout": 0.2}),
            cli_args=["--ros-args", "-r", f"/tf:={self.ns}/tf",
                      "-r", f"/tf_static:={self.ns}/tf_static"],
        )  # fmt: skip
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()
        self.probe = spinner.node("tf_probe")
        self.sink = Collector(self.probe)
        self.sink.listen(DiagnosticArray, "/diagnostics", PROBE_QOS)
        self.mag = self.probe.create_publisher(MagneticField, f"{self.ns}/mag", PROBE_QOS)
        self.tf = self.probe.create_publisher(TFMessage, f"{self.ns}/tf", TF_QOS)
        self.tf_static = self.probe.create_publisher(
            TFMessage, f"{self.ns}/tf_static", TF_STATIC_QOS
        )
        wait_for(
            lambda: all(p.get_subscription_count() >= 1 for p in (self.mag, self.tf)),
            what="the node's inputs",
        )

    def send_tf(self, *transforms: TransformStamped, static: bool = False) -> None:
        (self.tf_static if static else self.tf).publish(TFMessage(transforms=list(transforms)))

    def walk(self, steps: range, frame: str = "imu_link") -> None:
        """The base along the harness's path (map -> odom -> base_link every 2nd step), one
        reading in ``frame`` half-way between."""
        for k in steps:
            if k % 2 == 0:
                x, y = path(k)
                self.send_tf(
                    transform(stamp(k), "map", "odom"),
                    transform(stamp(k), "odom", "base_link", (x, y)),
                )
            x, y = path(k + 0.5)
            self.mag.publish(mag_msg(stamp(k) + 10_000_000, true_field(x + 0.3, y), frame))
            time.sleep(PACE_S)

    def diagnostics(self) -> list[dict[str, str]]:
        found = (
            diagnostic_messages.diagnostic_values(m, self.node.status_name)
            for m in self.sink.messages("/diagnostics")
        )
        return [v for v in found if v is not None]

    def statuses(self) -> list[object]:
        return [s for m in self.sink.messages("/diagnostics") for s in m.status
                if s.name == self.node.status_name]  # fmt: skip

    def close(self) -> None:
        self._executor.shutdown()
        self._thread.join(timeout=10.0)
        self.node.destroy_node()


@pytest.fixture
def robot(ros_context: Context, spinner: Spinner) -> Iterator[TfRobot]:
    r = TfRobot(ros_context, spinner)
    try:
        yield r
    finally:
        r.close()


def test_bad_tf_is_counted_by_reason_and_the_map_goes_on(robot: TfRobot) -> None:
    robot.walk(range(0, 100))  # no mounting yet: a missing edge
    mount = transform(stamp(0), "base_link", "imu_link", (0.3, 0.0))
    robot.send_tf(mount, static=True)
    robot.walk(range(100, 300))
    late = stamp(300)
    robot.send_tf(transform(late, "odom", "base_link", q=(0.0, 0.0, 0.5, 0.5)))  # |q|² 0.5
    robot.send_tf(transform(late, "imu_link", "map"))  # a loop
    robot.send_tf(transform(late + 3600 * 10**9, "odom", "base_link"))  # an hour ahead
    robot.walk(range(300, 500))
    robot.walk(range(500, 520), frame="mag_link")  # the driver renamed its frame
    robot.walk(range(520, STEPS))

    def settled() -> dict[str, str] | None:
        d = robot.diagnostics()
        return d[-1] if d and int(d[-1]["drops_total"]) >= 23 and int(
            d[-1]["samples"]) + int(d[-1]["open_window_samples"]) > 400 else None  # fmt: skip

    values = wait_for(settled, what="the drops and the map")
    assert values["pose_source"] == "tf"
    assert int(values["drop_bad_quaternion"]) == 1
    assert int(values["drop_transform_loop"]) == 1
    assert int(values["drop_future_transform"]) == 1
    # Readings before the mounting timed out (some still waiting when it came are posed),
    # and the 20 of the renamed frame.
    assert int(values["drop_no_transform"]) >= 20 + 50
    assert int(values["samples"]) > 0  # the map was made and kept growing
    warned = [s for s in robot.statuses() if s.level == DIAGNOSTIC_WARN]
    text = " ".join(s.message for s in warned)
    for reason in ("bad_quaternion", "transform_loop", "future_transform", "no_transform"):
        assert reason in text, text
