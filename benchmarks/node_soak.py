"""Soak test of the gp_mapper node: does every 200 Hz magnetometer reading reach the map?

The node runs as its own process with its default parameters; this process publishes a
200 Hz magnetometer (sensor_msgs/MagneticField) and a 100 Hz pose (PoseStamped) over DDS on
loopback, in real time, for ``--minutes``, along a lawnmower path (rows 1 m apart) over a
30 m x 30 m floor. The field has the statistics of the Aalto magnetometer data: |B| is about
50 µT plus a Matérn-5/2 field of lengthscale ~0.7 m and variance ~300 µT², drawn by random
Fourier features so that it costs little to evaluate anywhere; it is not smooth, so the
number of inducing points M grows with the explored area. Then the node is flushed and given
``--drain`` seconds to map what it holds, and its /diagnostics say what happened:

- readings mapped / sent, and every reading not mapped by reason (``drop_*``), plus
  ``lost_in_transport`` (the node's count of messages DDS saw go missing), what the node
  still holds when the drain time is up (in the update under way, the waiting window, the
  open window, readings waiting for a pose) and what nothing accounts for (sent - mapped -
  dropped - held);
- the node's resident memory (RSS) when streaming starts and at the end;
- latency, per engine update, from the moment its oldest window closed to the first map
  showing it (with ``provisional_map``, or the committed map for windows that do not re-fit
  θ) and to the committed map (p50, p95);
- M (and the node's RSS) over time.

    python benchmarks/node_soak.py [--minutes 10] [--floor lawnmower|building] [--json out.json]

``--floor building`` streams the walk of ``benchmarks/building.py``'s 60 x 40 m office floor
instead (the node then maps with its default 16 m tiles).

JSON: {"sent", "mapped", "dropped": {reason: n}, "lost_in_transport", "rss_mb": [start, end],
"latency_first_ms": [p50, p95], "latency_fitted_ms": [p50, p95], "M": [[t_s, M], ...], ...}.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rclpy
import torch
from common import format_table, header, write_json
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import MagneticField

from gp_mapper.commands.demo import LiveNode
from gp_mapper.ros.diagnostic_messages import diagnostic_values, mapping_status_name
from gp_mapper.ros.node import NODE_NAME
from gp_mapper.ros.stamps import ns_to_stamp

STATUS = mapping_status_name(NODE_NAME)
BASE_NS = 1_700_000_000 * 10**9
TESLA_PER_UT = 1e-6
NS_PER_S = 10**9

# The Aalto magnetometer data (Solin et al. 2018): |B| around ~50 µT, a Matérn-5/2 field of
# lengthscale ~0.7 m and variance ~300 µT².
FIELD_MEAN_UT = 50.0
FIELD_VARIANCE_UT2 = 300.0
FIELD_LENGTHSCALE_M = 0.7
MATERN_NU = 2.5
# Random Fourier features of the field: enough that the draw looks Gaussian at every point.
FOURIER_FEATURES = 2000
# A Gaussian field of std 17 µT on 50 µT would go below zero now and then; |B| cannot, and the
# node's plausibility gate (field_min = 10 µT) would drop such readings. Below SOFT_FLOOR_UT
# the field bends smoothly (tanh, continuous slope) towards SOFT_FLOOR_UT - SOFT_SPAN_UT.
SOFT_FLOOR_UT = 20.0
SOFT_SPAN_UT = 8.0
# Map-frame direction of the field, ~70 degrees below the horizontal (northern mid-latitudes);
# with the default target (norm) only |B| matters.
FIELD_DIRECTION = np.array([16.0, 4.0, -47.0]) / np.linalg.norm([16.0, 4.0, -47.0])
SENSOR_NOISE_UT = 0.3  # per axis: one LSB of the Aalto data's AK8975 magnetometer

# The floor and the path.
SIDE_M = 30.0
ROW_SPACING_M = 1.0
MAG_RATE_HZ = 200.0
POSE_RATE_HZ = 100.0
DEFAULT_SPEED_MPS = 1.0  # a walking person or a slow ground robot

# How long the node may take to start and subscribe [s].
STARTUP_TIMEOUT_S = 120.0
# Published messages between two looks at the clock-ahead sleep: the loop sleeps in slices.
SPIN_PERIOD_S = 0.05


class MaternField:
    """A Matérn-ν draw on the plane by random Fourier features, plus a mean (µT).

    The spectral density of a Matérn-ν kernel of lengthscale ℓ is a bivariate Student-t of
    2ν degrees of freedom and scale 1/ℓ: ω = z √(2ν/u) / ℓ with z ~ N(0, I), u ~ χ²(2ν).

    Args:
        rng: the random generator.
        features: number of Fourier features.
    """

    def __init__(self, rng: np.random.Generator, features: int = FOURIER_FEATURES) -> None:
        z = rng.standard_normal((features, 2))
        u = rng.chisquare(2.0 * MATERN_NU, features)
        self.omega = z * np.sqrt(2.0 * MATERN_NU / u)[:, None] / FIELD_LENGTHSCALE_M  # [F, 2]
        self.phase = rng.uniform(0.0, 2.0 * np.pi, features)
        self.scale = math.sqrt(2.0 * FIELD_VARIANCE_UT2 / features)

    def norm_ut(self, xy_m: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """|B| [N] (µT) at points [N, 2] (m)."""
        out = np.empty(len(xy_m))
        for i in range(0, len(xy_m), chunk):
            block = xy_m[i : i + chunk] @ self.omega.T + self.phase
            out[i : i + chunk] = FIELD_MEAN_UT + self.scale * np.cos(block).sum(1)
        low = out < SOFT_FLOOR_UT
        out[low] = SOFT_FLOOR_UT + SOFT_SPAN_UT * np.tanh((out[low] - SOFT_FLOOR_UT) / SOFT_SPAN_UT)
        return out


def lawnmower(t_s: np.ndarray, speed_mps: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions [N, 2] (m) and headings [N] (rad) at times t_s along rows 1 m apart.

    Each row crosses the floor along x, then a 1 m step in y leads to the next row; past the
    last row the path starts over from the first.
    """
    s = np.asarray(t_s) * speed_mps
    period = SIDE_M + ROW_SPACING_M
    row = np.floor(s / period)
    along = s - row * period
    rows = round(SIDE_M / ROW_SPACING_M)
    forward = row % 2 == 0
    on_row = along < SIDE_M
    x_row = np.where(forward, along, SIDE_M - along)
    x = np.where(on_row, x_row, np.where(forward, SIDE_M, 0.0))
    y = (row % rows) * ROW_SPACING_M + np.where(on_row, 0.0, along - SIDE_M)
    heading = np.where(on_row, np.where(forward, 0.0, np.pi), np.pi / 2.0)
    return np.column_stack([x, y]), heading


