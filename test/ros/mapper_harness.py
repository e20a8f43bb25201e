"""A real gp_mapper node in-process, a probe node around it and a known synthetic field.

The node runs on its own SingleThreadedExecutor thread (``main()`` spins the same node with
the ``executor`` parameter's choice, EventsExecutor by default); the probe
(publishers for the inputs, subscriptions to every output, service and parameter clients)
runs on the test's Spinner. Nothing is faked: messages cross DDS on loopback.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import OccupancyGrid
from rcl_interfaces.msg import SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import MagneticField, PointCloud2
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from gp_mapper.ros import cloud_messages, diagnostic_messages, stamps
from gp_mapper.ros.entry import SPIN_THREADS, shutdown_executor
from gp_mapper.ros.node import NODE_NAME, GpMapperNode
from gp_mapper.ros.qos import MAP_QOS

from .helpers import Collector, Spinner, wait_for

T0_NS = 100 * 1_000_000_000  # first stamp of the synthetic stream
READING_PERIOD_NS = 20_000_000  # 50 Hz magnetometer; a pose every second reading (25 Hz)
TESLA_PER_MICROTESLA = 1e-6
# Direction of the synthetic field in the sensor frame (unit vector); the norm is the map.
FIELD_DIRECTION = np.array([0.6, 0.0, 0.8])
# Path half-width [m]: the robot stays inside [-EXTENT, EXTENT]^2.
EXTENT = 1.8

# Small and fast: 100-sample windows, hyperparameters kept at their initial values (1 m
# lengthscale: updates take ~0.1 s, and how far the map reaches is predictable), and a
# 40 x 20 grid reaching far past the explored area (x up to 7.5 m) so some cells stay
# unknown.
BASE_PARAMETERS: dict[str, Any] = {
    "pose_source": "topic",  # the probe publishes a pose of the sensor (TF: test_node_tf.py)
    "batch_size": 100,
    "batch_period": 100.0,
    "fit_iterations": 0,
    "resolution": 0.25,
    "bounds": [-2.5, 7.5, -2.5, 2.5],
    "device": "cpu",
    "diagnostics_period": 0.2,
}

# Wall time between published steps [s]: 100 readings + 50 poses take ~0.3 s.
PACE_S = 0.002

PROBE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def true_field(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The known field norm [µT]: Earth-like 48 µT plus smooth indoor anomalies."""
    return 48.0 + 5.0 * np.sin(1.2 * x) + 3.0 * np.cos(0.9 * y)


