"""``gp-mapper replay``: map a bag offline through the same pipeline as the node.

Same pairing, windows, engine and grids as the live node, read straight from the bag with no
ROS runtime, as fast as the engine goes. Writes the map products and the engine state.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from gp_mapper.engine import set_cpu_threads
from gp_mapper.io import bag_info, write_grids_npz, write_nav2_map, write_png
from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC
from gp_mapper.io.errors import IoLayerError
from gp_mapper.mapping import MappingPipeline, MapSnapshot
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.params_file import config_from_params_file, parse_overrides

from . import options
from .bag_input import bag_records
from .progress import Progress

_LOG = logging.getLogger(__name__)


class ReplayOutputs(NamedTuple):
    """The files a replay writes into its output directory."""

    png: Path
    nav2_yaml: Path
    grids: Path
    state: Path

    @classmethod
    def in_dir(cls, out: Path) -> ReplayOutputs:
        return cls(out / "map.png", out / "map.yaml", out / "grids.npz", out / "map_state.npz")


class ReplayResult(NamedTuple):
    """What a replay made: the last map, the pipeline's diagnostics, the files written, the
    wall time, and the map's θ and nuisance estimates (``MappingPipeline.theta``)."""

    snapshot: MapSnapshot | None
    diagnostics: dict[str, str | int | float]
    outputs: ReplayOutputs
    seconds: float
    hyperparameters: dict[str, Any]
    nuisance: dict[str, float | list[float]]


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_bag(parser)
    options.add_out(parser)
    options.add_params(parser)
    parser.add_argument("--resume", type=Path, help="engine state (map_state.npz) to continue")
    options.add_mag_topic(parser)
    options.add_pose_topic(parser)
    options.add_set(parser, "a parameter", "vips.delta=0.095")


def replay_bag(
    bag: Path,
    out: Path,
    *,
    params: Path | None = None,
    resume: Path | None = None,
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    overrides: dict[str, object] | None = None,
    progress: bool = True,
) -> ReplayResult:
    """Map ``bag`` and write the products into ``out``.

    Raises:
        ConfigError, BagError, MapFileError: bad parameters, bag or resume state (each says
            which file and what is wrong).
    """
    # Offline: budgets in iterations, so that the same bag gives the same map on any machine.
    config = config_from_params_file(params, **(overrides or {})).offline()
    set_cpu_threads(config.torch_threads)
    info = bag_info(bag)
    config, records = bag_records(bag, config, mag_topic, pose_topic)
    out.mkdir(parents=True, exist_ok=True)
    outputs = ReplayOutputs.in_dir(out)
    start = time.perf_counter()
    # A window is fitted inline between two records: the heartbeat shows a long one.
    bar = Progress(f"replay {bag.name}", heartbeat=True) if progress else None
    span = max(info.end_ns - info.start_ns, 1)
    # The heartbeat stops whether the replay ended or failed.
    with (
        bar if bar is not None else contextlib.nullcontext(),
        # Only the last map is written: drawn once, at the end.
        MappingPipeline(config, background=False, draw_each_window=False) as pipeline,
    ):
        if resume is not None:
            pipeline.load(resume)
        for count, record in enumerate(records):
            pipeline.add(record)
            if bar is not None and count % 512 == 0:
                d = pipeline.diagnostics()
                bar.update(
                    (record.stamp_ns - info.start_ns) / span,
                    f"M={d['inducing_points']} samples={d['samples']}",
                )
        pipeline.flush()
        pipeline.wait_idle()
        snapshot = pipeline.latest()
        diagnostics = pipeline.diagnostics()
        hyperparameters, nuisance = pipeline.theta()
        if snapshot is not None:
            pipeline.save(outputs.state)
    if bar is not None:
        bar.done(f"M={diagnostics['inducing_points']} samples={diagnostics['samples']}")
    if snapshot is not None:
        write_png(outputs.png, snapshot, unknown_ratio=config.unknown_variance_ratio)
        write_nav2_map(outputs.nav2_yaml, snapshot)
        write_grids_npz(outputs.grids, snapshot)
    seconds = time.perf_counter() - start
    return ReplayResult(snapshot, diagnostics, outputs, seconds, hyperparameters, nuisance)


def summary(result: ReplayResult) -> str:
    d = result.diagnostics
    drops = {k.removeprefix("drop_"): v for k, v in d.items() if k.startswith("drop_") and v}
    lines = [
        f"samples {d['samples']}, updates {d['updates']}, inducing points {d['inducing_points']}, "
        f"{result.seconds:.1f} s",
        f"poses from: {d['pose_source']}; drops: {drops or 'none'}",
    ]
    if "hard_iron_x" in d:  # the three-axis model's estimate of the sensor's own offset
        parts = [f"{a} {d[f'hard_iron_{a}']:.2f} ± {d[f'hard_iron_{a}_sd']:.2f}" for a in "xyz"]
        lines.append(f"magnetometer offset (sensor frame): {', '.join(parts)} µT")
    if d.get("lost_readings"):
        lines.append(
            f"WARNING: the map was full in {d['lost_windows']} window(s): {d['lost_readings']} "
            "readings are not in it (vips.max_inducing reached; raise it, or map with tiles: "
            "--set tile_size=...)"
        )
    if result.snapshot is not None:
        lines += [f"wrote {p}" for p in result.outputs]
    else:
        lines.append("no map: not one window was mapped (see the drops above)")
    return "\n".join(lines)


def run_replay(args: argparse.Namespace) -> int:
    try:
        result = replay_bag(
            args.bag,
            args.out,
            params=args.params,
            resume=args.resume,
            mag_topic=args.mag_topic,
            pose_topic=args.pose_topic,
            overrides=parse_overrides(args.set),
        )
    except (ConfigError, MapFileError, IoLayerError) as err:
        print(f"gp-mapper replay: error: {err}", file=sys.stderr)
        return 2
    print(summary(result))
    return 0 if result.snapshot is not None else 1
