"""The gp_localizer node in-process on a MultiThreadedExecutor (as ``main`` spins it), and a
probe node that drives it over DDS: the magnetometer, odometry on /tf (or on a topic), the
mounting on /tf_static, and collectors for everything the node publishes.

The synthetic walk is of the sensor's point (``SyntheticRun``): the readings are in the base's
axes and taken where the sensor is. A probe with a mounting publishes the base's odometry
(the point less the lever arm) and the readings turned into the sensor's frame, which the
node must undo.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseArray, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import MagneticField
from tf2_msgs.msg import TFMessage

from gp_mapper.io.odometry import OdometryErrors, simulate_odometry
from gp_mapper.io.synthetic import SyntheticRun, simulate_run
from gp_mapper.ros import diagnostic_messages
from gp_mapper.ros.entry import SPIN_THREADS, shutdown_executor
from gp_mapper.ros.localizer_node import GpLocalizerNode
from gp_mapper.ros.qos import MAP_QOS, POSE_QOS, TF_QOS, TF_STATIC_QOS
from gp_mapper.ros.stamps import ns_to_stamp, stamp_to_ns
from gp_mapper.ros.tf_messages import planar_transform

from ..mapping.localization_scene import WORLD
from .helpers import Collector, Spinner, wait_for

PROBE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
POSE = "/amcl_pose"
PARTICLES = "/particle_cloud"
OLD_POSE = "/gp_localizer/pose"
OLD_PARTICLES = "/gp_localizer/particles"
MAP = "/gp_localizer/map"
MAP_TO_ODOM = "/gp_localizer/map_to_odom"
SENSOR_FRAME = "imu_link"
# The walk's stamps start this long before the test does: every reading is in the past, as a
# live robot's are, so the node's re-sends (stamped now + tolerance) come after them.
WALK_LEAD_S = 120.0


def make_walk() -> tuple[SyntheticRun, np.ndarray]:
    """40 s through the synthetic room at 20 Hz, and its odometry [N, 3] that drifts."""
    walk = simulate_run(WORLD, 40.0, rate_hz=20.0, seed=2, speed_mps=0.4)
    odom = simulate_odometry(walk.time_s, walk.position_m, walk.heading_rad, OdometryErrors(), 4)
    return walk, odom.pose


class Mounting:
    """The magnetometer's pose on the base: lever arm (x, y) [m] and yaw [rad]."""

    def __init__(self, x: float = 0.0, y: float = 0.0, yaw: float = 0.0) -> None:
        self.lever = np.array([x, y])
        self.yaw = yaw

    def base_of(self, point: np.ndarray) -> np.ndarray:
        """The base's planar pose [3] from the sensor point's (x, y, heading)."""
        c, s = math.cos(point[2]), math.sin(point[2])
        lx, ly = self.lever
        return np.array([point[0] - (c * lx - s * ly), point[1] - (s * lx + c * ly), point[2]])

    def to_sensor(self, field_base: np.ndarray) -> np.ndarray:
        """A reading in the base's axes turned into the sensor's."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        x, y, z = field_base
        return np.array([c * x + s * y, -s * x + c * y, z])


# A magnetometer 0.4 m ahead of and 0.2 m right of the base, its x axis to the base's left:
# the node must turn the readings and carry the lever arm to publish the base's pose.
MOUNTING = Mounting(0.4, -0.2, math.pi / 2)


def start_parameters(walk: Any, mounting: Mounting, **more: Any) -> dict[str, Any]:
    """A known start: the true base pose at the walk's first reading."""
    first = np.array([*walk.position_m[0], walk.heading_rad[0]])
    x, y, yaw = mounting.base_of(first)
    return {"set_initial_pose": True, "initial_pose.x": float(x), "initial_pose.y": float(y),
            "initial_pose.yaw": float(yaw), "diagnostics_period": 0.2, "seed": 1,
            **more}  # fmt: skip


