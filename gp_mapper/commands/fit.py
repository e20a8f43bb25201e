"""``gp-mapper fit``: fit any model on a whole bag, write the map products and a tuned θ.

The loop a robotics user wants: record a bag once, fit a model offline (its hyperparameters,
and for a batch model its posterior on the whole log), and launch the node with the fitted
values (``theta.yaml``). The bag is read with the same pairing and thinning as ``replay`` and
the node. A streaming model (vips, potential, gam_stream) is fitted by streaming the bag
(``replay``); a batch model by the batch pipeline (:mod:`gp_mapper.mapping.batch_fit`), which
also says what the map file holds when the stream can continue the fit (solvegp).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gp_mapper.engine import EngineSpec, build_model, model_names, set_cpu_threads
from gp_mapper.engine.registry import model_kind
from gp_mapper.io import bag_info, write_grids_npz, write_nav2_map, write_png
from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC
from gp_mapper.io.errors import IoLayerError
from gp_mapper.mapping import MapperConfig, MapSnapshot
from gp_mapper.mapping.batch_fit import (
    DEFAULT_MAX_MINUTES,
    fit_config,
    fit_records,
    map_file_data,
    map_snapshot,
    save_fit,
)
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.inputs import collect_samples, concat_samples
from gp_mapper.mapping.map_file import save_map
from gp_mapper.mapping.params_file import parse_overrides, theta_yaml
from gp_mapper.mapping.tiled_fit import RayRuntime, TileFitError, fit_tiled

from . import options
from .bag_input import bag_records
from .progress import Progress
from .replay import replay_bag

# Tile fits in parallel on a local Ray runtime: the two cores of a small machine.
DEFAULT_WORKERS = 2

EXAMPLES = """examples:
  gp-mapper fit run.mcap --model acgp --out out/acgp
  gp-mapper fit run.mcap --model exact --max-samples 3000 --out out/exact
  gp-mapper fit run.mcap --model solvegp --set solve_inducing=256 --out out/solve
  gp-mapper fit run.mcap --model vips --params config/gp_mapper.yaml --out out/vips
  gp-mapper fit run.mcap --model potential --out out/potential   # the field vector
  gp-mapper fit run.mcap --model acgp --set acgp_rel_tol=0.005 --set kernel=matern32 --out out/a
  gp-mapper fit run.mcap --model gam --set components=offset+map+heading+run --out out/gam
  gp-mapper fit a.mcap b.mcap --model vips --out out/floor       # tiles as tasks on Ray
  gp-mapper fit floor.mcap --model vips --workers 2 --out out/floor   # one bag, the same way
  gp-mapper fit a.mcap b.mcap --model vips --ray-address HOST:6379 --out out/floor
  gp-mapper fit a.mcap b.mcap --model acgp --workers 2 --out out/floor_acgp   # batch tiles

then launch the node with the fitted hyperparameters:
  ros2 launch gp_mapper gp_mapper.launch.py params_file:=out/acgp/theta.yaml
