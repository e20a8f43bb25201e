"""``gp-mapper demo``: the whole job on an embedded default, through the real node process.

1. Make a bag: a robot's recording of a synthetic indoor world (Earth field plus anomalies):
   TF (``odom -> base_link`` from drifting odometry, ``map -> odom`` corrections, the
   magnetometer's mounting on ``/tf_static``) and the magnetometer in its own frame with a
   hard-iron offset; or with ``--data DIR`` the real Aalto recordings (a pose topic).
2. Start the ``gp_mapper`` node as its own process (use_sim_time) on an isolated ROS domain:
   it poses each reading from TF (the Aalto bag: from its pose topic), with the robot's
   magnetometer calibration (``mag_bias``) as a robot's parameter file would carry it.
3. Play the bag into it with /clock, like ``ros2 bag play``.
4. Ask the node to map the last window (``~/flush``) and save its map (``~/save_map``).
5. Render the saved map: PNG, Nav2 map, grids; for the synthetic world, the error against the
   true field.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gp_mapper.commands.convert import write_as_named
from gp_mapper.io import (
    convert_aalto,
    make_synthetic_world,
    write_grids_npz,
    write_nav2_map,
    write_png,
    write_synthetic_robot_bag,
)
from gp_mapper.io.robot_bag import DEFAULT_HARD_IRON_UT
from gp_mapper.mapping import MapperConfig, MappingPipeline, MapSnapshot

DEFAULT_OUT = Path("out/demo")
DEFAULT_DURATION_S = 150.0
DEFAULT_RATE = 3.0
DEFAULT_SEED = 7
NODE_START_TIMEOUT_S = 60.0
# The node's message counts unchanged this long after a play: the rest were lost in transport.
RECEIVE_STALL_S = 3.0
SERVICE_TIMEOUT_S = 120.0
# ROS domain IDs usable on any host (REP-2000 platforms; 0..101 avoids port clashes).
DOMAIN_ID_RANGE = (1, 101)


EXAMPLES = """\
examples:
  gp-mapper demo                                   synthetic room, about 2 minutes
  gp-mapper demo --rate 10 --duration 60 --out out/quick
  gp-mapper demo --data ../shared/data/magnetic/aalto-magnetic-data/data --sequences 3
"""


class DemoResult(NamedTuple):
    snapshot: MapSnapshot
    png: Path
    rmse_ut: float | None
    seconds: float


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``gp-mapper demo`` to ``parser`` (and its examples)."""
    parser.epilog = EXAMPLES
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--data", type=Path, help="Aalto data directory (holds invensense/)")
    parser.add_argument(
        "--sequences",
        default="3",
        help="Aalto sequences with --data, comma separated (3: one 188 s path; 1,2,3,4,5 with "
        "--rate 1 maps the whole room live)",
    )
    parser.add_argument(
        "--duration", type=float, default=DEFAULT_DURATION_S, help="synthetic run length [s]"
    )
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE, help="playback speed factor")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="synthetic world seed")