class SoakNode(LiveNode):
    """The node process as ``LiveNode`` starts it, on the wall clock (no use_sim_time)."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("use_sim_time:=true")
        return cmd[: i - 1] + cmd[i + 1 :]

    @property
    def pid(self) -> int:
        assert self._process is not None, "the node is not running"
        return self._process.pid


def rss_mb(pid: int) -> float:
    """Resident memory of a process [MiB] (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return math.nan


class DiagnosticsWatch:
    """Spins a node in a thread of its own and keeps what /diagnostics say.

    Attributes:
        last: the newest key/value pairs of the node's status.
        per_update: updates -> (first-map latency, committed latency, fitted, samples).
    """

    def __init__(self) -> None:
        self.node = rclpy.create_node("soak_diagnostics")
        self.last: dict[str, str] = {}
        self.per_update: dict[int, tuple[float, float, int, int]] = {}
        self._lock = threading.Lock()
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and rclpy.ok():
            self._executor.spin_once(timeout_sec=0.1)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        d = diagnostic_values(msg, STATUS)
        if d is None:
            return
        with self._lock:
            self.last = d
            updates = int(d.get("updates", 0))
            first = float(d.get("last_batch_latency_s", "nan"))
            if updates and math.isfinite(first):
                self.per_update[updates] = (
                    first,
                    float(d.get("last_fitted_latency_s", "nan")),
                    int(d.get("last_update_fitted", 1)),
                    int(d.get("last_batch_samples", 0)),
                )

    def value(self, key: str, default: float = 0.0) -> float:
        with self._lock:
            return float(self.last.get(key, default))

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self.last)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._executor.shutdown(timeout_sec=0.0)
        self.node.destroy_node()