"""


class FitOutputs(NamedTuple):
    """The files ``fit`` writes into its output directory."""

    png: Path
    nav2_yaml: Path
    grids: Path
    state: Path
    report: Path
    theta: Path

    @classmethod
    def in_dir(cls, out: Path) -> FitOutputs:
        return cls(
            out / "map.png",
            out / "map.yaml",
            out / "grids.npz",
            out / "map_state.npz",
            out / "fit_report.json",
            out / "theta.yaml",
        )


class FitResult(NamedTuple):
    snapshot: MapSnapshot | None
    report: dict[str, Any]
    outputs: FitOutputs


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Fit any model (acgp, exact, solvegp, vips, potential, ...) on a whole bag, write the\n"
        "map products, a report and theta.yaml: the fitted hyperparameters as a parameter\n"
        "file for the node."
    )
    parser.epilog = EXAMPLES
    parser.add_argument(
        "bags", type=Path, nargs="+", metavar="BAG",
        help="rosbag2 directory (MCAP or sqlite3) or .mcap file; several for a tiled map "
        "(--set tile_size=...)",
    )  # fmt: skip
    parser.add_argument(
        "--model", default="acgp", choices=model_names(), help="the model to fit (default acgp)"
    )
    options.add_out(parser)
    options.add_params(parser)
    options.add_set(parser, "a parameter or a model setting", "acgp_rel_tol=0.005")
    parser.add_argument(
        "--max-samples",
        type=int,
        default=0,
        metavar="N",
        help="fit on a random subset of N samples (seeded by --seed); 0 = all",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --max-samples (default 0)")
    parser.add_argument(
        "--max-minutes", type=float, default=DEFAULT_MAX_MINUTES, metavar="M",
        help="refuse a batch fit estimated to take longer than M minutes on this machine (the "
        f"estimate is printed first); 0 = no limit (default {DEFAULT_MAX_MINUTES:g})",
    )  # fmt: skip
    options.add_mag_topic(parser)
    options.add_pose_topic(parser)
    parser.add_argument(
        "--workers", type=int, metavar="N",
        help="fit the map's tiles as independent tasks on a local Ray runtime with N "
        "workers; 0 = one after another in this process (the same map). Several bags: "
        f"default {DEFAULT_WORKERS}; one bag: given, else the bag streams as `replay` does",
    )  # fmt: skip
    parser.add_argument(
        "--ray-address", metavar="ADDRESS",
        help="fit the tiles on this Ray cluster (what `ray start --head` prints) instead",
    )  # fmt: skip


def fit_bag(
    bag: Path | Sequence[Path],
    out: Path,
    *,
    model: str = "acgp",
    params: Path | None = None,
    overrides: dict[str, object] | None = None,
    max_samples: int = 0,
    seed: int = 0,
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    progress: bool = True,
    workers: int | None = None,
    ray_address: str | None = None,
    max_minutes: float = DEFAULT_MAX_MINUTES,
) -> FitResult:
    """Fit ``model`` on ``bag`` (one, or several for a tiled map) and write the products into
    ``out``.

    A streaming model (tiled at the default ``tile_size``) streams one bag through the
    mapping pipeline, the map the node would make (``replay``); a batch model is fitted on
    it whole. Several bags, or ``workers`` or ``ray_address`` given, make a tiled map whose
    tiles are fitted as independent tasks instead, with either kind of model
    (:mod:`gp_mapper.mapping.tiled_fit`: on Ray with ``workers`` > 0, by default
    ``DEFAULT_WORKERS``, or at ``ray_address``; ``workers=0`` one after another).

    Raises:
        ConfigError, BagError, MapFileError: bad parameters, bag or output (each names the
            file and the fault); ValueError from the model on data it refuses.
    """
    bags = [Path(bag)] if isinstance(bag, str | Path) else [Path(b) for b in bag]
    config, spec = fit_config(model, overrides or {}, params)
    set_cpu_threads(config.torch_threads)
    streaming = model_kind(model) == "streaming"
    as_tasks = len(bags) > 1 or workers is not None or ray_address is not None
    if as_tasks and config.tile_layout() is not None:
        topics = (mag_topic, pose_topic)
        workers = DEFAULT_WORKERS if workers is None else workers
        return _fit_tiled(
            bags, out, config, spec, topics, workers, ray_address, progress, max_minutes
        )
    if len(bags) > 1:
        raise ConfigError(
            f"{len(bags)} bags: several bags make one tiled map (tile_size > 0); replay "
            "them one after another with --resume otherwise"
        )
    bag = bags[0]
    if streaming:
        return _fit_streaming(bag, out, config, spec, mag_topic, pose_topic, progress)
    messages = int(bag_info(bag).topics.get(mag_topic, ("", 0))[1])
    config, records = bag_records(bag, config, mag_topic, pose_topic)
    # A model reports between its steps (an epoch, an evaluation): the heartbeat shows a long one.
    bar = Progress(f"fit {model}", heartbeat=True) if progress else None
    if bar is not None:  # a first line at once: reading the bag takes seconds
        bar.start(f"reading {messages} readings of {bag.name}")
    with bar if bar is not None else contextlib.nullcontext():
        result = fit_records(
            records, config, spec, max_samples=max_samples, seed=seed, messages=messages,
            source=str(bag), progress=None if bar is None else bar.update,
            max_minutes=max_minutes,
        )  # fmt: skip
    if bar is not None:
        bar.done(f"accepted={result.fit.accepted} M={result.fit.m_after}")
    out.mkdir(parents=True, exist_ok=True)
    outputs = FitOutputs.in_dir(out)
    report = result.report
    if result.snapshot is None:
        outputs.report.write_text(json.dumps(report, indent=2, default=str))
        return FitResult(None, report, outputs)
    continuation = save_fit(result, outputs.state)
    if continuation is not None:
        report["streaming_continuation"] = continuation
    _write_products(outputs, result.snapshot, config, report, result.model.hyperparameters())
    return FitResult(result.snapshot, report, outputs)


def _fit_tiled(
    bags: list[Path],
    out: Path,
    config: MapperConfig,
    spec: EngineSpec,
    topics: tuple[str, str],
    workers: int,
    ray_address: str | None,
    progress: bool,
    max_minutes: float,
) -> FitResult:
    """A tiled map of ``spec``'s model on every sample of the bags, tile fits as tasks."""
    start = time.perf_counter()
    auxiliary = build_model(spec, config.input_dims).auxiliary_inputs
    workers = workers if ray_address is None else max(workers, 1)
    # Ray's runtime starts first: its workers import the engine while the bags are read. The
    # heartbeat shows a long read or a long tile.
    bar = Progress(f"fit {spec.model} tiles", heartbeat=True) if progress else None
    if bar is not None:
        bar.start(f"reading {len(bags)} bag(s)")
    with (
        RayRuntime(workers, ray_address) if workers > 0 else contextlib.nullcontext(),
        bar if bar is not None else contextlib.nullcontext(),
    ):
        parts = []
        for bag in bags:
            bag_config, records = bag_records(bag, config, *topics)
            parts.append(collect_samples(records, bag_config))
        samples = concat_samples(parts).with_auxiliary_inputs(auxiliary, spec.gam_run_gap)
        if len(samples.y) == 0:
            names = ", ".join(map(str, bags))
            raise ConfigError(f"{names}: no reading could be paired with a pose")
        read_s = time.perf_counter() - start
        fitted = fit_tiled(
            samples, config, spec=spec, workers=workers, ray_address=ray_address,
            progress=None if bar is None else bar.update, max_minutes=max_minutes,
        )  # fmt: skip
    if bar is not None:
        bar.done(f"{fitted.report['tiles']} tiles")
    out.mkdir(parents=True, exist_ok=True)
    outputs = FitOutputs.in_dir(out)
    name = spec.model
    snapshot = map_snapshot(fitted.model, config, samples, name)
    save_map(outputs.state, map_file_data(fitted.model.state_dict(), name, config, samples))
    report = {
        "model": name,
        "bag": [str(b) for b in bags],
        "accepted": True,
        "samples_used": len(samples.y),
        "M": snapshot.num_support,
        "M_over_N": snapshot.num_support / max(len(samples.y), 1),
        "seconds_read": read_s,
        **fitted.report,
        "hyperparameters": fitted.model.hyperparameters(),
        "drops": samples.drops,
    }
    _write_products(outputs, snapshot, config, report, fitted.model.hyperparameters())
    return FitResult(snapshot, report, outputs)


