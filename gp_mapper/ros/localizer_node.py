"""The gp_localizer node: magnetometer + odometry in, the robot's pose on a magnetic map out.

A lifecycle node (``rclpy.lifecycle.LifecycleNode``) with Nav2 AMCL's interface, over
``gp_mapper.mapping.localization.Localizer``: configure reads the parameters and creates the
publishers, subscriptions, services and timers, and starts reading ``map_path``; activate turns
the publishers on and the inputs are processed; deactivate publishes nothing and ignores the
inputs, keeping the filter and the map; cleanup drops them. With ``autostart`` (default true)
the node configures and activates itself, so ``ros2 run`` and the launch file need no
lifecycle manager (``gp_mapper.ros.lifecycle``).

The filter runs in the input callbacks (one update is ~1 ms at 2000 particles,
``docs/localization.md``). A map load predicts the map on a lookup grid and takes seconds: at
configure it runs on a thread of its own, and ``~/load_map`` runs in a callback group of its
own, so under ``main``'s MultiThreadedExecutor the inputs keep flowing (rclpy's EventsExecutor
runs every callback on one thread and cannot run a coroutine service).

Topics:
    in   ``mag``  sensor_msgs/MagneticField [T] in its sensor frame, sensor-data QoS
    in   ``/tf``, ``/tf_static``  tf2_msgs/TFMessage (``odom_source`` tf, the default):
         ``odom_frame_id -> base_frame_id`` at each reading's stamp, and the magnetometer's
         mounting ``base_frame_id -> the reading's frame`` (tf2_ros's listener QoS)
    in   ``odom``  nav_msgs/Odometry of the base in ``odom_frame_id`` (``odom_source`` topic)
    in   ``initialpose``  geometry_msgs/PoseWithCovarianceStamped in ``global_frame_id``, as
         AMCL's (RViz's "2D Pose Estimate"): restart the filter around it
    out  ``amcl_pose``  geometry_msgs/PoseWithCovarianceStamped of ``base_frame_id`` in
         ``global_frame_id`` after each update (reliable, transient local, depth 1, as AMCL)
    out  ``particle_cloud``  geometry_msgs/PoseArray of the particles (Nav2 sends
         nav2_msgs/ParticleCloud here, which is not installable here): at most
         PARTICLES_SHOWN of the set, at most every PARTICLES_PERIOD_S
    out  ``/tf``  tf2_msgs/TFMessage ``global_frame_id -> odom_frame_id`` (``tf_broadcast``),
         QoS as tf2_ros's TransformBroadcaster, stamped the update's last reading +
         ``transform_tolerance``, and re-sent every ``transform_publish_period`` while no
         update comes, stamped now + ``transform_tolerance``
    out  ``~/map_to_odom``  geometry_msgs/TransformStamped, the same correction once per
         update, stamped as ``amcl_pose`` (not post-dated): a record of each correction
    out  ``~/map``  nav_msgs/OccupancyGrid of the map's ‖B‖ on the lookup grid (1..98, -1 where
         the map knows nothing), once per loaded map (reliable, transient local)
    out  ``/diagnostics``  particles, effective size, converged, the map's mean predictive sd at
         the particles, drops by reason
    deprecated (one release): ``~/pose`` (= ``amcl_pose``), ``~/particles``
         (= ``particle_cloud``); each warns once in the log when it has a subscriber

Services (std_srvs/Empty, Nav2's names): ``reinitialize_global_localization`` (particles
uniform over the map's known area), ``request_nomotion_update`` (weigh the readings gathered
since the last update without moving); deprecated: ``~/global_localization``,
``~/nomotion_update`` (the same, warning once when called). ``~/load_map`` (std_srvs/Trigger:
read ``map_path``; answers with the reason when it fails, and the current map stays).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseArray, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.service import Service
from rclpy.subscription import Subscription
from rclpy.timer import Timer
from sensor_msgs.msg import MagneticField
from std_srvs.srv import Empty, Trigger

from gp_mapper.mapping.errors import MapFileError
from gp_mapper.mapping.localization import FieldLookup, Localizer, LocalizerConfig, Step
from gp_mapper.mapping.localization.correction import CorrectionSchedule, map_to_odom
from gp_mapper.mapping.localization.motion import planar_pose
from gp_mapper.mapping.localization.settings import FILTER, PARAMETER_BY_NAME
from gp_mapper.mapping.localization.tf_odometry import (
    PosedReading,
    TfOdometry,
    base_pose,
    base_poses,
    feed_posed,
    seconds_to_ns,
    tracked_odometry,
)
from gp_mapper.mapping.occupancy import scale_to_occupancy
from gp_mapper.ros.diagnostic_messages import DIAGNOSTIC_OK, DIAGNOSTIC_WARN, diagnostic_array
from gp_mapper.ros.entry import run_node, spin_multithreaded
from gp_mapper.ros.errors import one_line
from gp_mapper.ros.grid_messages import occupancy_grid
from gp_mapper.ros.input_messages import (
    pose_from_odometry,
    pose_from_pose_with_covariance,
    transforms_from_msg,
)
from gp_mapper.ros.lifecycle import Transitions, autostart, finalize
from gp_mapper.ros.localizer_messages import (
    particle_cloud,
    planar_covariance,
    pose_with_covariance,
)
from gp_mapper.ros.localizer_parameters import (
    LocalizerParameterGuard,
    declare_localizer_parameters,
    read_localizer_values,
)
from gp_mapper.ros.parameters import from_ros
from gp_mapper.ros.qos import (
    DIAGNOSTICS_QOS,
    MAP_QOS,
    POSE_QOS,
    TF_QOS,
    TF_STATIC_QOS,
    sensor_qos,
)
from gp_mapper.ros.stamps import stamp_to_ns
from gp_mapper.ros.tf_messages import planar_transform

NODE_NAME = "gp_localizer"
TESLA_TO_MICROTESLA = 1e6
# particle_cloud at most this often [s] and this many poses (an even subsample of the set):
# building a PoseArray of 20 000 poses in Python costs ~0.1 s, far more than the update.
PARTICLES_PERIOD_S = 0.5
PARTICLES_SHOWN = 2000
# Nav2's names, and the deprecated ones (one release) that are still served.
POSE_TOPIC = "amcl_pose"
PARTICLES_TOPIC = "particle_cloud"
GLOBAL_LOCALIZATION_SERVICE = "reinitialize_global_localization"
NOMOTION_UPDATE_SERVICE = "request_nomotion_update"
DEPRECATED_POSE_TOPIC = "~/pose"
DEPRECATED_PARTICLES_TOPIC = "~/particles"
DEPRECATED_GLOBAL_LOCALIZATION = "~/global_localization"
DEPRECATED_NOMOTION_UPDATE = "~/nomotion_update"
DEPRECATED_TOPICS = {DEPRECATED_POSE_TOPIC: POSE_TOPIC, DEPRECATED_PARTICLES_TOPIC: PARTICLES_TOPIC}
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
TF_ODOM_SOURCE = "tf"
# /initialpose keeps what RViz sends in a burst (its tool publishes reliable, volatile).
INITIAL_POSE_DEPTH = 10
# ~/map_to_odom: one per update.
MAP_TO_ODOM_DEPTH = 10
# The filter's settings: a change reaches the running filter.
FILTER_NAMES = frozenset(n for n, p in PARAMETER_BY_NAME.items() if p.group == FILTER)


def tf_message_type() -> type | None:
    """tf2_msgs/TFMessage, or None where tf2_msgs is not installed (it has no wheel; a ROS
    install has it, and ``make venv`` builds it)."""
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError:
        return None
    return TFMessage


class _Wiring:
    """What configure creates and cleanup destroys: the node's ROS entities."""

    def __init__(self) -> None:
        self.publishers: dict[str, Publisher] = {}
        self.subscriptions: list[Subscription] = []
        self.services: list[Service] = []
        self.timers: dict[str, Timer] = {}


