"""The gp_localizer node: a real node in-process, a probe publishing odometry and the
magnetometer over DDS, a map file of a known synthetic field."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseArray, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import MagneticField
from std_srvs.srv import Empty, Trigger

from gp_mapper.io.odometry import OdometryErrors, simulate_odometry
from gp_mapper.io.synthetic import simulate_run
from gp_mapper.ros import diagnostic_messages
from gp_mapper.ros.localizer_node import PARTICLES_SHOWN, GpLocalizerNode, map_to_odom, yaw_of
from gp_mapper.ros.qos import MAP_QOS
from gp_mapper.ros.stamps import ns_to_stamp

from ..mapping.localization_scene import WORLD, write_world_map
from .helpers import Collector, Spinner, wait_for

pytestmark = pytest.mark.ros

T0_NS = 50 * 1_000_000_000
PROBE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
POSE = "/gp_localizer/pose"


@pytest.fixture(scope="module")
def map_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_world_map(tmp_path_factory.mktemp("localizer") / "map.npz")


@pytest.fixture(scope="module")
def walk() -> tuple[Any, np.ndarray]:
    walk = simulate_run(WORLD, 40.0, rate_hz=20.0, seed=2, speed_mps=0.4)
    odom = simulate_odometry(walk.time_s, walk.position_m, walk.heading_rad, OdometryErrors(), 4)
    return walk, odom.pose


class Localizer:
    """The node on its own executor thread, and a probe around it."""

    def __init__(self, context: Context, spinner: Spinner, parameters: dict[str, Any]) -> None:
        overrides = [Parameter(k, value=v) for k, v in parameters.items()]
        self.node = GpLocalizerNode(context=context, parameter_overrides=overrides)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.probe = spinner.node("localizer_probe")
        self.collector = Collector(self.probe)
        self.collector.listen(PoseWithCovarianceStamped, POSE, PROBE_QOS)
        self.collector.listen(PoseArray, "/gp_localizer/particles", PROBE_QOS)
        self.collector.listen(TransformStamped, "/gp_localizer/map_to_odom", PROBE_QOS)
        self.collector.listen(OccupancyGrid, "/gp_localizer/map", MAP_QOS)
        self.collector.listen(DiagnosticArray, "/diagnostics", 10)
        self.mag = self.probe.create_publisher(MagneticField, "mag", PROBE_QOS)
        self.odom = self.probe.create_publisher(Odometry, "odom", PROBE_QOS)
        self.initial = self.probe.create_publisher(PoseWithCovarianceStamped, "initialpose", 10)

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def feed(self, walk: Any, odom: np.ndarray, start: int = 0, stop: int | None = None,
             shift_y: float = 0.0) -> None:  # fmt: skip
        wait_for(lambda: self.mag.get_subscription_count() and self.odom.get_subscription_count(),
                 what="the node's subscriptions")  # fmt: skip
        for i in range(start, stop or walk.time_s.size):
            stamp = ns_to_stamp(T0_NS + round(walk.time_s[i] * 1e9))
            o = Odometry()
            o.header.stamp, o.header.frame_id = stamp, "odom"
            o.pose.pose.position.x = float(odom[i, 0])
            o.pose.pose.position.y = float(odom[i, 1] + shift_y)
            o.pose.pose.orientation.z = math.sin(0.5 * odom[i, 2])
            o.pose.pose.orientation.w = math.cos(0.5 * odom[i, 2])
            self.odom.publish(o)
            m = MagneticField()
            m.header.stamp, m.header.frame_id = stamp, "imu_link"
            bx, by, bz = (float(v) * 1e-6 for v in walk.mag_ut[i])
            m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z = bx, by, bz
            self.mag.publish(m)
            time.sleep(0.002)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._executor.shutdown()
        self.node.destroy_node()


@pytest.fixture
def harness(ros_context: Context, spinner: Spinner, map_file: Path,
            walk: tuple[Any, np.ndarray]) -> Iterator[Localizer]:  # fmt: skip
    w, _ = walk
    h = Localizer(ros_context, spinner, {
        "map_path": str(map_file), "set_initial_pose": True,
        "initial_pose_x": float(w.position_m[0, 0]), "initial_pose_y": float(w.position_m[0, 1]),
        "initial_pose_a": float(w.heading_rad[0]), "diagnostics_period": 0.2, "seed": 1,
    })  # fmt: skip
    try:
        wait_for(lambda: h.node.localizer is not None, what="the map, read at start")
        yield h
    finally:
        h.close()


def filter_status(collector: Collector) -> dict[str, str] | None:
    """The localizer's /diagnostics values, once a message has come."""
    msg = collector.latest("/diagnostics")
    return (
        None if msg is None else diagnostic_messages.diagnostic_values(msg, "gp_localizer: filter")
    )


def reached(harness: Localizer, walk: Any, index: int) -> bool:
    """Whether a pose has been published for the walk's reading ``index`` or later."""
    last = harness.collector.latest(POSE)
    if last is None:
        return False
    stamp_ns = last.header.stamp.sec * 1_000_000_000 + last.header.stamp.nanosec
    return stamp_ns >= T0_NS + round(walk.time_s[index] * 1e9)