class LocalizerHarness:
    """The node on its own executor threads, and a probe around it.

    Args:
        context: the test's rclpy context.
        spinner: spins the probe.
        parameters: the node's parameter overrides.
        namespace: the node's namespace.
    """

    def __init__(
        self, context: Context, spinner: Spinner, parameters: dict[str, Any], namespace: str = ""
    ) -> None:
        overrides = [Parameter(k, value=v) for k, v in parameters.items()]
        self.node = GpLocalizerNode(
            context=context, parameter_overrides=overrides, namespace=namespace
        )
        self._executor = MultiThreadedExecutor(num_threads=SPIN_THREADS, context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.t0_ns = time.time_ns() - round(WALK_LEAD_S * 1e9)
        self.probe = spinner.node("localizer_probe")
        self.collector = Collector(self.probe)
        prefix = namespace.rstrip("/")
        for msg_type, topic, qos in (
            (PoseWithCovarianceStamped, POSE, POSE_QOS),
            (PoseArray, PARTICLES, PROBE_QOS),
            (TransformStamped, MAP_TO_ODOM, PROBE_QOS),
            (OccupancyGrid, MAP, MAP_QOS),
            (DiagnosticArray, "/diagnostics", 10),
        ):
            self.collector.listen(msg_type, prefix + topic, qos)
        # Deeper than tf2_ros's 100: the probe's own odometry shares /tf with the node's output.
        self.collector.listen(TFMessage, "/tf", PROBE_QOS)
        self.mag = self.probe.create_publisher(MagneticField, f"{prefix}/mag", PROBE_QOS)
        self.odom = self.probe.create_publisher(Odometry, f"{prefix}/odom", PROBE_QOS)
        self.tf = self.probe.create_publisher(TFMessage, "/tf", TF_QOS)
        self.tf_static = self.probe.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self.initial = self.probe.create_publisher(
            PoseWithCovarianceStamped, f"{prefix}/initialpose", 10
        )
        self.reading_stamps: list[int] = []
        self._mounted = False

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def stamp_ns(self, walk: Any, i: int) -> int:
        return self.t0_ns + round(float(walk.time_s[i]) * 1e9)

    def mount(self, mounting: Mounting) -> None:
        """The mounting on /tf_static (transient local: sent once, as a static broadcaster)."""
        transform = planar_transform("base_link", SENSOR_FRAME, 0, *mounting.lever, mounting.yaw)
        self.tf_static.publish(TFMessage(transforms=[transform]))
        self._mounted = True

    def feed(self, walk: Any, odom: np.ndarray, start: int = 0, stop: int | None = None, *,
             via: str = "tf", mounting: Mounting | None = None, shift_y: float = 0.0,
             pace_s: float = 0.002, hard_iron_ut: np.ndarray | None = None) -> None:  # fmt: skip
        """Publish the walk's odometry (on /tf or the odom topic) and readings (plus the
        sensor's own offset ``hard_iron_ut``, in its axes)."""
        mounting = mounting or Mounting()
        if via == "tf" and not self._mounted:
            self.mount(mounting)
        odometry_input = self.tf if via == "tf" else self.odom
        wait_for(lambda: self.mag.get_subscription_count()
                 and odometry_input.get_subscription_count(),
                 what="the node's subscriptions")  # fmt: skip
        for i in range(start, stop or walk.time_s.size):
            stamp_ns = self.stamp_ns(walk, i)
            point = np.array([odom[i, 0], odom[i, 1] + shift_y, odom[i, 2]])
            if via == "tf":
                base = mounting.base_of(point)
                t = planar_transform("odom", "base_link", stamp_ns, *base)
                self.tf.publish(TFMessage(transforms=[t]))
            else:
                o = Odometry()
                o.header.stamp, o.header.frame_id = ns_to_stamp(stamp_ns), "odom"
                o.pose.pose.position.x, o.pose.pose.position.y = float(point[0]), float(point[1])
                o.pose.pose.orientation.z = math.sin(0.5 * point[2])
                o.pose.pose.orientation.w = math.cos(0.5 * point[2])
                self.odom.publish(o)
            m = MagneticField()
            m.header.stamp = ns_to_stamp(stamp_ns)
            m.header.frame_id = SENSOR_FRAME if via == "tf" else "imu_link"
            field = mounting.to_sensor(walk.mag_ut[i]) if via == "tf" else walk.mag_ut[i]
            if hard_iron_ut is not None:
                field = field + hard_iron_ut
            bx, by, bz = (float(v) * 1e-6 for v in field)
            m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z = bx, by, bz
            self.mag.publish(m)
            self.reading_stamps.append(stamp_ns)
            time.sleep(pace_s)

    def reached(self, walk: Any, index: int) -> bool:
        """Whether a pose has come for the walk's reading ``index`` or later."""
        last = self.collector.latest(POSE)
        return last is not None and stamp_to_ns(last.header.stamp) >= self.stamp_ns(walk, index)

    def map_to_odom_on_tf(self) -> list[TransformStamped]:
        """Every map -> odom the node sent on /tf, in order received."""
        return [
            t
            for msg in self.collector.messages("/tf")
            for t in msg.transforms
            if t.header.frame_id == "map" and t.child_frame_id == "odom"
        ]

    def filter_status(self) -> dict[str, str] | None:
        """The localizer's /diagnostics values, once a message has come."""
        msg = self.collector.latest("/diagnostics")
        if msg is None:
            return None
        return diagnostic_messages.diagnostic_values(msg, "gp_localizer: filter")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        shutdown_executor(self._executor)
        self.node.destroy_node()


def truth_at(walk: Any, t0_ns: int, stamp: Any) -> np.ndarray:
    """The walk's true (x, y, heading) of the sensor point nearest a stamp."""
    t = (stamp_to_ns(stamp) - t0_ns) / 1e9
    i = int(np.argmin(np.abs(walk.time_s - t)))
    return np.array([walk.position_m[i, 0], walk.position_m[i, 1], walk.heading_rad[i]])
