"""The gp_mapper node: magnetometer + pose in, a continual GP magnetic-field map out.

A thin shell over ``gp_mapper.mapping.MappingPipeline``: the input callbacks convert a
message and hand it on (O(1); the engine runs in the pipeline's worker thread), and every
product is built from the pipeline's immutable snapshots.

Topics:
    in   ``mag``  sensor_msgs/MagneticField [T] in the sensor's frame, sensor-data QoS
         (``mag_topic``)
    in   ``/tf``, ``/tf_static``  tf2_msgs/TFMessage (``pose_source: tf``, the default): each
         reading is posed by the transform ``map_frame`` -> its frame at its stamp (the
         robot's map -> odom -> base_link -> sensor), QoS as tf2_ros's listener
    in   ``pose`` PoseStamped | PoseWithCovarianceStamped | Odometry of the sensor in
         ``map_frame`` (``pose_source: topic``; ``pose_type``)
    out  ``~/mean``, ``~/variance``  nav_msgs/OccupancyGrid, occupancy-style 1..98, -1 unknown
    out  ``~/field``  sensor_msgs/PointCloud2 x, y, z, mean, variance (float32); with target:
         vector also bx, by, bz, var_bx, var_by, var_bz (the map-frame components; mean and
         variance, as on ``~/mean`` and ``~/variance``, are those of |B|)
    out  ``~/field_cells``  visualization_msgs/Marker CUBE_LIST of the known cells, one grid
         cell wide at the resolution in use (RViz cannot size a PointCloud2's points)
    out  ``~/inducing_points``  visualization_msgs/MarkerArray
    out  ``~/field_arrows``  visualization_msgs/MarkerArray of ARROWs on a coarse grid (at most
         400): the horizontal mean field, coloured by |B|; only with target: vector
    out  ``/diagnostics``  diagnostic_msgs/DiagnosticArray, every ``diagnostics_period``
Map topics are reliable + transient local, depth 1, in ``map_frame``.

Services (std_srvs/Trigger): ``~/reset``, ``~/flush`` (map the open window now),
``~/save_map``, ``~/load_map`` (file: ``map_path``). Each answers success=False with the
reason when it fails, whatever the failure; the current map then stays.

Threads: ``main()`` spins rclpy's EventsExecutor (``executor`` parameter; the C++ events
queue takes a message for a fraction of the Python SingleThreadedExecutor's cost, which spent
most of its time rebuilding wait sets at 4000 messages/s). The engine runs in the pipeline's
worker thread. A steady timer on the executor looks for a new snapshot every
``MAP_CHECK_PERIOD_S`` and publishes it, so every rclpy call stays on the executor thread (the
worker can never publish into a node being destroyed), bursts of snapshots coalesce into one
publish of the newest, and a reset cannot be overtaken by a stale snapshot (the publisher
always reads the pipeline's current state). The callback groups keep this correct under a
MultiThreadedExecutor too (inputs and outputs each mutually exclusive).

The node is a lifecycle node (REP-2007, as Nav2's): ``on_configure`` reads the parameters,
builds the pipeline and creates the inputs, the (lifecycle) publishers, the timers and the
services; an inactive node maps no input and publishes nothing, and keeps its map for the next
activation; ``on_cleanup`` drops the map. ``autostart`` (default true) configures and
activates it at start, so ``ros2 run`` and the launch file need no lifecycle manager.

The four services are the node's own (``ros2 node info`` lists them; remaps reach them). On
the events executor (the default) every callback shares one thread: while a load or a flush
runs, readings wait in the subscription's queue (``qos_depth``) and are mapped after it; with
``executor: multi_threaded`` the services have a callback group of their own and the inputs
flow meanwhile (at a Python executor's rate).

An input silent for ``INPUT_SILENCE_S`` (a wrong remapping is the usual cause) is reported
in the log every ``WARN_THROTTLE_S``, naming the resolved topic; the start-up line names
both resolved input topics.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import OccupancyGrid
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import QoSMessageLostInfo, SubscriptionEventCallbacks
from rclpy.experimental import EventsExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.service import Service
from rclpy.subscription import Subscription
from rclpy.timer import Timer
from sensor_msgs.msg import MagneticField, PointCloud2
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from gp_mapper.engine import set_cpu_threads, warm_up
from gp_mapper.io.pose_types import TF_STATIC_TOPIC, TF_TOPIC
from gp_mapper.mapping.config import PARAMETER_BY_NAME, MapperConfig
from gp_mapper.mapping.errors import ConfigError
from gp_mapper.mapping.inputs import TF_POSE_SOURCE
from gp_mapper.mapping.map_file import clean_stale_temporaries
from gp_mapper.mapping.pipeline import MappingPipeline
from gp_mapper.mapping.records import HEALTH_ERROR, HEALTH_WARN, Transform
from gp_mapper.mapping.windowing import VECTOR_TARGET
from gp_mapper.ros.diagnostic_messages import (
    DIAGNOSTIC_ERROR,
    DIAGNOSTIC_OK,
    DIAGNOSTIC_WARN,
    diagnostic_array,
    mapping_status_name,
)
from gp_mapper.ros.entry import run_node, spin_multithreaded
from gp_mapper.ros.errors import one_line
from gp_mapper.ros.input_messages import (
    POSE_INPUTS,
    field_reading_from_msg,
    transforms_from_msg,
)
from gp_mapper.ros.input_watch import InputWatch
from gp_mapper.ros.lifecycle import Transitions, autostart, finalize
from gp_mapper.ros.map_messages import MapMessages, empty_messages, snapshot_messages
from gp_mapper.ros.parameters import ParameterGuard, declare_parameters, read_config
from gp_mapper.ros.qos import DIAGNOSTICS_QOS, MAP_QOS, TF_QOS, TF_STATIC_QOS, sensor_qos

NODE_NAME = "gp_mapper"
DIAGNOSTICS_TOPIC = "/diagnostics"
# Seconds between two repeats of the same bad-input warning.
WARN_THROTTLE_S = 5.0
# Drop reasons that are normal operation, not bad input: a stationary robot repeats its
# position. They are counted in /diagnostics but raise no warning.
_QUIET_DROPS = frozenset({"drop_duplicate"})
# The pipeline's map health (`health` in its diagnostics) -> the DiagnosticStatus level.
_HEALTH_LEVELS = {HEALTH_WARN: DIAGNOSTIC_WARN, HEALTH_ERROR: DIAGNOSTIC_ERROR}


def _frame(name: str) -> str:
    # tf2 ignores a leading slash in frame ids; so do we.
    return name.lstrip("/")


def _mapping_part(config: MapperConfig) -> dict[str, Any]:
    """The parameters that shape the map (everything but the ROS wiring)."""
    return {k: v for k, v in config.to_dict().items() if PARAMETER_BY_NAME[k].group != "node"}


# The longest ~/flush waits for the worker to map the last window.
FLUSH_TIMEOUT_S = 120.0
# How often the executor looks for a new map snapshot to publish [s]: at most this much is
# added to the batch-to-map latency, for one cheap comparison per tick.
MAP_CHECK_PERIOD_S = 0.02
# Longest wait of one spin of the events executor before it checks for shutdown [s].
SPIN_TIMEOUT_S = 0.1
# An input without a message for this long (since start or its last message) is reported:
# long enough for discovery and a bag player's start, short enough to catch a wrong remap [s].
INPUT_SILENCE_S = 5.0
# How often the node looks for silent inputs [s].
INPUT_CHECK_PERIOD_S = 1.0
# Labels of the inputs in the silence warning and in /diagnostics.
MAG_INPUT = "magnetometer"
POSE_INPUT = "pose"  # the pose topic, or /tf under pose_source tf


def _tf_message_type() -> type:
    """tf2_msgs/TFMessage, or a ConfigError that says how to get it."""
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError as err:
        raise ConfigError(
            "pose_source tf needs the tf2_msgs package (a ROS install has it; `make venv` "
            "builds it into .venv); set pose_source:=topic to map from a pose topic of the "
            f"sensor instead ({err})"
        ) from err
    return TFMessage


class GpMapperNode(LifecycleNode):
    """The ``gp_mapper`` node (see the module docstring).

    Args:
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``,
            ``cli_args``, ``namespace``...).

    Raises:
        ConfigError: the parameters, taken together, are invalid.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_parameters(self)
        self._guard = ParameterGuard(self)
        self.add_on_set_parameters_callback(self._guard)
        self.add_post_set_parameters_callback(self._on_parameters_set)
        self._pipeline_lock = threading.Lock()  # guards the pipeline reference only
        self._pipeline: MappingPipeline | None = None  # from configure to cleanup
        # /tf_static arrives once (transient local): kept across a reset and a cleanup, so a
        # pipeline built later still has the mounting.
        self._static_transforms: dict[str, Transform] = {}
        self._active = False  # inputs are mapped and outputs published only when active
        self._entities: list[Any] = []  # what configure created, destroyed by cleanup
        self._transitions = Transitions(self.get_logger(), failures=(ConfigError,))
        autostart(self, self._transitions)

    # ------------------------------------------------------------------ lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Read the parameters, build the pipeline, create inputs, outputs and services."""
        return self._transitions.run("configure", self._configure)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Map the inputs and publish (the lifecycle publishers are enabled here)."""
        self._active = True
        self._published = (self._epoch, None)  # republish the current map at once
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop mapping inputs and publishing; the map is kept for the next activation."""
        self._active = False
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Drop the map, the pipeline and everything configure created."""
        return self._transitions.run("cleanup", self._teardown)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return self._transitions.run("shutdown", self._teardown)

    def _configure(self) -> None:
        config = read_config(self)
        set_cpu_threads(config.torch_threads)
        # Before subscribing: torch's one-off loading would otherwise stall the first window.
        warm_s = warm_up(config.engine, config.input_dims)
        self._clean_stale_temporaries()
        self._map_frame = _frame(config.map_frame)
        self._pose_input = POSE_INPUTS[config.pose_type]
        self._pose_frame_drops = 0
        self._last_drops: dict[str, int] = {}
        self._failed_updates = 0
        # What the map topics show: (pipeline epoch, snapshot seq); seq None = no map.
        self._published: tuple[int, int | None] = (0, None)
        self._epoch = 0  # bumped when the pipeline is rebuilt (its seq restarts)
        self._scale: dict[str, float] = {}
        pipeline = self._make_pipeline(config)
        with self._pipeline_lock:
            self._pipeline = pipeline
        try:
            self._create_entities(config, warm_s)
        except Exception:
            self._teardown()
            raise

    def _create_entities(self, config: MapperConfig, warm_s: float) -> None:
        inputs = MutuallyExclusiveCallbackGroup()
        self._outputs = MutuallyExclusiveCallbackGroup()
        # Its own group: under executor multi_threaded a load or a flush does not hold the
        # inputs (under the events executor every callback shares one thread).
        services = MutuallyExclusiveCallbackGroup()
        qos = sensor_qos(config.qos_depth)
        # Messages the middleware saw go missing between a publisher and this node (gaps in
        # the writers' sequence numbers), by input. Jazzy's EventsExecutor cannot call a
        # callback that takes the message info (where publication_sequence_number is), so
        # the count comes from the DDS message-lost event, which every executor delivers.
        self._lost_in_transport = {MAG_INPUT: 0, POSE_INPUT: 0}
        add = self._entities.append
        mag_sub = self.create_subscription(
            MagneticField,
            config.mag_topic,
            self._on_field,
            qos,
            callback_group=inputs,
            event_callbacks=self._loss_counter(MAG_INPUT),
        )
        add(mag_sub)
        if config.pose_source == TF_POSE_SOURCE:
            tf_message = _tf_message_type()
            pose_sub = self.create_subscription(
                tf_message,
                TF_TOPIC,
                self._on_tf,
                TF_QOS,
                callback_group=inputs,
                event_callbacks=self._loss_counter(POSE_INPUT),
            )
            add(self.create_subscription(
                tf_message, TF_STATIC_TOPIC, self._on_tf_static, TF_STATIC_QOS,
                callback_group=inputs,
            ))  # fmt: skip
            posed_by = (
                f"TF on {pose_sub.topic_name} ({self._map_frame} -> "
                f"{config.sensor_frame or 'each reading frame'})"
            )
        else:
            pose_sub = self.create_subscription(
                self._pose_input.msg_type,
                config.pose_topic,
                self._on_pose,
                qos,
                callback_group=inputs,
                event_callbacks=self._loss_counter(POSE_INPUT),
            )
            posed_by = f"poses on {pose_sub.topic_name} ({config.pose_type})"
        add(pose_sub)
        # The names after remapping and namespacing: what the node really listens to.
        self._inputs = InputWatch(
            {MAG_INPUT: mag_sub.topic_name, POSE_INPUT: pose_sub.topic_name},
            silence_s=INPUT_SILENCE_S,
            repeat_s=WARN_THROTTLE_S,
            start_s=time.monotonic(),
        )

        def publisher(msg_type: type, topic: str, qos: Any) -> Any:
            pub = self.create_lifecycle_publisher(msg_type, topic, qos)
            add(pub)
            return pub

        self._mean_pub = publisher(OccupancyGrid, "~/mean", MAP_QOS)
        self._variance_pub = publisher(OccupancyGrid, "~/variance", MAP_QOS)
        self._field_pub = publisher(PointCloud2, "~/field", MAP_QOS)
        self._marker_pub = publisher(MarkerArray, "~/inducing_points", MAP_QOS)
        self._cells_pub = publisher(Marker, "~/field_cells", MAP_QOS)
        # target is read-only, so a node maps a vector or a scalar for its whole life.
        self._arrows_pub = (
            publisher(MarkerArray, "~/field_arrows", MAP_QOS)
            if config.target == VECTOR_TARGET
            else None
        )
        self._diag_pub = publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, DIAGNOSTICS_QOS)
        # Steady clock: the map and diagnostics keep flowing under use_sim_time while no /clock
        # arrives.
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        add(self.create_timer(
            MAP_CHECK_PERIOD_S, self._publish_map, callback_group=self._outputs, clock=self._steady
        ))  # fmt: skip
        add(self.create_timer(
            INPUT_CHECK_PERIOD_S, self._check_inputs, callback_group=self._outputs,
            clock=self._steady,
        ))  # fmt: skip
        self._diag_timer = self._make_diagnostics_timer(config.diagnostics_period)
        handlers = {
            "reset": self._on_reset,
            "save_map": self._on_save,
            "flush": self._on_flush,
            "load_map": self._on_load,
        }
        for name, handler in handlers.items():
            add(self.create_service(Trigger, f"~/{name}", handler, callback_group=services))
        self.get_logger().info(
            f"mapping {config.target} of {mag_sub.topic_name} posed by {posed_by} into "
            f"frame {self._map_frame}; engine on "
            f"{self.pipeline.diagnostics()['device']} (warmed up in {warm_s:.1f} s)"
        )

    def _teardown(self) -> None:
        """Destroy what configure created and close the pipeline (its worker stops first, so
        no update runs on into a destroyed node)."""
        with self._pipeline_lock:
            pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.close()
        for entity in reversed(self._entities):
            if isinstance(entity, Subscription):
                self.destroy_subscription(entity)
            elif isinstance(entity, Service):
                self.destroy_service(entity)
            elif isinstance(entity, Timer):
                self.destroy_timer(entity)
            else:
                self.destroy_lifecycle_publisher(entity)
        self._entities.clear()

    @property
    def active(self) -> bool:
        """Whether the node is active: mapping its inputs and publishing."""
        return self._active

    @property
    def status_name(self) -> str:
        """Name of this node's DiagnosticStatus, e.g. ``gp_mapper: mapping``."""
        return mapping_status_name(self.get_fully_qualified_name())

    # ------------------------------------------------------------------ pipeline

    def _make_pipeline(self, config: MapperConfig) -> MappingPipeline:
        pipeline = MappingPipeline(config, background=True)
        # /tf_static arrives once: a pipeline rebuilt later (~/reset with new parameters)
        # still needs the mounting.
        for transform in self._static_transforms.values():
            pipeline.add_transform(transform, static=True)
        return pipeline

    @property
    def pipeline(self) -> MappingPipeline:
        """The pipeline the node currently feeds (configured or active).

        Raises:
            RuntimeError: the node is not configured.
        """
        with self._pipeline_lock:
            pipeline = self._pipeline
        if pipeline is None:
            raise RuntimeError("the node is not configured: no pipeline")
        return pipeline

    # ------------------------------------------------------------------ inputs

    def _loss_counter(self, label: str) -> SubscriptionEventCallbacks:
        """Event callbacks that add the messages lost on input ``label`` to its count."""

        def lost(info: QoSMessageLostInfo) -> None:
            self._lost_in_transport[label] += int(info.total_count_change)

        return SubscriptionEventCallbacks(message_lost=lost)

    def _on_field(self, msg: MagneticField) -> None:
        if not self._active:
            return
        self._inputs.heard(MAG_INPUT, time.monotonic())
        self.pipeline.add_field(field_reading_from_msg(msg))

    def _on_tf(self, msg: Any) -> None:
        if not self._active:
            return
        self._inputs.heard(POSE_INPUT, time.monotonic())
        pipeline = self.pipeline
        for transform in transforms_from_msg(msg):
            pipeline.add_transform(transform, static=False)

    def _on_tf_static(self, msg: Any) -> None:
        # Kept while inactive too: it is not sent again.
        pipeline = self.pipeline
        for transform in transforms_from_msg(msg):
            self._static_transforms[transform.child] = transform
            pipeline.add_transform(transform, static=True)

    def _on_pose(self, msg: Any) -> None:
        if not self._active:
            return
        self._inputs.heard(POSE_INPUT, time.monotonic())
        frame = _frame(msg.header.frame_id)
        if frame != self._map_frame:
            self._pose_frame_drops += 1
            self.get_logger().warning(
                f"dropping poses in frame {frame!r}: they must be in map_frame "
                f"{self._map_frame!r} ({self._pose_frame_drops} so far)",
                throttle_duration_sec=WARN_THROTTLE_S,
            )
            return
        self.pipeline.add_pose(self._pose_input.convert(msg))

    # ------------------------------------------------------------------ outputs

    def _publish_map(self) -> None:
        """Publish the pipeline's current map if it changed (outputs group only)."""
        with self._pipeline_lock:
            pipeline, epoch = self._pipeline, self._epoch
        if not self._active or pipeline is None:
            return
        snapshot = pipeline.latest()
        key = (epoch, snapshot.seq if snapshot is not None else None)
        if key == self._published or (snapshot is None and self._published[1] is None):
            return
        config = pipeline.config
        if snapshot is None:
            stamp = self.get_clock().now().nanoseconds
            messages = empty_messages(self._map_frame, stamp, config.resolution)
        else:
            messages = snapshot_messages(
                snapshot,
                frame_id=self._map_frame,
                unknown_variance_ratio=config.unknown_variance_ratio,
                z_m=config.grid_z,
            )
        self._send(messages)
        self._published = key

    def _send(self, messages: MapMessages) -> None:
        self._scale = messages.scale
        self._mean_pub.publish(messages.mean)
        self._variance_pub.publish(messages.variance)
        self._field_pub.publish(messages.field)
        self._marker_pub.publish(messages.markers)
        self._cells_pub.publish(messages.cells)  # serialized already: sent as it is
        if self._arrows_pub is not None and messages.arrows is not None:
            self._arrows_pub.publish(messages.arrows)

    def _check_inputs(self) -> None:
        """Warn (rate-limited) about inputs without a message for INPUT_SILENCE_S."""
        if not self._active:
            return
        warning = self._inputs.warning(time.monotonic(), self.count_publishers)
        if warning is not None:
            self.get_logger().warning(warning)

    def _make_diagnostics_timer(self, period_s: float) -> Any:
        timer = self.create_timer(
            period_s, self._publish_diagnostics, callback_group=self._outputs, clock=self._steady
        )
        self._entities.append(timer)
        return timer

    def _publish_diagnostics(self) -> None:
        if not self._active:
            return
        values = self.pipeline.diagnostics()
        values["drop_pose_frame"] = self._pose_frame_drops
        values["drops_total"] = int(values["drops_total"]) + self._pose_frame_drops
        values["map_frame"] = self._map_frame
        values["lost_in_transport"] = sum(self._lost_in_transport.values())
        values["mag_lost_in_transport"] = self._lost_in_transport[MAG_INPUT]
        values["pose_lost_in_transport"] = self._lost_in_transport[POSE_INPUT]
        now = time.monotonic()
        for label, key in ((MAG_INPUT, "mag"), (POSE_INPUT, "pose")):
            values[f"{key}_topic"] = self._inputs.topics[label]
            values[f"{key}_age_s"] = self._inputs.age_s(label, now)
            values[f"{key}_received"] = self._inputs.received(label)
        published = self._published[1]
        values["published_seq"] = -1 if published is None else published
        for key in ("mean_scale_lo", "mean_scale_hi", "variance_scale_lo", "variance_scale_hi"):
            values[key] = self._scale.get(key, math.nan)

        drops = {k: int(v) for k, v in values.items() if k.startswith("drop_")}
        new = {
            k: n - self._last_drops.get(k, 0)
            for k, n in drops.items()
            if n > self._last_drops.get(k, 0) and k not in _QUIET_DROPS
        }
        failed = int(values["failed_updates"]) > self._failed_updates
        self._last_drops = drops
        self._failed_updates = int(values["failed_updates"])
        level, message = DIAGNOSTIC_OK, "mapping" if published is not None else "waiting for data"
        if new or failed:
            level = DIAGNOSTIC_WARN
            parts = [f"{k.removeprefix('drop_')}={n}" for k, n in sorted(new.items())]
            if failed:
                parts.append(f"update rejected ({values['last_reason']})")
            message = "dropped input: " + ", ".join(parts)
            self.get_logger().warning(message, throttle_duration_sec=WARN_THROTTLE_S)
        health = _HEALTH_LEVELS.get(str(values.get("health", "")))
        if health is not None:  # the map's health leads the message; the level is the worst
            extra = "" if level == DIAGNOSTIC_OK else f"; {message}"
            level, message = max(level, health), f"{values['health_message']}{extra}"
        self._diag_pub.publish(
            diagnostic_array(
                self.get_clock().now().nanoseconds,
                self.status_name,
                str(values["device"]),
                level,
                message,
                values,
            )
        )

    # ------------------------------------------------------------------ parameters

    def _on_parameters_set(self, params: Sequence[Parameter]) -> None:
        names = {p.name for p in params}
        if "diagnostics_period" in names and self._pipeline is not None:
            self._entities.remove(self._diag_timer)
            self.destroy_timer(self._diag_timer)
            period = self.get_parameter("diagnostics_period").value
            self._diag_timer = self._make_diagnostics_timer(period)
        mapping = names & {n for n, info in PARAMETER_BY_NAME.items() if info.group != "node"}
        if mapping:
            self.get_logger().info(
                f"{', '.join(sorted(mapping))} changed: applies from the next ~/reset"
            )

    # ------------------------------------------------------------------ services

    def _map_path(self) -> Path:
        return Path(self.get_parameter("map_path").value).expanduser()

    def _clean_stale_temporaries(self) -> None:
        """Remove what saves interrupted by a crash or power loss left beside the map file."""
        path = self._map_path()
        try:
            removed = clean_stale_temporaries(path)
        except OSError as err:  # a read-only or vanished directory: mapping can go on
            self.get_logger().warning(f"could not clean temporaries beside {path}: {err}")
            return
        if removed:
            self.get_logger().info(f"removed {removed} temporary file(s) of an interrupted save")

    # Each handler catches every failure: the answer carries the reason and the node (and its
    # current map) carries on.

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        try:
            response.message = self._reset()
        except Exception as err:  # e.g. parameters the engine refuses: keep the old map
            response.success = False
            response.message = f"reset failed, the current map is kept: {one_line(err)}"
            self.get_logger().error(response.message)
            return response
        self._scale = {}
        response.success = True
        self.get_logger().info(response.message)
        return response

    def _reset(self) -> str:
        """Reset the map (rebuilt from changed parameters); the answer's message."""
        config = read_config(self)
        old = self.pipeline
        changed = sorted(
            k for k, v in _mapping_part(config).items() if _mapping_part(old.config).get(k) != v
        )
        if not changed:
            old.reset()  # builds the new engine before it drops the old map
            return "map reset"
        # New mapping parameters: a pipeline built from them (drop counts restart). Built
        # before the swap, so a failure leaves the old one in place.
        new = self._make_pipeline(config)
        with self._pipeline_lock:
            self._pipeline = new
            self._epoch += 1
        old.close()
        return f"map reset with new {', '.join(changed)}"

    def _on_flush(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        # End of a bag: readings still waiting for a pose are given up, the open window is
        # mapped now, and the answer comes once the worker has it in the map.
        pipeline = self.pipeline
        try:
            pipeline.flush()
            idle = pipeline.wait_idle(timeout=FLUSH_TIMEOUT_S)
            diagnostics = pipeline.diagnostics()
        except Exception as err:
            response.success = False
            response.message = f"flush failed: {one_line(err)}"
            self.get_logger().error(response.message)
            return response
        response.success = idle
        response.message = (
            f"flushed: {diagnostics['samples']} samples, "
            f"{diagnostics['inducing_points']} inducing points"
            if idle
            else f"the engine is still busy after {FLUSH_TIMEOUT_S:.0f} s"
        )
        return response

    def _on_save(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        path = self._map_path()
        pipeline = self.pipeline
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            pipeline.save(path)
            samples = pipeline.diagnostics()["samples"]
        except Exception as err:  # disk full, permissions, a state that cannot be written
            response.success = False
            response.message = f"save failed: {one_line(err)}"
            self.get_logger().error(response.message)
            return response
        response.success = True
        response.message = f"saved the map ({samples} samples) to {path}"
        self.get_logger().info(response.message)
        return response

    def _on_load(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        path = self._map_path()
        pipeline = self.pipeline
        try:
            pipeline.load(path)
            samples = pipeline.diagnostics()["samples"]
        except Exception as err:  # a hostile file may raise anything (RecursionError...)
            response.success = False
            response.message = f"load failed, the current map is kept: {one_line(err)}"
            self.get_logger().error(response.message)
            return response
        response.success = True
        response.message = f"loaded the map ({samples} samples) from {path}"
        self.get_logger().info(response.message)
        return response

    # ------------------------------------------------------------------ teardown

    def destroy_node(self) -> None:
        """The shutdown transition first: the pipeline's worker stops before the node goes."""
        finalize(self)
        self._teardown()  # already done unless the shutdown transition could not run
        super().destroy_node()


def _spin(node: Node, executor: str) -> None:
    """Spin until shutdown (SIGINT) on the executor named by the ``executor`` parameter."""
    if executor == "single_threaded":
        rclpy.spin(node)
        return
    if executor == "multi_threaded":
        spin_multithreaded(node)
        return
    ex = EventsExecutor()
    ex.add_node(node)
    # EventsExecutor.spin() of this rclpy does not return at shutdown; spin_once does.
    while rclpy.ok():
        ex.spin_once(timeout_sec=SPIN_TIMEOUT_S)


def main(args: list[str] | None = None) -> None:
    """Console script ``gp_mapper_node``: ``gp_mapper_node --ros-args -p resolution:=0.2``.

    Exits with status 1, after one logged line with the reason and no traceback, when the
    parameters are invalid or anything else stops the node from starting or running.
    """
    run_node(
        NODE_NAME, GpMapperNode, lambda node: _spin(node, node.get_parameter("executor").value),
        (ConfigError,), args,
    )  # fmt: skip


if __name__ == "__main__":
    main()