def _fit_streaming(
    bag: Path,
    out: Path,
    config: MapperConfig,
    spec: EngineSpec,
    mag_topic: str,
    pose_topic: str,
    progress: bool,
) -> FitResult:
    """A streaming model is fitted by streaming the bag through the pipeline (``replay``)."""
    config = MapperConfig(**{**_mapping_fields(config), "engine": spec})
    start = time.perf_counter()
    result = replay_bag(
        bag, out, overrides=config.to_dict(), mag_topic=mag_topic, pose_topic=pose_topic,
        progress=progress,
    )  # fmt: skip
    outputs = FitOutputs.in_dir(out)
    if result.snapshot is None:
        report = {
            "model": spec.model,
            "bag": str(bag),
            "accepted": False,
            "reason": "not one window was mapped",
            "diagnostics": result.diagnostics,
        }
        outputs.report.write_text(json.dumps(report, indent=2, default=str))
        return FitResult(None, report, outputs)
    d = result.diagnostics
    report = {
        "model": spec.model,
        "bag": str(bag),
        "accepted": True,
        "samples_used": int(d["samples"]),
        "M": int(d["inducing_points"]),
        "M_over_N": int(d["inducing_points"]) / max(int(d["samples"]), 1),
        "updates": int(d["updates"]),
        "seconds": time.perf_counter() - start,
        "hyperparameters": result.hyperparameters,
        "last_update": result.snapshot.report,
        "drops": {k.removeprefix("drop_"): v for k, v in d.items() if k.startswith("drop_")},
    }
    if result.nuisance:  # an additive model: its heading curve, drift and run offset
        report["nuisance"] = result.nuisance
    outputs.report.write_text(json.dumps(report, indent=2, default=str))
    outputs.theta.write_text(theta_yaml(result.hyperparameters))
    return FitResult(result.snapshot, report, outputs)