class LiveNode:
    """The ``gp_mapper`` node as its own process, with a client for its Trigger services.

    A context manager: entering starts the node (use_sim_time, ``/imu/mag`` and ``/pose``
    remapped in, ``map_path`` set) and an rclpy client in this process; leaving stops both.

    Args:
        map_path: where ``~/save_map`` writes.
        log_path: the node's stdout and stderr.
        params: extra node parameters (name -> value).
    """

    def __init__(
        self, map_path: Path, log_path: Path, params: dict[str, object] | None = None
    ) -> None:
        self.map_path = map_path
        self.log_path = log_path
        self.params = dict(params or {})
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        script = Path(sys.executable).with_name("gp_mapper_node")
        base = [str(script)] if script.exists() else [sys.executable, "-m", "gp_mapper.ros.node"]
        args = ["-p", "use_sim_time:=true", "-p", f"map_path:={self.map_path.resolve()}"]
        for name, value in self.params.items():
            args += ["-p", f"{name}:={_ros_arg_value(value)}"]
        return [*base, "--ros-args", *args, "-r", "mag:=/imu/mag", "-r", "pose:=/pose"]

    def __enter__(self) -> LiveNode:
        import rclpy

        env = isolated_env()
        os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
        self._log = self.log_path.open("w")
        self._process = subprocess.Popen(
            self.command(), env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        rclpy.init()
        return self

    def __exit__(self, *exc: object) -> None:
        import rclpy

        rclpy.try_shutdown()
        if self._process is not None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._log.close()

    def wait_received(
        self, published: Mapping[str, int], timeout_s: float = SERVICE_TIMEOUT_S
    ) -> str:
        """Wait until the node's ``/diagnostics`` say it has had every message ``published``
        (topic -> count) on its two inputs, or until its counts stop moving for
        ``RECEIVE_STALL_S`` (best-effort sensor QoS may drop a message unannounced).

        A player's last messages can still be in flight when it returns, and ``~/flush``
        gives up readings that wait for a pose: flushing at once would map one reading more
        or less by timing. Returns "" once all arrived, else what the node missed.
        """
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray

        from gp_mapper.ros.diagnostic_messages import diagnostic_values, mapping_status_name
        from gp_mapper.ros.node import NODE_NAME

        status = mapping_status_name(NODE_NAME)
        heard: dict[str, tuple[int, int]] = {}  # topic -> (had, sent)

        def check(msg: DiagnosticArray) -> None:
            values = diagnostic_values(msg, status)
            if values is None:
                return
            for key in ("mag", "pose"):
                topic = values[f"{key}_topic"]
                had = int(values[f"{key}_received"]) + int(values[f"{key}_lost_in_transport"])
                heard[topic] = (had, published.get(topic, 0))

        node = rclpy.create_node("gp_mapper_demo_watch")
        try:
            node.create_subscription(DiagnosticArray, "/diagnostics", check, 10)
            now = time.monotonic()
            deadline, last, moved = now + timeout_s, dict(heard), now
            while now < deadline:
                rclpy.spin_once(node, timeout_sec=0.2)
                now = time.monotonic()
                if heard and all(had >= sent for had, sent in heard.values()):
                    return ""
                if heard != last:
                    last, moved = dict(heard), now
                elif heard and now - moved > RECEIVE_STALL_S:
                    break
            missed = [
                f"{sent - had} of {sent} on {topic}"
                for topic, (had, sent) in heard.items()
                if had < sent
            ]
            return ", ".join(missed) or "no diagnostics"
        finally:
            node.destroy_node()

    def trigger(self, service: str, timeout_s: float = SERVICE_TIMEOUT_S) -> str:
        """Call the node's std_srvs/Trigger ``service`` (e.g. "flush"); its message, or raise."""
        import rclpy
        from std_srvs.srv import Trigger

        name = f"/gp_mapper/{service}"
        node = rclpy.create_node("gp_mapper_demo_client")
        try:
            client = node.create_client(Trigger, name)
            if not client.wait_for_service(timeout_sec=timeout_s):
                raise RuntimeError(f"service {name} did not appear within {timeout_s:.0f} s")
            future = client.call_async(Trigger.Request())
            rclpy.spin_until_future_complete(node, future, timeout_sec=timeout_s)
            response = future.result()
            if response is None:
                raise RuntimeError(f"{name} did not answer within {timeout_s:.0f} s")
            if not response.success:
                raise RuntimeError(f"{name} failed: {response.message}")
            return response.message
        finally:
            node.destroy_node()


# Words ROS's parameter parser reads as booleans (YAML 1.1's, ``y`` and ``n`` included).
_YAML_BOOLEANS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off"})


def _ros_arg_value(value: object) -> str:
    """``value`` as a ``-p name:=value`` argument: ROS reads it as YAML, where a string such as
    ``y`` (a target) would be a boolean, so such a string is quoted."""
    text = str(value)
    return f'"{text}"' if isinstance(value, str) and text.lower() in _YAML_BOOLEANS else text


def isolated_env() -> dict[str, str]:
    """This environment on its own ROS domain (unless one is set), discovery on loopback."""
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(*DOMAIN_ID_RANGE)))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