def path(k: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Position [m] of step k of a Lissajous path that sweeps [-EXTENT, EXTENT]^2."""
    t = np.asarray(k, dtype=np.float64) * READING_PERIOD_NS / 1e9
    return EXTENT * np.sin(0.93 * t), EXTENT * np.sin(1.41 * t + 0.5)


def stamp(k: int) -> int:
    return T0_NS + k * READING_PERIOD_NS


def pose_msg(stamp_ns: int, x: float, y: float, frame: str = "map") -> PoseStamped:
    msg = PoseStamped()
    msg.header.stamp = stamps.ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y = float(x), float(y)
    msg.pose.orientation.w = 1.0
    return msg


def mag_msg(stamp_ns: int, field_ut: float | np.ndarray, frame: str = "imu_link") -> MagneticField:
    vec = np.asarray(field_ut, dtype=np.float64)
    if vec.ndim == 0:
        vec = float(vec) * FIELD_DIRECTION
    vec = vec * TESLA_PER_MICROTESLA
    msg = MagneticField()
    msg.header.stamp = stamps.ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame
    msg.magnetic_field.x, msg.magnetic_field.y, msg.magnetic_field.z = (float(v) for v in vec)
    return msg


def overrides(extra: dict[str, Any] | None = None) -> list[Parameter]:
    values = {**BASE_PARAMETERS, **(extra or {})}
    return [Parameter(name, value=value) for name, value in values.items()]


class MapperHarness:
    """The node under test plus a probe; see the module docstring."""

    _instances = 0

    def __init__(
        self,
        context: Context,
        spinner: Spinner,
        parameters: dict[str, Any] | None = None,
        pose_msg_type: type = PoseStamped,
        executor: str = "single_threaded",
    ) -> None:
        # A namespace of its own: endpoints of a node from an earlier test, not yet gone
        # from the graph, can never stand in for this node's.
        MapperHarness._instances += 1
        namespace = f"/t{os.getpid()}_{MapperHarness._instances}"
        self.node = GpMapperNode(
            context=context, namespace=namespace, parameter_overrides=overrides(parameters)
        )
        self._executor = (
            MultiThreadedExecutor(num_threads=SPIN_THREADS, context=context)
            if executor == "multi_threaded"
            else SingleThreadedExecutor(context=context)
        )
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

        self.probe = spinner.node("mapper_probe")
        self.sink = Collector(self.probe)
        base = f"{namespace}/{NODE_NAME}"
        self.topics = {name: f"{base}/{name}" for name in ("mean", "variance", "field")}
        self.topics["markers"] = f"{base}/inducing_points"
        self.topics["cells"] = f"{base}/field_cells"
        self.sink.listen(OccupancyGrid, self.topics["mean"], MAP_QOS)
        self.sink.listen(OccupancyGrid, self.topics["variance"], MAP_QOS)
        self.sink.listen(PointCloud2, self.topics["field"], MAP_QOS)
        self.sink.listen(MarkerArray, self.topics["markers"], MAP_QOS)
        self.sink.listen(Marker, self.topics["cells"], MAP_QOS)
        self.sink.listen(DiagnosticArray, "/diagnostics", PROBE_QOS)
        self.mag_pub = self.probe.create_publisher(MagneticField, f"{namespace}/mag", PROBE_QOS)
        self._pose_msg_type = pose_msg_type
        self.pose_pub = self.probe.create_publisher(pose_msg_type, f"{namespace}/pose", PROBE_QOS)
        self._clients = {
            name: self.probe.create_client(Trigger, f"{base}/{name}")
            for name in ("reset", "save_map", "load_map", "flush")
        }
        self._param_client = self.probe.create_client(SetParameters, f"{base}/set_parameters")
        wait_for(
            lambda: (
                self.mag_pub.get_subscription_count() >= 1
                and self.pose_pub.get_subscription_count() >= 1
            ),
            what="the node's input subscriptions",
        )
        self.next_step = 0
        self.offset_ns = 0  # added to every stamp of feed(), to resume after other input
        self.fed = {"mag": 0, "pose": 0}  # messages feed() published

    # ------------------------------------------------------------------ inputs

    def feed(self, n: int) -> None:
        """Publish the next n readings of the synthetic walk (poses bracket each one)."""
        for k in range(self.next_step, self.next_step + n + 1):
            if k % 2 == 0:
                x, y = path(k)
                self.pose_pub.publish(self._pose(stamp(k) + self.offset_ns, x, y))
                self.fed["pose"] += 1
            if k < self.next_step + n:
                x, y = path(k + 0.5)
                t = stamp(k) + self.offset_ns + READING_PERIOD_NS // 2
                self.mag_pub.publish(mag_msg(t, true_field(x, y)))
                self.fed["mag"] += 1
            # pace: keeps the best-effort sensor queues from overflowing on a slow machine
            time.sleep(PACE_S)
        # one more pose so the last reading of the block is bracketed
        k = self.next_step + n + 2
        x, y = path(k)
        self.pose_pub.publish(self._pose(stamp(k) + self.offset_ns, x, y))
        self.fed["pose"] += 1
        self.next_step += n + 4

    def _pose(self, stamp_ns: int, x: float, y: float) -> Any:
        """A pose message of the type the node was told to expect."""
        stamped = pose_msg(stamp_ns, x, y)
        if self._pose_msg_type is PoseStamped:
            return stamped
        msg = self._pose_msg_type()
        msg.header = stamped.header
        msg.pose.pose = stamped.pose
        if hasattr(msg, "child_frame_id"):
            msg.child_frame_id = "base_link"
        return msg

    # ------------------------------------------------------------------ outputs

    def _our_diagnostics(self) -> list[dict[str, str]]:
        """This node's /diagnostics values, oldest first (other nodes may publish too)."""
        found = (
            diagnostic_messages.diagnostic_values(m, self.node.status_name)
            for m in self.sink.messages("/diagnostics")
        )
        return [values for values in found if values is not None]

    def our_statuses(self) -> list[Any]:
        """This node's DiagnosticStatus messages, oldest first."""
        return [
            status
            for m in self.sink.messages("/diagnostics")
            for status in m.status
            if status.name == self.node.status_name
        ]

    def diagnostics(self) -> dict[str, str] | None:
        ours = self._our_diagnostics()
        return ours[-1] if ours else None

    def fresh_diagnostics(self) -> dict[str, str]:
        """Diagnostics published after this call."""
        count = len(self._our_diagnostics())
        wait_for(lambda: len(self._our_diagnostics()) > count + 1, what="diagnostics")
        values = self.diagnostics()
        assert values is not None
        return values

    def wait_samples(self, samples: int) -> dict[str, str]:
        """Wait until the published map holds at least ``samples`` samples."""

        def ready() -> dict[str, str] | None:
            values = self.diagnostics()
            if values is None or int(values["samples"]) < samples:
                return None
            if values["published_seq"] != values["seq"] or values["worker_busy"] != "0":
                return None
            return values

        return wait_for(ready, what=f"a map of {samples} samples")

    def wait_seq(self, seq: int) -> None:
        wait_for(
            lambda: (d := self.diagnostics()) is not None and int(d["published_seq"]) >= seq,
            what=f"snapshot {seq}",
        )

    def latest(self, key: str) -> Any:
        return self.sink.latest(self.topics[key])

    def wait_new(self, key: str, count: int) -> Any:
        wait_for(lambda: self.sink.count(self.topics[key]) > count, what=f"a new {key}")
        return self.latest(key)

    def cloud(self) -> np.ndarray:
        return cloud_messages.cloud_to_array(self.latest("field"))

    def rmse(self, cloud: np.ndarray) -> float:
        """Map error against the known field over the explored square [µT]."""
        inside = (np.abs(cloud["x"]) <= EXTENT) & (np.abs(cloud["y"]) <= EXTENT)
        truth = true_field(cloud["x"].astype(np.float64), cloud["y"].astype(np.float64))
        return float(np.sqrt(np.mean((cloud["mean"][inside] - truth[inside]) ** 2)))

    # ------------------------------------------------------------------ services

    def call(self, service: str) -> Trigger.Response:
        client = self._clients[service]
        wait_for(client.service_is_ready, what=f"service {service}")
        future = client.call_async(Trigger.Request())
        wait_for(future.done, what=f"{service} response")
        return future.result()

    def set_parameters(self, params: Sequence[Parameter]) -> list[SetParametersResult]:
        wait_for(self._param_client.service_is_ready, what="set_parameters")
        request = SetParameters.Request(parameters=[p.to_parameter_msg() for p in params])
        future = self._param_client.call_async(request)
        wait_for(future.done, what="set_parameters response")
        return list(future.result().results)

    def close(self) -> None:
        shutdown_executor(self._executor)
        self._thread.join(timeout=10.0)
        self.node.destroy_node()


@contextmanager
def harness(
    context: Context,
    spinner: Spinner,
    parameters: dict[str, Any] | None = None,
    pose_msg_type: type = PoseStamped,
    executor: str = "single_threaded",
) -> Iterator[MapperHarness]:
    """A MapperHarness for the duration of a ``with`` block (the node on ``executor``:
    single_threaded, or multi_threaded as ``executor:=multi_threaded`` spins it)."""
    h = MapperHarness(context, spinner, parameters, pose_msg_type, executor)
    try:
        yield h
    finally:
        h.close()