def _mapping_fields(config: MapperConfig) -> dict[str, Any]:
    return {k: v for k, v in config.__dict__.items() if k != "engine"}


def _write_products(
    outputs: FitOutputs, snapshot: MapSnapshot, config: MapperConfig, report: dict[str, Any],
    hyperparameters: dict[str, Any],
) -> None:  # fmt: skip
    write_png(outputs.png, snapshot, unknown_ratio=config.unknown_variance_ratio)
    write_nav2_map(outputs.nav2_yaml, snapshot)
    write_grids_npz(outputs.grids, snapshot)
    outputs.report.write_text(json.dumps(report, indent=2, default=str))
    outputs.theta.write_text(theta_yaml(hyperparameters))


def summary(result: FitResult) -> str:
    r = result.report
    if result.snapshot is None:
        return f"fit {r['model']}: rejected ({r.get('reason')}); see {result.outputs.report}"
    lines = [
        f"model {r['model']}: {r['samples_used']} samples used, M = {r['M']} "
        f"(M/N = {r['M_over_N']:.3f})",
    ]
    if r.get("reason"):  # how the fit stopped (ACGP: whether its rule fired, and the gap)
        lines.append(f"fit: {r['reason']}")
    if r.get("log_evidence") is not None:
        bounds = ""
        if r.get("lower") is not None and r.get("upper") is not None:
            bounds = f" in [{r['lower']:.1f}, {r['upper']:.1f}]"
        lines.append(f"log-evidence estimate {r['log_evidence']:.1f}{bounds}")
    lines.append(f"hyperparameters: {r['hyperparameters']}")
    lines += [f"wrote {p}" for p in result.outputs]
    return "\n".join(lines)


def run_fit(args: argparse.Namespace) -> int:
    try:
        result = fit_bag(
            args.bags,
            args.out,
            model=args.model,
            params=args.params,
            overrides=parse_overrides(args.set),
            max_samples=args.max_samples,
            seed=args.seed,
            mag_topic=args.mag_topic,
            pose_topic=args.pose_topic,
            workers=args.workers,
            ray_address=args.ray_address,
            max_minutes=args.max_minutes,
        )
    except (ConfigError, MapFileError, IoLayerError, ValueError, TileFitError) as err:
        print(f"gp-mapper fit: error: {err}", file=sys.stderr)
        return 2
    print(summary(result))
    return 0 if result.snapshot is not None else 1
