"""``gp-mapper fit``: fit any model on a whole bag, write the map products and a tuned θ.

The loop a robotics user wants: record a bag once, fit a model offline (its hyperparameters,
and for a batch model its posterior on the whole log), and launch the node with the fitted
values (``theta.yaml``). The bag is read with the same pairing and thinning as ``replay`` and
the node. This module parses the command line into a ``FitJob``; the fit itself, the same
pipeline for batch, streaming and tiled routes, is :mod:`gp_mapper.commands.fit_job`.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from gp_mapper.engine import model_names
from gp_mapper.engine.settings import model_settings
from gp_mapper.io.errors import IoLayerError
from gp_mapper.mapping.batch_fit import DEFAULT_MAX_MINUTES
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.params_file import parse_overrides
from gp_mapper.mapping.tiled_fit import TileFitError

from . import options
from .fit_job import DEFAULT_WORKERS, FitJob, FitResult, fit_bag, run_fit_job

__all__ = ["FitJob", "FitResult", "add_fit_arguments", "fit_bag", "run_fit", "run_fit_job"]

EXAMPLES = """examples:
  gp-mapper fit run.mcap --model acgp --out out/acgp
  gp-mapper fit run.mcap --model exact --max-samples 3000 --out out/exact
  gp-mapper fit run.mcap --model solvegp --set solvegp.inducing=256 --out out/solve
  gp-mapper fit run.mcap --model vips --params config/gp_mapper.yaml --out out/vips
  gp-mapper fit run.mcap --model potential --out out/potential   # the field vector
  gp-mapper fit run.mcap --model acgp --set acgp.rel_tol=0.005 --set kernel=matern32 --out out/a
  gp-mapper fit run.mcap --model gam --set gam.components=offset+map+heading+run --out out/gam
  gp-mapper fit a.mcap b.mcap --model vips --out out/floor       # tiles as tasks on Ray
  gp-mapper fit floor.mcap --model vips --workers 2 --out out/floor   # one bag, the same way
  gp-mapper fit a.mcap b.mcap --model vips --ray-address HOST:6379 --out out/floor
  gp-mapper fit a.mcap b.mcap --model acgp --workers 2 --out out/floor_acgp   # batch tiles

then launch the node with the fitted hyperparameters:
  ros2 launch gp_mapper gp_mapper.launch.py params_file:=out/acgp/theta.yaml
"""


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Fit any model (acgp, exact, solvegp, vips, potential, ...) on a whole bag, write the\n"
        "map products, a report and theta.yaml: the fitted hyperparameters as a parameter\n"
        "file for the node."
    )
    parser.epilog = EXAMPLES + "\n" + _settings_epilog()
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
    options.add_set(parser, "a parameter or a model setting", "acgp.rel_tol=0.005")
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


def _settings_epilog() -> str:
    """Each registered model's own settings (``--set NAME=VALUE``), from the settings table."""
    lines = ["model settings (--set NAME=VALUE; the shared ones and the node's parameters too):"]
    for model in model_names():
        names = ", ".join(s.name for s in model_settings(model)) or "none of its own"
        lines += textwrap.wrap(
            f"{model}: {names}", width=88, initial_indent="  ", subsequent_indent="    "
        )
    return "\n".join(lines)


def run_fit(args: argparse.Namespace) -> int:
    try:
        job = FitJob(
            tuple(args.bags),
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
        result = run_fit_job(job)
    except (ConfigError, MapFileError, IoLayerError, ValueError, TileFitError) as err:
        print(f"gp-mapper fit: error: {err}", file=sys.stderr)
        return 2
    print(result.text())
    return 0 if result.snapshot is not None else 1
