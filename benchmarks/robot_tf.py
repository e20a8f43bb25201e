"""A robot's TF against the sensor's exact pose: one walk, mapped by the real node three ways.

A synthetic robot run (``gp_mapper.io.robot_bag``: odometry drifting ~3 % of distance,
``map -> odom`` corrections at 2 Hz with 2 cm of localizer noise, the magnetometer 0.3 m ahead
of ``base_link`` and turned 90°, at 100 Hz with a hard-iron offset) is written as three bags
with the SAME readings, each played into a ``gp_mapper`` node process (``LiveNode``, /clock,
an isolated domain) and mapped with the robot's calibration (``mag_bias``):

- ``tf``: the robot's bag, ``/tf`` + ``/tf_static`` (``pose_source: tf``, the default);
- ``exact``: the sensor's exact pose on ``/pose`` (``pose_source: topic``), the reference;
- ``no_mount``: the base's pose on ``/pose`` as if it were the sensor's (the lever arm and
  the mounting ignored: what a relay forwarding the robot's pose gives).

Each map is scored against the true field on the grid cells within 0.5 m of the sensor's path:
``norm``: ‖B‖; ``axes``: the map-frame x, y and z components, each its own map (``target: x``,
``y``, ``z``, the node's default model), so three node runs a row; ``vector``: the same three
components from one curl-free three-axis map (``target: vector``, model ``potential``). The
check: ``tf`` within 10 % of ``exact`` on every figure, ``no_mount`` worse.

    python benchmarks/robot_tf.py [--duration 120] [--rate 4] [--targets norm,axes,vector]
        [--json benchmarks/results/robot_tf/DATE_COMMIT_default.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from common import format_table, header, write_json
from scipy.spatial import cKDTree

from gp_mapper.commands.demo import map_live
from gp_mapper.io import make_synthetic_world
from gp_mapper.io.bag_writer import (
    BASE_EPOCH_NS,
    MAG_FRAME_ID,
    TESLA_PER_MICROTESLA,
    FieldStream,
    PoseStream,
    write_field_pose_bag,
)
from gp_mapper.io.heading import yaw_to_quaternion
from gp_mapper.io.robot_bag import (
    RobotRun,
    simulate_robot_run,
    write_robot_bag,
    write_robot_pose_bag,
)
from gp_mapper.mapping import MapperConfig, MappingPipeline, MapSnapshot
from gp_mapper.mapping.pose_buffer import NS_PER_S

ROWS = ("tf", "exact", "no_mount")
NEAR_PATH_M = 0.5
TOLERANCE = 0.10  # tf within 10 % of exact
# The maps of each kind: (figure, node settings); the node's defaults but the target, and
# the three-axis model for the vector map.
MAPS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "norm": [("norm", {})],
    "axes": [(axis, {"target": axis}) for axis in "xyz"],
    "vector": [("xyz", {"target": "vector", "model": "potential"})],
}


def base_pose_bag(path: Path, run: RobotRun) -> None:
    """The run's readings with the BASE's pose on /pose, as if it were the sensor's."""
    stamps = BASE_EPOCH_NS + np.rint(run.time_s * NS_PER_S).astype(np.int64)
    field = FieldStream(
        stamps_ns=stamps,
        field_t=run.mag_ut * TESLA_PER_MICROTESLA,
        frame_id=MAG_FRAME_ID,
        covariance_t2=np.diag(np.full(3, (run.noise_ut * TESLA_PER_MICROTESLA) ** 2)).ravel(),
    )
    pose = PoseStream(
        stamps_ns=stamps,
        position_m=np.column_stack([run.base_xy_m, np.zeros(len(stamps))]),
        orientation_xyzw=yaw_to_quaternion(run.base_yaw_rad),
        frame_id="map",
    )
    write_field_pose_bag(path, field, pose, force=True)


def score(snapshot: MapSnapshot, run: RobotRun, world: Any, figure: str) -> dict[str, float]:
    """RMSE [µT] of the map against the true field on cells near the sensor's path: ‖B‖
    (``norm``), one map-frame component (``x``, ``y``, ``z``) or all three of a vector map."""
    points = snapshot.grid.cell_points()
    near = cKDTree(run.sensor_position_m[:, :2]).query(points)[0] <= NEAR_PATH_M
    cells = points[near]
    if figure == "norm":
        error = snapshot.mean.reshape(-1)[near] - world.norm_at(cells)
        return {"norm": float(np.sqrt(np.mean(error**2)))}
    truth = world.field_at(np.column_stack([cells, np.zeros(len(cells))]))
    if figure in ("x", "y", "z"):
        error = snapshot.mean.reshape(-1)[near] - truth[:, "xyz".index(figure)]
        return {figure: float(np.sqrt(np.mean(error**2)))}
    assert snapshot.field_mean is not None
    rmse = np.sqrt(np.mean((snapshot.field_mean.reshape(-1, 3)[near] - truth) ** 2, axis=0))
    return {axis: float(v) for axis, v in zip("xyz", rmse, strict=True)}