def map_live(bag: Path, out: Path, *, rate: float, params: dict[str, object] | None = None) -> Path:
    """Play ``bag`` into a live node, flush, save; the saved map's path."""
    from gp_mapper.ros.player import play_bag

    map_path = out / "map_state.npz"
    with LiveNode(map_path, out / "node.log", params) as node:
        print(f"      node running (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']})", flush=True)
        print(f"[3/5] playing {bag.name} at x{rate} with /clock ...", flush=True)
        played = play_bag(bag, rate=rate, wait_subscribers_s=NODE_START_TIMEOUT_S)
        print(f"      published {played.published} in {played.duration_s:.1f} s", flush=True)
        missed = node.wait_received(played.published)
        if missed:
            print(f"      the node did not get every message ({missed})", flush=True)
        print("[4/5] mapping the last window and saving the map ...", flush=True)
        node.trigger("flush")
        node.trigger("save_map")
    return map_path


def make_bag(args: argparse.Namespace, out: Path) -> tuple[Path, dict[str, object]]:
    """The input bag and the node parameters it needs: a synthetic robot's recording (TF,
    the magnetometer's calibration) by default, the Aalto recordings (a pose topic) with
    --data."""
    if args.data is not None:
        bag = out / "aalto.mcap"
        sequences = tuple(int(s) for s in str(args.sequences).split(",") if s.strip())
        write_as_named(convert_aalto, bag, True, data_dir=args.data, sequences=sequences)
        return bag, {"pose_source": "topic"}
    bag = out / "robot.mcap"
    write_as_named(write_synthetic_robot_bag, bag, True, seed=args.seed, duration_s=args.duration)
    # The robot's magnetometer calibration, as its parameter file would give it.
    return bag, {"mag_bias": [float(b) for b in DEFAULT_HARD_IRON_UT]}


def _parameter_line(params: Mapping[str, object]) -> str:
    return ", ".join(f"{name}: {value}" for name, value in params.items())


def synthetic_rmse(snapshot: MapSnapshot, seed: int) -> float:
    """RMSE of the mapped ‖B‖ against the true world on cells within 0.5 m of the path."""
    from scipy.spatial import cKDTree

    world = make_synthetic_world(seed)
    pts = snapshot.grid.cell_points()
    near = cKDTree(snapshot.trajectory_m).query(pts, distance_upper_bound=0.5)[0] <= 0.5
    truth = world.norm_at(pts[near])
    return float(np.sqrt(np.mean((snapshot.mean.reshape(-1)[near] - truth) ** 2)))


def run_demo_steps(args: argparse.Namespace) -> DemoResult:
    start = time.perf_counter()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    print(f"[1/5] writing the input bag into {out} ...", flush=True)
    bag, params = make_bag(args, out)
    print(f"[2/5] starting the gp_mapper node ({_parameter_line(params)}) ...", flush=True)
    map_path = map_live(bag, out, rate=args.rate, params=params)
    print("[5/5] rendering the saved map ...", flush=True)
    config = MapperConfig()
    with MappingPipeline(config, background=False) as pipeline:
        pipeline.load(map_path)
        snapshot = pipeline.latest()
    if snapshot is None:
        raise RuntimeError("the saved map holds no data")
    png = out / "map.png"
    write_png(png, snapshot, unknown_ratio=config.unknown_variance_ratio)
    write_nav2_map(out / "map.yaml", snapshot)
    write_grids_npz(out / "grids.npz", snapshot)
    rmse = synthetic_rmse(snapshot, args.seed) if args.data is None else None
    return DemoResult(snapshot, png, rmse, time.perf_counter() - start)


def run_demo(args: argparse.Namespace) -> int:
    if args.data is not None and not Path(args.data).is_dir():
        print(f"gp-mapper demo: error: data directory {args.data} does not exist", file=sys.stderr)
        return 2
    try:
        result = run_demo_steps(args)
    except (RuntimeError, OSError) as err:
        print(f"gp-mapper demo: error: {err} (node log: {args.out / 'node.log'})", file=sys.stderr)
        return 1
    s = result.snapshot
    print(
        f"map: {s.num_inducing} inducing points from {s.num_samples} samples, "
        f"grid {s.grid.width}x{s.grid.height} at {s.grid.resolution_m:g} m"
    )
    if result.rmse_ut is not None:
        print(f"error against the true field near the path: RMSE {result.rmse_ut:.2f} µT")
    print(
        f"wrote {result.png} (and map.yaml/map.pgm, grids.npz, map_state.npz) "
        f"in {result.seconds:.0f} s"
    )
    return 0