def lawnmower_stream(
    t_s: np.ndarray, args: argparse.Namespace
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lawnmower over the Matérn floor: positions [N, 2] (m), headings [N] (rad) and the
    readings [N, 3] in the sensor frame (µT)."""
    rng = np.random.default_rng(args.seed)
    field = MaternField(rng)
    xy, heading = lawnmower(t_s, args.speed)
    norm = field.norm_ut(xy)
    # Sensor frame: the map-frame field turned by minus the heading, plus noise per axis.
    b_map = norm[:, None] * FIELD_DIRECTION
    c, s = np.cos(-heading), np.sin(-heading)
    b_sensor = np.column_stack(
        [c * b_map[:, 0] - s * b_map[:, 1], s * b_map[:, 0] + c * b_map[:, 1], b_map[:, 2]]
    )
    b_sensor += SENSOR_NOISE_UT * rng.standard_normal(b_sensor.shape)
    return xy, heading, b_sensor


def building_stream(
    t_s: np.ndarray, args: argparse.Namespace
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk through ``gp_mapper.io.building``'s 60 x 40 m office floor (as
    ``benchmarks/building.py`` walks it, at this soak's rate), read with its per-pass offsets
    and noise: positions, headings and sensor-frame readings as :func:`lawnmower_stream`."""
    from gp_mapper.io.building import building_walk, make_building_world, simulate_building_run

    world = make_building_world(args.seed)
    duration_s = float(t_s[-1]) + 1.0 / MAG_RATE_HZ
    walk = building_walk(world, duration_s=duration_s, rate_hz=MAG_RATE_HZ, seed=args.seed)
    run = simulate_building_run(world, walk, seed=args.seed)
    n = len(t_s)
    return run.position_m[:n], run.heading_rad[:n], run.mag_ut[:n]


def soak(args: argparse.Namespace, work: Path) -> dict:
    """Run one soak; the results as the JSON holds them."""
    n_mag = int(args.minutes * 60.0 * MAG_RATE_HZ)
    every_pose = round(MAG_RATE_HZ / POSE_RATE_HZ)  # a pose with every 2nd reading
    t_s = np.arange(n_mag) / MAG_RATE_HZ
    make = building_stream if args.floor == "building" else lawnmower_stream
    xy, heading, b_sensor = make(t_s, args)
    norm = np.linalg.norm(b_sensor, axis=1)
    quat_z, quat_w = np.sin(heading / 2.0), np.cos(heading / 2.0)
    path_m = float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum())
    print(
        f"|B| read along the path: {norm.min():.1f}-{norm.max():.1f} µT, std "
        f"{norm.std():.1f} µT; path {path_m:.0f} m",
        file=sys.stderr,
        flush=True,
    )

    m_series: list[list[float]] = []
    rss_series: list[list[float]] = []
    with SoakNode(work / "map.npz", work / "node.log", {"pose_source": "topic"}) as live:
        watch = DiagnosticsWatch()
        pub_node = rclpy.create_node("soak_publisher")
        try:
            mag_pub = pub_node.create_publisher(MagneticField, "/imu/mag", qos_profile_sensor_data)
            pose_pub = pub_node.create_publisher(PoseStamped, "/pose", qos_profile_sensor_data)
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while mag_pub.get_subscription_count() < 1 or pose_pub.get_subscription_count() < 1:
                time.sleep(0.05)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the node did not subscribe within {STARTUP_TIMEOUT_S} s")
            time.sleep(1.0)  # discovery settles both ways
            rss_start = rss_mb(live.pid)
            start = time.perf_counter()
            next_m = 0.0
            pose = PoseStamped()
            pose.header.frame_id = "map"
            mag = MagneticField()
            mag.header.frame_id = "imu_link"
            for i in range(n_mag):
                stamp = ns_to_stamp(BASE_NS + round(t_s[i] * NS_PER_S))
                if i % every_pose == 0:
                    pose.header.stamp = stamp
                    pose.pose.position.x, pose.pose.position.y = float(xy[i, 0]), float(xy[i, 1])
                    pose.pose.orientation.z, pose.pose.orientation.w = (
                        float(quat_z[i]),
                        float(quat_w[i]),
                    )
                    pose_pub.publish(pose)
                mag.header.stamp = stamp
                bx, by, bz = (float(v) * TESLA_PER_UT for v in b_sensor[i])
                mag.magnetic_field.x, mag.magnetic_field.y, mag.magnetic_field.z = bx, by, bz
                mag_pub.publish(mag)
                elapsed = time.perf_counter() - start
                if elapsed >= next_m:
                    m_series.append([round(elapsed, 1), int(watch.value("inducing_points"))])
                    rss_series.append([round(elapsed, 1), round(rss_mb(live.pid), 1)])
                    next_m += args.m_period
                ahead = t_s[i] + 1.0 / MAG_RATE_HZ - elapsed
                if ahead > 0:
                    time.sleep(ahead)
            publish_s = time.perf_counter() - start
            # One last pose past the final reading, so that the pipeline can bracket it.
            pose.header.stamp = ns_to_stamp(BASE_NS + round((t_s[-1] + 0.01) * NS_PER_S))
            pose_pub.publish(pose)
            time.sleep(1.0)
            print(f"published {n_mag} readings in {publish_s:.0f} s; draining", file=sys.stderr)
            try:
                live.trigger("flush", timeout_s=args.drain)
            except RuntimeError as err:  # still busy: what it holds is reported as pending
                print(f"flush: {err}", file=sys.stderr)
            drain_end = time.monotonic() + args.drain
            while time.monotonic() < drain_end:
                busy = watch.value("worker_busy", 1.0) + watch.value("pending_windows", 1.0)
                if busy == 0:
                    break
                time.sleep(1.0)
            time.sleep(2.5 * float(watch.value("diagnostics_period", 1.0)) + 1.0)
            m_series.append(
                [round(time.perf_counter() - start, 1), int(watch.value("inducing_points"))]
            )
            rss_end = rss_mb(live.pid)
            last = watch.snapshot()
            per_update = dict(watch.per_update)
        finally:
            watch.close()
            pub_node.destroy_node()

    drops = {
        k.removeprefix("drop_"): int(v) for k, v in last.items() if k.startswith("drop_") and int(v)
    }
    mapped = int(last.get("samples", 0))
    held_keys = ("processing_samples", "pending_samples", "open_window_samples", "pending_readings")
    held = sum(int(last.get(k, 0)) for k in held_keys)
    first = np.array([v[0] for v in per_update.values()]) * 1e3
    fitted = np.array([v[1] for v in per_update.values()]) * 1e3

    def pct(a: np.ndarray) -> list[float]:
        return [float(np.percentile(a, 50)), float(np.percentile(a, 95))] if a.size else []

    return {
        "sent": n_mag,
        "mapped": mapped,
        "dropped": drops,
        "lost_in_transport": int(last.get("lost_in_transport", 0)),
        "held": held,
        "unaccounted": n_mag - mapped - sum(drops.values()) - held,
        "rss_mb": [rss_start, rss_end],
        "latency_first_ms": pct(first),
        "latency_fitted_ms": pct(fitted),
        "M": m_series,
        "rss_series_mb": rss_series,
        # updates -> [first-map latency (s), committed latency (s), re-fitted, samples]
        "per_update": {str(k): list(v) for k, v in sorted(per_update.items())},
        "updates": int(last.get("updates", 0)),
        "updates_seen": len(per_update),
        "fits": int(last.get("fits", 0)),
        "merged_windows": int(last.get("merged_windows", 0)),
        "failed_updates": int(last.get("failed_updates", 0)),
        "minutes": args.minutes,
        "publish_s": publish_s,
        "speed_mps": args.speed,
        "floor": args.floor,
        "rate_hz": {"mag": MAG_RATE_HZ, "pose": POSE_RATE_HZ},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="data to stream [min]")
    parser.add_argument("--speed", type=float, default=DEFAULT_SPEED_MPS, help="path speed [m/s]")
    parser.add_argument("--drain", type=float, default=300.0, help="time to map the rest [s]")
    parser.add_argument("--m-period", type=float, default=30.0, help="M sampled every [s]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--floor", choices=("lawnmower", "building"), default="lawnmower",
        help="the 30 x 30 m Matérn floor mown in rows, or the 60 x 40 m office floor walked",
    )  # fmt: skip
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    print(
        header(
            "gp_mapper node soak (one node process, default parameters, DDS on loopback)",
            torch.device("cpu"),
            torch.float64,
            args.seed,
        )
    )
    floor = (
        f"the 60 x 40 m office floor of benchmarks/building.py (seed {args.seed}), walked"
        if args.floor == "building"
        else f"at {args.speed:g} m/s, lawnmower rows {ROW_SPACING_M:g} m apart over {SIDE_M:g} "
        f"x {SIDE_M:g} m; |B| = {FIELD_MEAN_UT:g} µT + Matérn-5/2 (lengthscale "
        f"{FIELD_LENGTHSCALE_M:g} m, variance {FIELD_VARIANCE_UT2:g} µT²)"
    )
    print(
        f"{MAG_RATE_HZ:g} Hz MagneticField + {POSE_RATE_HZ:g} Hz PoseStamped for "
        f"{args.minutes:g} min, {floor}; {os.cpu_count()} CPUs\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        r = soak(args, Path(tmp))
    sent = r["sent"]

    def ms(pair: list[float]) -> str:
        return f"{pair[0]:.0f} / {pair[1]:.0f}" if pair else "-"

    rows = [
        ["readings sent", str(sent)],
        ["mapped", f"{r['mapped']} ({100.0 * r['mapped'] / max(sent, 1):.1f} %)"],
        ["dropped", ", ".join(f"{k}={v}" for k, v in r["dropped"].items()) or "none"],
        ["dropped for overflow", str(r["dropped"].get("window_overflow", 0))],
        ["lost in transport (node)", str(r["lost_in_transport"])],
        ["still held by the node", str(r["held"])],
        ["unaccounted", str(r["unaccounted"])],
        ["RSS start / end [MB]", f"{r['rss_mb'][0]:.0f} / {r['rss_mb'][1]:.0f}"],
        ["latency to first map p50 / p95 [ms]", ms(r["latency_first_ms"])],
        ["latency to committed map p50 / p95 [ms]", ms(r["latency_fitted_ms"])],
        ["updates (seen) / fits / merged windows",
         f"{r['updates']} ({r['updates_seen']}) / {r['fits']} / {r['merged_windows']}"],
        ["M over time [s: M]", " ".join(f"{t:.0f}:{m}" for t, m in r["M"])],
    ]  # fmt: skip
    print(format_table(["quantity", "value"], rows))
    write_json(args.json, r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