def truth_at(walk: Any, stamp: Any) -> np.ndarray:
    t = (stamp.sec * 1_000_000_000 + stamp.nanosec - T0_NS) / 1e9
    i = int(np.argmin(np.abs(walk.time_s - t)))
    return np.array([walk.position_m[i, 0], walk.position_m[i, 1], walk.heading_rad[i]])


def test_the_node_tracks_the_robot_and_publishes_as_amcl(harness: Localizer, walk) -> None:
    w, odom = walk
    grid = wait_for(lambda: harness.collector.latest("/gp_localizer/map"), what="~/map")
    assert grid.header.frame_id == "map" and max(grid.data) > 0 and min(grid.data) == -1
    harness.feed(w, odom)
    n = w.time_s.size
    wait_for(lambda: reached(harness, w, w.time_s.size - 20), what="poses to the walk's end")
    last = harness.collector.latest(POSE)
    mean = np.array([last.pose.pose.position.x, last.pose.pose.position.y])
    truth = truth_at(w, last.header.stamp)
    assert np.linalg.norm(mean - truth[:2]) < 0.5
    cov = np.array(last.pose.covariance).reshape(6, 6)
    assert cov[0, 0] > 0 and cov[1, 1] > 0 and cov[5, 5] > 0
    particles = harness.collector.latest("/gp_localizer/particles")
    assert 1 <= len(particles.poses) <= PARTICLES_SHOWN
    # map -> odom composed with the odometry at the same update is the published pose.
    transform = harness.collector.messages("/gp_localizer/map_to_odom")[-1]
    assert transform.child_frame_id == "odom" and transform.header.stamp == last.header.stamp
    step = harness.node.localizer.steps[-1]
    t = transform.transform
    x, y, yaw = map_to_odom(step.estimate.mean, step.odometry)
    assert (t.translation.x, t.translation.y) == pytest.approx((x, y))
    assert yaw_of(t.rotation) == pytest.approx(yaw)
    values = wait_for(lambda: filter_status(harness.collector), what="diagnostics")
    assert values["map_loaded"] == "True" and int(values["updates"]) > 50
    assert "map_sd_at_particles_ut" in values
    assert n > 0


def test_global_localization_spreads_the_particles_and_a_kidnap_is_recovered(
    harness: Localizer, walk
) -> None:
    w, odom = walk
    half = w.time_s.size // 2
    harness.feed(w, odom, stop=half)
    wait_for(lambda: reached(harness, w, half - 20), what="poses to half the walk")
    client = harness.probe.create_client(Empty, "/gp_localizer/global_localization")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(Empty.Request())
    wait_for(future.done, what="global_localization")
    spread = harness.node.localizer.particles.poses[:, :2].std(axis=0)
    assert spread.min() > 1.0  # over the room, not around the pose
    harness.feed(w, odom, start=half, shift_y=3.0)  # odometry jumped 3 m: a kidnapped robot
    wait_for(lambda: harness.node.localizer.steps[-1].stamp_ns
             >= T0_NS + round(w.time_s[-40] * 1e9), what="the last updates")  # fmt: skip
    last = harness.node.localizer.steps[-1]
    stamp = ns_to_stamp(last.stamp_ns)
    assert np.linalg.norm(last.estimate.mean[:2] - truth_at(w, stamp)[:2]) < 0.5


def test_a_bad_map_is_refused_and_the_current_one_stays(harness: Localizer, tmp_path: Path):
    before = harness.node.localizer
    harness.node.set_parameters([Parameter("map_path", value=str(tmp_path / "none.npz"))])
    client = harness.probe.create_client(Trigger, "/gp_localizer/load_map")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(Trigger.Request())
    response = wait_for(lambda: future.done() and future.result(), what="load_map")
    assert not response.success and "none.npz" in response.message
    assert harness.node.localizer is before


def test_bad_input_is_counted(harness: Localizer, walk) -> None:
    w, odom = walk
    bad = w._replace(mag_ut=w.mag_ut.copy())
    bad.mag_ut[5:8] = np.nan
    harness.feed(bad, odom, stop=60)
    wait_for(lambda: harness.node.localizer.drops.get("field_non_finite", 0) == 3,
             what="three readings counted")  # fmt: skip
    values = harness.node.diagnostics()
    assert values["drop_field_non_finite"] == 3


def test_without_a_map_readings_are_counted_and_the_node_says_so(
    ros_context: Context, spinner: Spinner, walk
) -> None:
    w, odom = walk
    h = Localizer(ros_context, spinner, {"diagnostics_period": 0.2})
    try:
        h.feed(w, odom, stop=20)
        wait_for(lambda: h.node.drops["no_map"] > 0, what="readings without a map")
        values = wait_for(lambda: filter_status(h.collector), what="diagnostics")
        assert values["map_loaded"] == "False"
    finally:
        h.close()


def test_invalid_parameters_stop_the_node(ros_context: Context) -> None:
    with pytest.raises(ValueError, match="min_particles"):
        GpLocalizerNode(context=ros_context, parameter_overrides=[
            Parameter("min_particles", value=900), Parameter("max_particles", value=100)
        ])  # fmt: skip