class GpLocalizerNode(LifecycleNode):
    """The ``gp_localizer`` node (see the module docstring).

    Args:
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``context``,
            ``parameter_overrides``, ``cli_args``, ``namespace``...).

    Raises:
        gp_mapper.ros.errors.TransitionError: ``autostart`` is on and configure or activate
            failed (invalid parameters: the message says which).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_localizer_parameters(self)
        # One lock for the filter, the map and the entities: the input, service, timer and
        # transition callbacks run on several executor threads, the first load on its own.
        self._lock = threading.RLock()
        self._values: dict[str, Any] = {}
        self.config = LocalizerConfig()
        self.localizer: Localizer | None = None
        self.lookup: FieldLookup | None = None
        self.tf_odometry: TfOdometry | None = None
        self.drops: Counter[str] = Counter()
        self._wiring: _Wiring | None = None
        self._active = False
        self._generation = 0  # bumped by cleanup: a load that began before it is discarded
        self._inputs = MutuallyExclusiveCallbackGroup()
        self._slow = MutuallyExclusiveCallbackGroup()  # ~/load_map: seconds
        self._tf_message: type | None = None
        self._warned: set[str] = set()
        self._reset_filter_state()
        self.add_on_set_parameters_callback(LocalizerParameterGuard(self))
        self.add_post_set_parameters_callback(self._apply_parameters)
        self._transitions = Transitions(self.get_logger(), failures=(ValueError,))
        autostart(self, self._transitions)

    def _reset_filter_state(self) -> None:
        self._updates_published = 0
        self._particles_published_ns = 0
        self._last_odometry: tuple[int, np.ndarray] | None = None
        self._lever = np.zeros(2)  # the sensor's origin in the base frame (x, y) [m]
        self._pending_start: np.ndarray | None = None  # a start (the base's pose) not yet made
        self._pending_covariance: np.ndarray | None = None
        self._start_point = np.zeros(3)  # the last start, as the tracked point's pose
        self._start_correction_due = False  # map -> odom from the start awaits odometry
        self._correction = CorrectionSchedule()  # map -> odom, and when it is sent

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transitions.run("configure", self._configure)

    def _configure(self) -> None:
        values, warnings = read_localizer_values(self)
        for warning in warnings:
            self.get_logger().warn(warning)
        config = LocalizerConfig.from_values(values)
        tf_message = tf_message_type()
        tf_odometry = values["odom_source"] == TF_ODOM_SOURCE
        if tf_odometry and tf_message is None:
            raise ValueError(
                "odom_source tf needs the tf2_msgs package (a ROS install has it; `make venv` "
                "builds it here); or set odom_source:=topic"
            )
        if values["tf_broadcast"] and tf_message is None:
            self.get_logger().warn("tf2_msgs is not installed: map -> odom on ~/map_to_odom only")
        with self._lock:
            self._values, self.config, self._tf_message = values, config, tf_message
            self._generation += 1
            self.drops.clear()
            self._reset_filter_state()
            if tf_odometry:
                self.tf_odometry = TfOdometry(
                    self._frame("odom_frame_id"), self._frame("base_frame_id"),
                    timeout_ns=seconds_to_ns(values["transform_timeout"]),
                    max_gap_ns=seconds_to_ns(values["max_transform_gap"]),
                    ignored=((self._frame("global_frame_id"), self._frame("odom_frame_id")),),
                )  # fmt: skip
            try:
                self._wiring = self._create_wiring()
            except Exception:
                self._release()
                raise
            generation = self._generation
        path = str(values["map_path"])
        if path:
            # A building's map takes seconds to predict on the lookup grid: read it beside the
            # executor; readings before it are counted (no_map).
            threading.Thread(
                target=self._load_at_configure, args=(path, generation), daemon=True
            ).start()
        else:
            self.get_logger().warn("no map_path: no map until ~/load_map with map_path set")

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            result = super().on_activate(state)
            self._active = True
            if self.lookup is not None:
                self._publish_map(self.lookup)
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            self._active = False
            return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            self._active = False
            self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            self._active = False
            self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        """Destroy what configure made and drop the filter and the map (under the lock)."""
        self._generation += 1
        wiring, self._wiring = self._wiring, None
        if wiring is not None:
            for timer in wiring.timers.values():
                self.destroy_timer(timer)
            for service in wiring.services:
                self.destroy_service(service)
            for subscription in wiring.subscriptions:
                self.destroy_subscription(subscription)
            for publisher in wiring.publishers.values():
                self.destroy_lifecycle_publisher(publisher)
        self.localizer = None
        self.lookup = None
        self.tf_odometry = None
        self._reset_filter_state()

    def destroy_node(self) -> None:
        finalize(self)  # on_shutdown releases what configure made
        super().destroy_node()

    # ------------------------------------------------------------------ wiring
    def _frame(self, name: str) -> str:
        return str(self._values[name]).lstrip("/")

    def _create_wiring(self) -> _Wiring:
        wiring = _Wiring()
        self._wiring = wiring  # filled in place, so a failure half-way releases what exists
        pub = self.create_lifecycle_publisher
        wiring.publishers |= {
            POSE_TOPIC: pub(PoseWithCovarianceStamped, POSE_TOPIC, POSE_QOS),
            DEPRECATED_POSE_TOPIC: pub(PoseWithCovarianceStamped, DEPRECATED_POSE_TOPIC, POSE_QOS),
            PARTICLES_TOPIC: pub(PoseArray, PARTICLES_TOPIC, 1),
            DEPRECATED_PARTICLES_TOPIC: pub(PoseArray, DEPRECATED_PARTICLES_TOPIC, 1),
            "map_to_odom": pub(TransformStamped, "~/map_to_odom", MAP_TO_ODOM_DEPTH),
            "map": pub(OccupancyGrid, "~/map", MAP_QOS),
            "diagnostics": pub(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS),
        }
        if self._tf_message is not None:
            wiring.publishers["tf"] = pub(self._tf_message, TF_TOPIC, TF_QOS)
        sub = self.create_subscription
        inputs = self._inputs
        wiring.subscriptions.append(sub(MagneticField, self._values["mag_topic"], self._on_field,
                                        sensor_qos(), callback_group=inputs))  # fmt: skip
        if self.tf_odometry is not None:
            assert self._tf_message is not None
            wiring.subscriptions += [
                sub(self._tf_message, TF_TOPIC, self._on_tf, TF_QOS, callback_group=inputs),
                sub(self._tf_message, TF_STATIC_TOPIC, self._on_tf_static, TF_STATIC_QOS,
                    callback_group=inputs),
            ]  # fmt: skip
        else:
            wiring.subscriptions.append(sub(Odometry, self._values["odom_topic"],
                                            self._on_odometry, sensor_qos(),
                                            callback_group=inputs))  # fmt: skip
        wiring.subscriptions.append(sub(PoseWithCovarianceStamped, "initialpose",
                                        self._on_initial_pose, INITIAL_POSE_DEPTH,
                                        callback_group=inputs))  # fmt: skip
        for srv_type, name, handler, group in (
            (Empty, GLOBAL_LOCALIZATION_SERVICE, self._on_global_localization, None),
            (Empty, NOMOTION_UPDATE_SERVICE, self._on_nomotion_update, None),
            (Empty, DEPRECATED_GLOBAL_LOCALIZATION,
             self._deprecated(DEPRECATED_GLOBAL_LOCALIZATION, GLOBAL_LOCALIZATION_SERVICE,
                              self._on_global_localization), None),
            (Empty, DEPRECATED_NOMOTION_UPDATE,
             self._deprecated(DEPRECATED_NOMOTION_UPDATE, NOMOTION_UPDATE_SERVICE,
                              self._on_nomotion_update), None),
            (Trigger, "~/load_map", self._on_load_map, self._slow),
        ):  # fmt: skip
            wiring.services.append(self.create_service(
                srv_type, name, self._guarded(name, handler), callback_group=group))  # fmt: skip
        self._make_timers(wiring, ("diagnostics", "tf"))
        return wiring

    def _make_timers(self, wiring: _Wiring, which: tuple[str, ...]) -> None:
        """(Re)make timers: ``diagnostics`` every diagnostics_period, ``tf`` every
        transform_publish_period (none when 0)."""
        periods = {"diagnostics": float(self._values["diagnostics_period"]),
                   "tf": float(self._values["transform_publish_period"])}  # fmt: skip
        callbacks = {"diagnostics": self._publish_diagnostics, "tf": self._on_tf_timer}
        for name in which:
            old = wiring.timers.pop(name, None)
            if old is not None:
                self.destroy_timer(old)
            if periods[name] > 0.0:
                wiring.timers[name] = self.create_timer(periods[name], callbacks[name])

    def _deprecated(
        self, old: str, new: str, handler: Callable[[Any, Any], Any]
    ) -> Callable[[Any, Any], Any]:
        def call(request: Any, response: Any) -> Any:
            self._warn_once(old, f"service {old} is deprecated (removed in the next release): "
                                 f"call {new}")  # fmt: skip
            return handler(request, response)

        return call

    def _guarded(self, name: str, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """A service handler that answers whatever happens: a failure is logged (and a
        Trigger answers it), never left to stop the executor and the node."""

        def call(request: Any, response: Any) -> Any:
            try:
                return handler(request, response)
            except Exception as err:  # the last guard of a service
                message = f"{name} failed: {one_line(err)}"
                self.get_logger().error(message)
                if isinstance(response, Trigger.Response):
                    response.success, response.message = False, message
                return response

        return call

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warn(message)

    # ------------------------------------------------------------------ parameters
    def _apply_parameters(self, params: list[Parameter]) -> None:
        """After a change the guard accepted: apply it to the running node."""
        with self._lock:
            for param in params:
                info = PARAMETER_BY_NAME.get(param.name)
                if info is not None and self._values:
                    self._values[param.name] = from_ros(info, param.value)
            if self._wiring is None:
                return  # unconfigured: configure reads every value afresh
            names = {param.name for param in params}
            if names & FILTER_NAMES:
                self.config = LocalizerConfig.from_values(self._values)
                if self.localizer is not None:
                    self.localizer.config = self.config
            timers = tuple(name for name, parameter in (("diagnostics", "diagnostics_period"),
                                                        ("tf", "transform_publish_period"))
                           if parameter in names)  # fmt: skip
            self._make_timers(self._wiring, timers)
            if "transform_timeout" in names and self.tf_odometry is not None:
                self.tf_odometry.timeout_ns = seconds_to_ns(self._values["transform_timeout"])

    # ------------------------------------------------------------------ the map
    def _load_at_configure(self, path: str, generation: int) -> None:
        ok, message = self.load_map(path, generation)
        (self.get_logger().info if ok else self.get_logger().error)(message)

    def load_map(self, path: str, generation: int | None = None) -> tuple[bool, str]:
        """Read a map file and restart the filter on it with the parameters as they are now
        (the current map and filter stay on failure).

        Args:
            path: the map file.
            generation: the configuration the load belongs to; a load that outlives it (the
                node was cleaned up meanwhile) is discarded. None: the current one.
        """
        with self._lock:
            generation = self._generation if generation is None else generation
            values, config = dict(self._values), self.config
        try:
            lookup = FieldLookup.from_map_file(
                Path(path).expanduser(), resolution_m=float(values["lookup_resolution"])
            )
        except (MapFileError, OSError, ValueError) as err:
            return False, f"map not loaded: {one_line(err, with_type=False)}"
        localizer = Localizer(lookup, config, history=1)  # bounded: it runs for hours
        with self._lock:
            if generation != self._generation or self._wiring is None:
                return False, "map not loaded: the node was cleaned up during the load"
            self.localizer, self.lookup = localizer, lookup
            self._reset_filter_state()
            if self.tf_odometry is not None:
                self.tf_odometry.drops.clear()
            if values["set_initial_pose"]:
                x, y, yaw = (float(values[f"initial_pose.{k}"]) for k in ("x", "y", "yaw"))
                self._start_at(np.array([x, y, yaw]), None)
            else:
                localizer.initialize_global()
            if self._active:
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
        (self.get_logger().info if response.success else self.get_logger().error)(response.message)
        return response

    def _publish_map(self, lookup: FieldLookup) -> None:
        assert self._wiring is not None
        data, _, _ = scale_to_occupancy(lookup.mean_grid, ~lookup.known)
        stamp = self.get_clock().now().nanoseconds
        grid = lookup.grid
        frame = self._frame("global_frame_id")
        self._wiring.publishers["map"].publish(
            occupancy_grid(data, grid.origin_m, grid.resolution_m, frame, stamp)
        )

    # ------------------------------------------------------------------ starts
    def _start_at(self, base: np.ndarray, covariance: np.ndarray | None) -> None:
        """Start the filter around a pose of the base. Under TF the particles are poses of
        the sensor's point (``tf_odometry``), whose lever arm the next reading brings: the
        start waits for it. Under lock."""
        self._pending_start = base
        self._pending_covariance = covariance
        if self.tf_odometry is None:
            self._apply_start(self._lever)

    def _apply_start(self, lever: np.ndarray) -> bool:
        """The pending start, its pose turned into the tracked point's; False if refused."""
        assert self.localizer is not None and self._pending_start is not None
        base, covariance = self._pending_start, self._pending_covariance
        point = tracked_odometry(base[:2], float(base[2]), lever)
        try:
            self.localizer.initialize_pose(point, covariance)
        except ValueError as err:
            self.drops["initial_pose_invalid"] += 1
            self.get_logger().warn(f"initial pose refused: {one_line(err)}")
            self._pending_start = None
            return False
        self._start_point = point
        if self.tf_odometry is None and self._last_odometry is not None:
            self._send_start_correction(*self._last_odometry)
        else:
            self._start_correction_due = True
        self._pending_start = None
        return True

    def _send_start_correction(self, stamp_ns: int, odometry: np.ndarray) -> None:
        """map -> odom from a start pose and the odometry there, before any update (AMCL
        publishes at its first scan after a start; a standing robot would else have none)."""
        self._start_correction_due = False
        correction = map_to_odom(self._start_point, odometry)
        stamp = self._correction.update(correction, stamp_ns + self._tolerance_ns())
        self._send_transform(correction, stamp)

    # ------------------------------------------------------------------ inputs
    def _on_field(self, msg: MagneticField) -> None:
        v = msg.magnetic_field
        field_ut = np.array([v.x, v.y, v.z]) * TESLA_TO_MICROTESLA
        stamp = stamp_to_ns(msg.header.stamp)
        with self._lock:
            if not self._active:
                return
            if self.localizer is None:
                self.drops["no_map"] += 1
                return
            if self.tf_odometry is None:
                self.localizer.add_field(stamp, field_ut)
            else:
                for posed in self.tf_odometry.add_reading(stamp, field_ut, msg.header.frame_id):
                    self._feed(posed)
            self._publish_new_steps()

    def _on_tf(self, msg: Any) -> None:
        self._on_transforms(msg, static=False)

    def _on_tf_static(self, msg: Any) -> None:
        self._on_transforms(msg, static=True)

    def _on_transforms(self, msg: Any, *, static: bool) -> None:
        # Kept while inactive too (/tf_static comes once, and the odometry stays continuous);
        # a reading that was waiting for them then goes no further.
        with self._lock:
            if self.tf_odometry is None:
                return
            posed = []
            for transform in transforms_from_msg(msg):
                posed += self.tf_odometry.add_transform(transform, static=static)
            if not posed or self.localizer is None or not self._active:
                return
            for reading in posed:
                self._feed(reading)
            self._publish_new_steps()

    def _feed(self, posed: PosedReading) -> None:
        """A reading posed from TF into the filter (under lock)."""
        assert self.localizer is not None
        self._lever = posed.lever_m
        if self._pending_start is not None and not self._apply_start(posed.lever_m):
            return
        last = None if self._last_odometry is None else self._last_odometry[0]
        if feed_posed(self.localizer, posed, last):
            self._last_odometry = (posed.stamp_ns, posed.odometry)
        if self._start_correction_due:
            self._send_start_correction(posed.stamp_ns, posed.odometry)

    def _on_odometry(self, msg: Odometry) -> None:
        pose = planar_pose(pose_from_odometry(msg))
        stamp = stamp_to_ns(msg.header.stamp)
        with self._lock:
            if not self._active or self.localizer is None:
                return
            self.localizer.add_odometry(stamp, pose)
            self._last_odometry = (stamp, pose)
            if self._start_correction_due:
                self._send_start_correction(stamp, pose)
            self._publish_new_steps()

    def _on_initial_pose(self, msg: PoseWithCovarianceStamped) -> None:
        frame = msg.header.frame_id.lstrip("/")
        mean = planar_pose(pose_from_pose_with_covariance(msg))
        covariance = planar_covariance(msg)
        if not np.all(np.linalg.eigvalsh(0.5 * (covariance + covariance.T)) > 0.0):
            covariance = None  # RViz's "2D Pose Estimate" sends AMCL's defaults; zeros: ours
        with self._lock:
            if not self._active:
                return
            if frame != self._frame("global_frame_id"):
                # As AMCL: an initial pose in another frame is not transformed but refused.
                self.drops["initial_pose_wrong_frame"] += 1
                self.get_logger().warn(f"initialpose in frame {frame!r} refused: it must be in "
                                       f"{self._frame('global_frame_id')!r}")  # fmt: skip
                return
            if self.localizer is None:
                self.drops["initial_pose_without_map"] += 1
                return
            if not np.isfinite(mean).all():
                self.drops["initial_pose_invalid"] += 1
                self.get_logger().warn("initialpose refused: not finite")
                return
            self._start_at(mean, covariance)
        self.get_logger().info(f"initial pose ({mean[0]:.2f}, {mean[1]:.2f}, {mean[2]:.2f})")

    def _on_global_localization(self, _request: Any, response: Any) -> Any:
        with self._lock:
            if self._active and self.localizer is not None:
                self._pending_start = None
                self.localizer.initialize_global()
                self.get_logger().info("global localization: particles over the known map")
        return response

    def _on_nomotion_update(self, _request: Any, response: Any) -> Any:
        with self._lock:
            if self._active and self.localizer is not None:
                self.localizer.update_now()
                self._publish_new_steps()
        return response

    # ------------------------------------------------------------------ outputs
    def _tolerance_ns(self) -> int:
        return seconds_to_ns(float(self._values["transform_tolerance"]))

    def _publish(self, key: str, msg: Any) -> None:
        """Publish on one of the node's topics; a deprecated one warns once when it has a
        subscriber."""
        assert self._wiring is not None
        publisher = self._wiring.publishers[key]
        replaced_by = DEPRECATED_TOPICS.get(key)
        if replaced_by is not None and publisher.get_subscription_count() > 0:
            self._warn_once(key, f"topic {publisher.topic_name} is deprecated (removed in the "
                                 f"next release): subscribe to {replaced_by}")  # fmt: skip
        publisher.publish(msg)

    def _publish_new_steps(self) -> None:
        """After each filter update: the pose, the particles (when due), map -> odom. Under
        lock."""
        localizer = self.localizer
        if localizer is None or localizer.updates == self._updates_published:
            return
        step = localizer.steps[-1]
        self._updates_published = localizer.updates
        now_ns = self.get_clock().now().nanoseconds
        self._start_correction_due = False
        self._publish_pose(step)
        if now_ns - self._particles_published_ns >= PARTICLES_PERIOD_S * 1e9:
            self._particles_published_ns = now_ns
            self._publish_particles(step, localizer.particles.poses)  # type: ignore[union-attr]
        correction = map_to_odom(step.estimate.mean, step.odometry)
        transform = planar_transform(self._frame("global_frame_id"), self._frame("odom_frame_id"),
                                     step.stamp_ns, *correction)  # fmt: skip
        self._publish("map_to_odom", transform)
        stamp = self._correction.update(correction, step.last_stamp_ns + self._tolerance_ns())
        self._send_transform(correction, stamp)

    def _publish_pose(self, step: Step) -> None:
        mean, cov = base_pose(step.estimate.mean, step.estimate.covariance, self._lever)
        msg = pose_with_covariance(self._frame("global_frame_id"), step.stamp_ns, mean, cov)
        self._publish(POSE_TOPIC, msg)
        self._publish(DEPRECATED_POSE_TOPIC, msg)

    def _publish_particles(self, step: Step, particles: np.ndarray) -> None:
        cloud = particle_cloud(self._frame("global_frame_id"), step.stamp_ns,
                               base_poses(particles, self._lever), PARTICLES_SHOWN)  # fmt: skip
        self._publish(PARTICLES_TOPIC, cloud)
        self._publish(DEPRECATED_PARTICLES_TOPIC, cloud)

    def _send_transform(self, correction: tuple[float, float, float], stamp_ns: int) -> None:
        """map -> odom on /tf at ``stamp_ns``, unless tf_broadcast is off. Under lock."""
        assert self._wiring is not None
        tf_message = self._tf_message
        if tf_message is None or not self._values["tf_broadcast"]:
            return
        transform = planar_transform(self._frame("global_frame_id"), self._frame("odom_frame_id"),
                                     stamp_ns, *correction)  # fmt: skip
        self._wiring.publishers["tf"].publish(tf_message(transforms=[transform]))

    def _on_tf_timer(self) -> None:
        """Re-send the last correction stamped now + tolerance when no update sent one since
        the last tick (a standing robot), so a listener never has to extrapolate."""
        with self._lock:
            if not self._active:
                return
            stamp = self._correction.tick(self.get_clock().now().nanoseconds
                                          + self._tolerance_ns())  # fmt: skip
            if stamp is not None:
                assert self._correction.correction is not None
                self._send_transform(self._correction.correction, stamp)

    def diagnostics(self) -> dict[str, Any]:
        with self._lock:
            localizer = self.localizer
            values: dict[str, Any] = {"map_loaded": localizer is not None, **self.drops}
            if self.tf_odometry is not None:
                values |= {f"drop_{k}": v for k, v in self.tf_odometry.drops.items()}
                values["waiting_for_transforms"] = self.tf_odometry.pending
            if localizer is None:
                return values
            values |= {f"drop_{k}": v for k, v in localizer.drops.items()}
            values["updates"] = localizer.updates
            # The map's noise model the likelihood adds (µT²): white, the pass's shared error
            # and, for a map of the field vector, its part along the field, and the field the
            # map does not resolve.
            noise = localizer.lookup.noise
            values |= {"map_noise_white_ut2": round(noise.white, 4),
                       "map_pass_noise_ut2": round(noise.shared, 4),
                       "map_pass_noise_along_ut2": round(noise.along, 4),
                       "map_noise_unresolved_ut2": round(noise.unresolved, 4)}  # fmt: skip
            if localizer.steps:
                step = localizer.steps[-1]
                values |= {
                    "particles": step.estimate.particles,
                    "effective_size": round(step.estimate.effective_size, 1),
                    "converged": step.converged,
                    "position_sd_m": round(step.estimate.position_sd_m, 3),
                    "map_sd_at_particles_ut": round(step.predicted_sd_ut, 3),
                    "likelihood": "vector" if localizer.uses_field_vector else "norm",
                }
                if step.hard_iron_ut is not None and step.hard_iron_sd_ut is not None:
                    for axis, mean, sd in zip("xyz", step.hard_iron_ut, step.hard_iron_sd_ut,
                                              strict=True):  # fmt: skip
                        values[f"hard_iron_{axis}_ut"] = round(float(mean), 3)
                        values[f"hard_iron_{axis}_sd_ut"] = round(float(sd), 3)
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
        with self._lock:
            if not self._active or self._wiring is None:
                return
            self._publish("diagnostics", diagnostic_array(
                self.get_clock().now().nanoseconds, f"{NODE_NAME}: filter", "cpu", level,
                message, values,
            ))  # fmt: skip


def main(args: list[str] | None = None) -> None:
    """Console script ``gp_localizer_node``: ``gp_localizer_node --ros-args -p map_path:=M``.

    Exits with status 1, after one logged line with the reason, when the parameters are
    invalid or anything else stops the node.
    """
    run_node(NODE_NAME, GpLocalizerNode, spin_multithreaded, (ValueError,), args)


if __name__ == "__main__":
    main()
