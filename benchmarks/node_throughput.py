"""Throughput and latency of the gp_mapper node, a real process fed over DDS.

For each rate, a fresh node is started and MagneticField + PoseStamped messages of a known
field are published at that rate for a few seconds (one engine window per second of data).
Then the node is asked to flush, and its /diagnostics say how many readings were mapped and
how many were dropped, by reason. Prints the highest rate with no drops and, median and p95
over the windows, the batch-to-map latency: window closed -> first map snapshot showing it
(with ``provisional_map``, the window under the previous hyperparameters: inducing-point
selection plus the grid), and -> the fitted map (plus the hyperparameter fit and a second
grid); and the engine update time.

With ``--pose-source tf`` the node poses each reading from TF instead of a pose topic, as on a
robot: ``odom -> base_link`` on ``/tf`` with every reading, ``map -> odom`` at 2 Hz, the
magnetometer's mounting (0.3 m ahead of ``base_link``) once on ``/tf_static``, the readings in
``imu_link``. The table then also gives the TF lookup's cost per reading (the node's transform
buffer composing map -> odom -> base_link -> imu_link, timed in this process; the pose
topic's interpolation beside it).

    python benchmarks/node_throughput.py [--rates 500,2000,4000] [--seconds 5] [--json out.json]
        [--executor events|single_threaded|multi_threaded] [--no-provisional]
        [--pose-source topic|tf]
    python benchmarks/node_throughput.py --pose-source tf --rates 200 --seconds 600 --json ...
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rclpy
import torch
from common import format_table, header, write_json
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import MagneticField

from gp_mapper.commands.demo import LiveNode
from gp_mapper.ros.diagnostic_messages import diagnostic_values, mapping_status_name
from gp_mapper.ros.node import NODE_NAME
from gp_mapper.ros.stamps import ns_to_stamp

STATUS = mapping_status_name(NODE_NAME)
GRID_SIDE_M = 20.0
BASE_NS = 1_700_000_000 * 10**9
# The mapped world: 48 µT plus a 10 µT pattern with a ~1 m scale, in tesla on the wire.
TESLA = 1e-6


def field_ut(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 48.0 + 10.0 * np.sin(1.3 * x) * np.cos(1.1 * y)


# pose_source tf: the magnetometer's lever arm from base_link [m], and map -> odom's rate [Hz].
MOUNT_M = np.array([0.3, 0.0, 0.0])
MAP_ODOM_HZ = 2.0


def transform(stamp_ns: int, parent: str, child: str, xyz: np.ndarray) -> Any:
    from geometry_msgs.msg import TransformStamped

    msg = TransformStamped()
    msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp_ns), parent
    msg.child_frame_id = child
    t = msg.transform.translation
    t.x, t.y, t.z = (float(v) for v in xyz)
    msg.transform.rotation.w = 1.0
    return msg


def tf_message(stamp_ns: int, xy: np.ndarray, *, with_map_odom: bool) -> Any:
    """/tf at one stamp: odom -> base_link at ``xy``, and map -> odom (identity) if asked."""
    from tf2_msgs.msg import TFMessage

    transforms = [transform(stamp_ns, "odom", "base_link", np.array([xy[0], xy[1], 0.0]))]
    if with_map_odom:
        transforms.append(transform(stamp_ns, "map", "odom", np.zeros(3)))
    return TFMessage(transforms=transforms)


def lookup_cost_us(repeats: int = 5, lookups: int = 20_000) -> dict[str, float]:
    """Median time of one pose lookup [µs]: the TF chain of the tf path, and the pose topic's
    interpolation, each between two held stamps of 50 Hz edges."""
    from gp_mapper.mapping.pose_buffer import PoseBuffer
    from gp_mapper.mapping.records import Pose, Transform
    from gp_mapper.mapping.transforms import TransformBuffer

    q = np.array([0.0, 0.0, 0.0, 1.0])
    tree, poses = TransformBuffer(max_gap_ns=10**9), PoseBuffer(1000, 10**9)
    tree.add(Transform(0, "base_link", "imu_link", MOUNT_M, q), static=True)
    for k in range(500):  # 10 s at 50 Hz
        t = BASE_NS + k * 20_000_000
        tree.add(Transform(t, "odom", "base_link", np.array([0.01 * k, 0, 0]), q), static=False)
        tree.add(Transform(t, "map", "odom", np.zeros(3), q), static=False)
        poses.add(Pose(t, np.array([0.01 * k, 0, 0]), q))
    stamps = BASE_NS + 10_000_000 + 20_000_000 * (np.arange(lookups) % 499)
    out = {}
    for name, lookup in (
        ("tf", lambda s: tree.lookup("map", "imu_link", int(s))),
        ("topic", lambda s: poses.lookup(int(s))),
    ):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for s in stamps:
                lookup(s)
            times.append((time.perf_counter() - start) / lookups * 1e6)
        out[name] = float(np.median(times))
    return out


def lawnmower(n: int, speed_mps: float, rate: float) -> np.ndarray:
    """[n, 2] positions along rows 1 m apart across the square, at speed_mps."""
    s = np.arange(n) * speed_mps / rate
    row = np.floor(s / GRID_SIDE_M)
    along = s - row * GRID_SIDE_M
    x = np.where(row % 2 == 0, along, GRID_SIDE_M - along)
    return np.column_stack([x, (row % GRID_SIDE_M) + 0.5])


def run_rate(rate: float, seconds: float, args: argparse.Namespace, work: Path) -> dict:
    n = int(rate * seconds)
    params = {
        "pose_source": args.pose_source,
        "batch_size": int(rate),  # one window per second of data
        "batch_period": 2.0,
        "diagnostics_period": 0.2,  # catches every window's latencies
        "bounds": f"[0.0, {GRID_SIDE_M}, 0.0, {GRID_SIDE_M}]",
        "resolution": GRID_SIDE_M / args.grid,
        "max_cells": args.grid * args.grid,
        "vips.max_inducing": args.max_inducing,
        "qos_depth": 5000,
        "fit_iterations": args.fit_iterations,
        "executor": args.executor,
        "provisional_map": str(not args.no_provisional).lower(),
    }
    pos = lawnmower(n, args.speed, rate)
    # The field where the sensor is: at the base, or 0.3 m ahead of it (base_link's x is the
    # map's x here: the transforms carry no rotation).
    sensor = pos + (MOUNT_M[:2] if args.pose_source == "tf" else 0.0)
    values = field_ut(sensor[:, 0], sensor[:, 1])
    latencies: dict[int, tuple[float, float, float]] = {}
    last: dict[str, str] = {}
    with LiveNode(work / "map.npz", work / f"node_{int(rate)}.log", params) as live:
        node = rclpy.create_node("throughput_publisher")
        try:
            from rclpy.qos import qos_profile_sensor_data

            mag_pub = node.create_publisher(MagneticField, "/imu/mag", qos_profile_sensor_data)
            tf = args.pose_source == "tf"
            if tf:
                from tf2_msgs.msg import TFMessage

                from gp_mapper.ros.qos import TF_QOS, TF_STATIC_QOS

                pose_pub = node.create_publisher(TFMessage, "/tf", TF_QOS)
                static_pub = node.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
                static_pub.publish(
                    TFMessage(transforms=[transform(BASE_NS, "base_link", "imu_link", MOUNT_M)])
                )
            else:
                pose_pub = node.create_publisher(PoseStamped, "/pose", qos_profile_sensor_data)

            def on_diag(msg: DiagnosticArray) -> None:
                d = diagnostic_values(msg, STATUS)
                if d is None:
                    return
                last.clear()
                last.update(d)
                updates = int(d.get("updates", 0))
                if updates and d.get("last_batch_latency_s", "nan") != "nan":
                    latencies[updates] = (
                        float(d["last_batch_latency_s"]),
                        float(d.get("last_fitted_latency_s", "nan")),
                        float(d.get("last_update_s", "nan")),
                    )

            node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
            deadline = time.monotonic() + 60.0
            while mag_pub.get_subscription_count() < 1 or pose_pub.get_subscription_count() < 1:
                rclpy.spin_once(node, timeout_sec=0.05)
                if time.monotonic() > deadline:
                    raise RuntimeError("the node did not subscribe within 60 s")
            time.sleep(0.5)
            start = time.perf_counter()
            every_map_odom = max(1, round(rate / MAP_ODOM_HZ))
            for i in range(n):
                stamp_ns = BASE_NS + int(i * 1e9 / rate)
                stamp = ns_to_stamp(stamp_ns)
                if tf:
                    pose = tf_message(stamp_ns, pos[i], with_map_odom=i % every_map_odom == 0)
                else:
                    pose = PoseStamped()
                    pose.header.stamp, pose.header.frame_id = stamp, "map"
                    pose.pose.position.x = float(pos[i, 0])
                    pose.pose.position.y = float(pos[i, 1])
                    pose.pose.orientation.w = 1.0
                pose_pub.publish(pose)
                mag = MagneticField()
                mag.header.stamp, mag.header.frame_id = stamp, "imu_link"
                mag.magnetic_field.z = float(values[i]) * TESLA
                mag_pub.publish(mag)
                ahead = start + (i + 1) / rate - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)
                if i % 256 == 0:
                    rclpy.spin_once(node, timeout_sec=0.0)
            achieved = n / (time.perf_counter() - start)
            # A last pose (or transforms) past the final reading lets the pipeline bracket it.
            end_ns = BASE_NS + int(n * 1e9 / rate)
            if tf:
                pose_pub.publish(tf_message(end_ns, pos[-1], with_map_odom=True))
            else:
                pose.header.stamp = ns_to_stamp(end_ns)
                pose_pub.publish(pose)
            time.sleep(0.5)
            live.trigger("flush")
            end = time.monotonic() + 3.0 * args.diagnostics_wait
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        finally:
            node.destroy_node()
    drops = {
        k.removeprefix("drop_"): int(v)
        for k, v in last.items()
        if k.startswith("drop_") and k != "drop_pose_frame" and int(v)
    }
    mapped = int(last.get("samples", 0))
    lat = np.array([v[0] for v in latencies.values()])
    fitted = np.array([v[1] for v in latencies.values()])
    upd = np.array([v[2] for v in latencies.values()])
    return {
        "rate": rate,
        "achieved_rate": achieved,
        "published": n,
        "mapped": mapped,
        "drops": drops,
        "lost_in_transport": n - mapped - sum(drops.values()),
        "inducing": int(last.get("inducing_points", 0)),
        "latency_s": lat.tolist(),
        "fitted_latency_s": fitted.tolist(),
        "update_s": upd.tolist(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="250,500,1000,2000,4000", help="messages/s to try")
    parser.add_argument("--seconds", type=float, default=5.0, help="data per rate [s]")
    parser.add_argument("--grid", type=int, default=200, help="grid cells per side")
    parser.add_argument("--max-inducing", type=int, default=500)
    parser.add_argument("--fit-iterations", type=int, default=100)
    parser.add_argument("--speed", type=float, default=2.0, help="robot speed in data time [m/s]")
    parser.add_argument("--diagnostics-wait", type=float, default=1.0)
    parser.add_argument(
        "--executor", default="events", choices=("events", "single_threaded", "multi_threaded")
    )
    parser.add_argument(
        "--pose-source", default="topic", choices=("topic", "tf"),
        help="the sensor's pose on /pose, or the robot's TF (/tf, /tf_static)",
    )  # fmt: skip
    parser.add_argument("--no-provisional", action="store_true", help="publish only fitted maps")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    print(
        header(
            "gp_mapper node throughput (one node process, DDS on loopback)",
            torch.device("cpu"),
            torch.float64,
        )
    )
    print(
        f"grid {args.grid}x{args.grid} cells over {GRID_SIDE_M:g} m, max_inducing "
        f"{args.max_inducing}, one window per second of data, {args.seconds:g} s per rate, "
        f"executor {args.executor}, provisional maps {'off' if args.no_provisional else 'on'}, "
        f"poses from {args.pose_source}\n"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rate in rates:
            print(f"rate {rate:g}/s ...", file=sys.stderr, flush=True)
            results.append(run_rate(rate, args.seconds, args, Path(tmp)))
    rows = []
    for r in results:
        lat, upd = np.asarray(r["latency_s"]), np.asarray(r["update_s"])
        fitted = np.asarray(r["fitted_latency_s"])

        def pct(a: np.ndarray, q: float) -> str:
            return f"{1e3 * np.percentile(a, q):.0f}" if a.size else "-"

        ok = not r["drops"] and r["lost_in_transport"] == 0
        rows.append(
            [
                f"{r['rate']:g}",
                f"{r['achieved_rate']:.0f}",
                f"{r['mapped']}/{r['published']}",
                ", ".join(f"{k}={v}" for k, v in r["drops"].items()) or "none",
                str(r["lost_in_transport"]),
                str(r["inducing"]),
                f"{pct(lat, 50)} / {pct(lat, 95)}",
                f"{pct(fitted, 50)} / {pct(fitted, 95)}",
                f"{pct(upd, 50)}",
                "yes" if ok else "no",
            ]
        )
    print(
        format_table(
            [
                "rate msg/s",
                "sent msg/s",
                "mapped",
                "drops",
                "lost",
                "M",
                "first map ms p50/p95",
                "fitted map ms p50/p95",
                "update ms p50",
                "no drops",
            ],
            rows,
        )
    )
    sustained = [r["rate"] for r in results if not r["drops"] and r["lost_in_transport"] == 0]
    best = max(sustained) if sustained else math.nan
    print(
        f"\nhighest sustained rate with no drops: {best:g} magnetometer messages/s (target >= 2000)"
    )
    lookup = lookup_cost_us()
    print(
        f"pose lookup per reading: TF chain map -> odom -> base_link -> imu_link "
        f"{lookup['tf']:.1f} µs, pose topic {lookup['topic']:.1f} µs (median of 5 x 20000)"
    )
    write_json(
        args.json,
        {
            "pose_source": args.pose_source,
            "results": results,
            "highest_sustained_rate": best,
            "lookup_us": lookup,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
