"""The gp_localizer node: magnetometer + odometry in, the robot's pose on a magnetic map out.

A thin shell over ``gp_mapper.mapping.localization.Localizer`` with AMCL's conventions
(Nav2 ``amcl``): the filter runs in the input callbacks (one update is ~1 ms at 2000
particles, ``docs/localization.md``); a map load, which predicts the map on a lookup grid and
takes seconds, runs on a thread of its own (at start) or on the service thread
(``~/load_map``) and swaps the map in when it is ready.

Topics:
    in   ``mag``  sensor_msgs/MagneticField [T], sensor-data QoS (``mag_topic``)
    in   ``odom``  nav_msgs/Odometry of the base in ``odom_frame_id`` (``odom_topic``)
    in   ``initialpose``  geometry_msgs/PoseWithCovarianceStamped, as AMCL's (RViz's "2D Pose
         Estimate"): restart the filter around it
    out  ``~/pose``  geometry_msgs/PoseWithCovarianceStamped in ``global_frame_id`` after each
         update (reliable, transient local, depth 1, as AMCL's ``amcl_pose``)
    out  ``~/particles``  geometry_msgs/PoseArray, the particle set (at most PARTICLES_SHOWN
         of it, at most every PARTICLES_PERIOD_S of wall time)
    out  ``~/map_to_odom``  geometry_msgs/TransformStamped ``global_frame_id`` -> ``odom_frame_id``,
         and the same on ``/tf`` when ``tf_broadcast`` and tf2_ros is installed
    out  ``~/map``  nav_msgs/OccupancyGrid of the map's ‖B‖ on the lookup grid (1..98, -1 where
         the map knows nothing), once per loaded map (reliable, transient local)
    out  ``/diagnostics``  particles, effective size, converged, the map's mean predictive sd at
         the particles, drops by reason

Services: ``~/global_localization``, ``~/nomotion_update`` (std_srvs/Empty, as AMCL's:
re-initialise uniformly over the map's known area; weigh the readings gathered since the last
update without moving), ``~/load_map`` (std_srvs/Trigger: read ``map_path``; answers with the
reason when it fails, and the current map stays).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Pose, PoseArray, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.node import Node
from sensor_msgs.msg import MagneticField
from std_srvs.srv import Empty, Trigger

from gp_mapper.engine.auxiliary import yaw_from_quaternion
from gp_mapper.mapping.errors import MapFileError
from gp_mapper.mapping.localization import FieldLookup, Localizer, LocalizerConfig, Step
from gp_mapper.mapping.localization.motion import planar_pose
from gp_mapper.mapping.localization.settings import LOCALIZER_PARAMETERS
from gp_mapper.mapping.occupancy import scale_to_occupancy
from gp_mapper.ros.diagnostic_messages import DIAGNOSTIC_OK, DIAGNOSTIC_WARN, diagnostic_array
from gp_mapper.ros.entry import run_node
from gp_mapper.ros.grid_messages import occupancy_grid
from gp_mapper.ros.input_messages import pose_from_odometry, pose_from_pose_with_covariance
from gp_mapper.ros.parameters import declare_parameters, read_values
from gp_mapper.ros.qos import DIAGNOSTICS_QOS, MAP_QOS, POSE_QOS, sensor_qos
from gp_mapper.ros.service_host import ServiceHost, one_line
from gp_mapper.ros.stamps import message_header, stamp_to_ns

NODE_NAME = "gp_localizer"
TESLA_TO_MICROTESLA = 1e6
# ~/particles at most this often [s] and this many poses (an even subsample of the set):
# building a PoseArray of 20 000 poses in Python costs ~0.1 s, far more than the update.
PARTICLES_PERIOD_S = 0.5
PARTICLES_SHOWN = 2000


def yaw_of(q: Any) -> float:
    """The yaw [rad] of a ``geometry_msgs/Quaternion``."""
    return float(yaw_from_quaternion(np.array([q.x, q.y, q.z, q.w])))


def _set_yaw(pose: Pose, x: float, y: float, yaw: float) -> Pose:
    pose.position.x, pose.position.y = float(x), float(y)
    pose.orientation.z, pose.orientation.w = math.sin(0.5 * yaw), math.cos(0.5 * yaw)
    return pose


def map_to_odom(estimate: np.ndarray, odometry: np.ndarray) -> tuple[float, float, float]:
    """``T_map_odom = T_map_base · T_odom_base⁻¹`` for planar poses (x, y, yaw)."""
    yaw = estimate[2] - odometry[2]
    c, s = math.cos(yaw), math.sin(yaw)
    x = estimate[0] - (c * odometry[0] - s * odometry[1])
    y = estimate[1] - (s * odometry[0] + c * odometry[1])
    return x, y, math.atan2(math.sin(yaw), math.cos(yaw))


class GpLocalizerNode(Node):
    """The ``gp_localizer`` node (see the module docstring).

    Raises:
        ValueError: a parameter, or the parameters together, are invalid.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_parameters(self, LOCALIZER_PARAMETERS)
        self._values = read_values(self, LOCALIZER_PARAMETERS)
        self.config = LocalizerConfig.from_values(self._values)
        self._global_frame = str(self._values["global_frame_id"]).lstrip("/")
        self._odom_frame = str(self._values["odom_frame_id"]).lstrip("/")
        self._lock = threading.Lock()  # the localizer: callbacks and the load thread
        self.localizer: Localizer | None = None
        self.drops: Counter[str] = Counter()
        self._updates_published = 0
        self._particles_published_ns = 0

        self._pose_pub = self.create_publisher(PoseWithCovarianceStamped, "~/pose", POSE_QOS)
        self._particles_pub = self.create_publisher(PoseArray, "~/particles", 1)
        self._transform_pub = self.create_publisher(TransformStamped, "~/map_to_odom", 10)
        self._map_pub = self.create_publisher(OccupancyGrid, "~/map", MAP_QOS)
        self._diagnostics_pub = self.create_publisher(
            DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS
        )
        self._tf = self._transform_broadcaster() if self._values["tf_broadcast"] else None
        self.create_subscription(MagneticField, self._values["mag_topic"], self._on_field,
                                 sensor_qos())  # fmt: skip
        self.create_subscription(Odometry, self._values["odom_topic"], self._on_odometry,
                                 sensor_qos())  # fmt: skip
        self.create_subscription(PoseWithCovarianceStamped, "initialpose", self._on_initial_pose,
                                 10)  # fmt: skip
        self.create_service(Empty, "~/global_localization", self._on_global_localization)
        self.create_service(Empty, "~/nomotion_update", self._on_nomotion_update)
        self._service_host = ServiceHost(self, {"load_map": self._on_load_map})
        self.create_timer(float(self._values["diagnostics_period"]), self._publish_diagnostics)
        if self._values["map_path"]:
            # A building's map takes seconds to predict on the lookup grid: read it beside the
            # executor, readings before it are counted (no_map).
            self._loader = threading.Thread(
                target=self._load_at_start, args=(str(self._values["map_path"]),), daemon=True
            )
            self._loader.start()
        else:
            self.get_logger().warn("no map_path: no map until ~/load_map with map_path set")

    def _load_at_start(self, path: str) -> None:
        ok, message = self.load_map(path)
        (self.get_logger().info if ok else self.get_logger().error)(message)

    def _transform_broadcaster(self) -> Any:
        try:
            from tf2_ros import TransformBroadcaster  # a full ROS install has it
        except ImportError:
            self.get_logger().warn(
                "tf2_ros is not installed: map -> odom goes to ~/map_to_odom only, not /tf"
            )
            return None
        return TransformBroadcaster(self)

    # ------------------------------------------------------------------ the map
    def load_map(self, path: str) -> tuple[bool, str]:
        """Read a map file and restart the filter on it with the filter parameters as they
        are now (the current map and filter stay on failure)."""
        try:
            self._values = read_values(self, LOCALIZER_PARAMETERS)
            self.config = LocalizerConfig.from_values(self._values)
            lookup = FieldLookup.from_map_file(
                Path(path).expanduser(), resolution_m=float(self._values["lookup_resolution"])
            )
        except (MapFileError, OSError, ValueError) as err:
            return False, f"map not loaded: {one_line(err, with_type=False)}"
        localizer = Localizer(lookup, self.config, history=1)  # bounded: it runs for hours
        if self._values["set_initial_pose"]:
            x, y, a = (float(self._values[f"initial_pose_{k}"]) for k in "xya")
            localizer.initialize_pose(np.array([x, y, a]))
        else:
            localizer.initialize_global()
        with self._lock:
            self.localizer = localizer
        self._publish_map(lookup)
        return True, (f"map {path}: {lookup.known_area_m2:.1f} m² known, lookup grid "
                      f"{lookup.grid.shape[1]} x {lookup.grid.shape[0]} at "
                      f"{lookup.grid.resolution_m:g} m")  # fmt: skip

    def _on_load_map(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        path = str(self.get_parameter("map_path").value)
        if not path:
            response.success, response.message = False, "map_path is empty"
            return response
        response.success, response.message = self.load_map(path)
        return response

    def _publish_map(self, lookup: FieldLookup) -> None:
        data, _, _ = scale_to_occupancy(lookup.mean_grid, ~lookup.known)
        stamp = self.get_clock().now().nanoseconds
        grid = lookup.grid
        self._map_pub.publish(
            occupancy_grid(data, grid.origin_m, grid.resolution_m, self._global_frame, stamp)
        )

    # ------------------------------------------------------------------ inputs
    def _on_field(self, msg: MagneticField) -> None:
        v = msg.magnetic_field
        field_ut = np.array([v.x, v.y, v.z]) * TESLA_TO_MICROTESLA
        with self._lock:
            if self.localizer is None:
                self.drops["no_map"] += 1
                return
            self.localizer.add_field(stamp_to_ns(msg.header.stamp), field_ut)
        self._publish_new_steps()

    def _on_odometry(self, msg: Odometry) -> None:
        pose = planar_pose(pose_from_odometry(msg))
        with self._lock:
            if self.localizer is None:
                return
            self.localizer.add_odometry(stamp_to_ns(msg.header.stamp), pose)
        self._publish_new_steps()

    def _on_initial_pose(self, msg: PoseWithCovarianceStamped) -> None:
        mean = planar_pose(pose_from_pose_with_covariance(msg))
        c = np.asarray(msg.pose.covariance, dtype=np.float64).reshape(6, 6)
        covariance = c[np.ix_([0, 1, 5], [0, 1, 5])]
        if not np.all(np.linalg.eigvalsh(0.5 * (covariance + covariance.T)) > 0.0):
            covariance = None  # RViz's "2D Pose Estimate" sends AMCL's defaults; zeros: ours
        with self._lock:
            if self.localizer is None:
                self.drops["initial_pose_without_map"] += 1
                return
            try:
                self.localizer.initialize_pose(mean, covariance)
            except ValueError as err:
                self.drops["initial_pose_invalid"] += 1
                self.get_logger().warn(f"initialpose refused: {one_line(err)}")
                return
        self.get_logger().info(f"initial pose ({mean[0]:.2f}, {mean[1]:.2f}, {mean[2]:.2f})")

    def _on_global_localization(self, _request: Any, response: Any) -> Any:
        with self._lock:
            if self.localizer is not None:
                self.localizer.initialize_global()
        self.get_logger().info("global localization: particles spread over the known map")
        return response

    def _on_nomotion_update(self, _request: Any, response: Any) -> Any:
        with self._lock:
            if self.localizer is not None:
                self.localizer.update_now()
        self._publish_new_steps()
        return response

    # ------------------------------------------------------------------ outputs
    def _publish_new_steps(self) -> None:
        with self._lock:
            localizer = self.localizer
            if localizer is None or localizer.updates == self._updates_published:
                return
            step = localizer.steps[-1]
            self._updates_published = localizer.updates
            now_ns = self.get_clock().now().nanoseconds
            particles = None  # copied only when ~/particles is due (20 000 poses: 0.5 MB)
            if now_ns - self._particles_published_ns >= PARTICLES_PERIOD_S * 1e9:
                self._particles_published_ns = now_ns
                particles = localizer.particles.poses.copy()  # type: ignore[union-attr]
        self._publish_step(step, particles)

    def _publish_step(self, step: Step, particles: np.ndarray | None) -> None:
        header = message_header(self._global_frame, step.stamp_ns)
        mean, cov = step.estimate.mean, step.estimate.covariance
        msg = PoseWithCovarianceStamped(header=header)
        _set_yaw(msg.pose.pose, *mean)
        full = np.zeros((6, 6))
        full[np.ix_([0, 1, 5], [0, 1, 5])] = cov
        msg.pose.covariance = full.ravel().tolist()
        self._pose_pub.publish(msg)
        if particles is not None:
            stride = max(1, math.ceil(particles.shape[0] / PARTICLES_SHOWN))
            cloud = PoseArray(header=header)
            cloud.poses = [_set_yaw(Pose(), *p) for p in particles[::stride]]
            self._particles_pub.publish(cloud)
        x, y, yaw = map_to_odom(mean, step.odometry)
        transform = TransformStamped(header=header, child_frame_id=self._odom_frame)
        transform.transform.translation.x, transform.transform.translation.y = x, y
        transform.transform.rotation.z = math.sin(0.5 * yaw)
        transform.transform.rotation.w = math.cos(0.5 * yaw)
        self._transform_pub.publish(transform)
        if self._tf is not None:
            self._tf.sendTransform(transform)

    def diagnostics(self) -> dict[str, Any]:
        with self._lock:
            localizer = self.localizer
            values: dict[str, Any] = {"map_loaded": localizer is not None, **self.drops}
            if localizer is None:
                return values
            values |= {f"drop_{k}": v for k, v in localizer.drops.items()}
            values["updates"] = localizer.updates
            if localizer.steps:
                step = localizer.steps[-1]
                values |= {
                    "particles": step.estimate.particles,
                    "effective_size": round(step.estimate.effective_size, 1),
                    "converged": step.converged,
                    "position_sd_m": round(step.estimate.position_sd_m, 3),
                    "map_sd_at_particles_ut": round(step.predicted_sd_ut, 3),
                }
        return values

    def _publish_diagnostics(self) -> None:
        values = self.diagnostics()
        converged = bool(values.get("converged", False))
        if not values["map_loaded"]:
            level, message = DIAGNOSTIC_WARN, "no map loaded"
        elif converged:
            level, message = DIAGNOSTIC_OK, "converged"
        else:
            level, message = DIAGNOSTIC_WARN, "not converged"
        self._diagnostics_pub.publish(diagnostic_array(
            self.get_clock().now().nanoseconds, f"{NODE_NAME}: filter", "cpu", level, message,
            values,
        ))  # fmt: skip

    def destroy_node(self) -> None:
        self._service_host.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    """Console script ``gp_localizer_node``: ``gp_localizer_node --ros-args -p map_path:=M``.

    Exits with status 1, after one logged line with the reason, when the parameters are
    invalid or anything else stops the node.
    """
    run_node(NODE_NAME, GpLocalizerNode, rclpy.spin, (ValueError,), args)


if __name__ == "__main__":
    main()