def map_row(
    row: str, bags: dict[str, Path], settings: dict[str, Any], work: Path, rate: float
) -> tuple[MapSnapshot, float]:
    """Play one bag into a fresh node with ``settings``; its saved map and the seconds."""
    out = work / f"{row}_{settings.get('target', 'norm')}"
    out.mkdir(parents=True, exist_ok=True)
    node_params = {**settings, "pose_source": "tf" if row == "tf" else "topic"}
    start = time.perf_counter()
    state = map_live(bags[row], out, rate=rate, params=node_params)
    seconds = time.perf_counter() - start
    config = MapperConfig.from_dict({k: v for k, v in settings.items() if k != "mag_bias"})
    with MappingPipeline(config, background=False) as pipeline:
        pipeline.load(state)
        snapshot = pipeline.latest()
    assert snapshot is not None, f"{row}: no map"
    return snapshot, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120.0, help="run length [s]")
    parser.add_argument("--rate", type=float, default=4.0, help="playback speed factor")
    parser.add_argument("--seed", type=int, default=7, help="world and run seed")
    parser.add_argument("--targets", default="norm,axes,vector", help="of norm, axes, vector")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    print(header("robot TF vs exact sensor pose (real node)", torch.device("cpu"), torch.float64))
    world = make_synthetic_world(args.seed)
    run = simulate_robot_run(world, args.duration, seed=args.seed)
    bias = [float(b) for b in run.hard_iron_ut]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="robot_tf_") as scratch:
        work = Path(scratch)
        bags = {row: work / f"{row}.mcap" for row in ROWS}
        write_robot_bag(bags["tf"], run)
        write_robot_pose_bag(bags["exact"], run)
        base_pose_bag(bags["no_mount"], run)
        total = sum(len(MAPS[t]) for t in targets) * len(ROWS)
        done, start = 0, time.perf_counter()
        for target in targets:
            for row in ROWS:
                figures: dict[str, float] = {}
                samples, inducing, seconds = [], [], 0.0
                for figure, settings in MAPS[target]:
                    params = {**settings, "mag_bias": str(bias)}
                    snapshot, took = map_row(row, bags, params, work, args.rate)
                    figures |= score(snapshot, run, world, figure)
                    samples.append(snapshot.num_samples)
                    inducing.append(snapshot.num_inducing)
                    seconds += took
                    done += 1
                elapsed = time.perf_counter() - start
                eta = elapsed / done * (total - done)
                results[f"{target}/{row}"] = {
                    "target": target,
                    "row": row,
                    "rmse_ut": figures,
                    "samples": min(samples),
                    "inducing_points": inducing,
                    "seconds": seconds,
                }
                shown = ", ".join(f"{k} {v:.3f}" for k, v in figures.items())
                print(f"  [{done}/{total}] {target} {row}: RMSE {shown} µT, "
                      f"{min(samples)} samples, {seconds:.0f} s (ETA {eta:.0f} s)",
                      flush=True)  # fmt: skip
    table, checks = [], {}
    for target in targets:
        exact = results[f"{target}/exact"]["rmse_ut"]
        for row in ROWS:
            entry = results[f"{target}/{row}"]
            ratio = {k: v / exact[k] for k, v in entry["rmse_ut"].items()}
            entry["ratio_to_exact"] = ratio
            table.append([
                target, row,
                ", ".join(f"{k} {v:.3f}" for k, v in entry["rmse_ut"].items()),
                ", ".join(f"{v:.2f}" for v in ratio.values()),
                str(entry["samples"]), f"{entry['seconds']:.0f}",
            ])  # fmt: skip
        tf_ratio = results[f"{target}/tf"]["ratio_to_exact"]
        mount_ratio = results[f"{target}/no_mount"]["ratio_to_exact"]
        checks[f"{target}: tf within {TOLERANCE:.0%} of exact"] = all(
            r <= 1.0 + TOLERANCE for r in tf_ratio.values()
        )
        checks[f"{target}: no_mount worse than tf"] = all(
            mount_ratio[k] > tf_ratio[k] for k in tf_ratio
        )
    print(format_table(["target", "row", "RMSE [µT]", "/ exact", "samples", "seconds"], table))
    for name, ok in checks.items():
        print(f"{name}: {'yes' if ok else 'NO'}")
    write_json(
        args.json,
        {
            "benchmark": "robot_tf",
            "duration_s": args.duration,
            "rate": args.rate,
            "seed": args.seed,
            "hard_iron_ut": bias,
            "results": results,
            "checks": checks,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
