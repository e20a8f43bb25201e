"""Calibration of the node's map on readings it never saw: RMSE, NLPD, 95 % coverage and width.

Protocol. Invensense runs 1-5 of the Aalto data (‖B‖ in µT on (x, y) in m), laid
on one time line as ``gp-mapper convert aalto`` lays them (5 s between runs). Each run is cut
into 10-second blocks counted from its first sample; every 5th block, phase 4 (blocks 4, 9, 14,
... : 40-50 s, 90-100 s, ...), is held out, so each run has mapped 40 s before its first hole
and every hole lies between mapped blocks. The other blocks are streamed, reading by reading
with one pose per reading, through ``MappingPipeline`` with the node's default parameters (or
``--set`` overrides): the same pairing, windows, fit schedule, outlier screen and engine the
node runs, tiles and their pass record included (``--set tile_size=0``: one model). The
held-out readings are then predicted; the predictive of a reading is
N(mean, latent variance + noise variance), and the table reports its RMSE, NLPD, the fraction
of readings inside the central 95 % interval (coverage95) and that interval's mean width
(width95 = 2 · 1.96 · sd), plus M and the wall time of the stream.

``--diagnose`` runs the controlled variations of the diagnosis on a validation split carved
from the streamed blocks (phase 3 held out as well, phases 0-2 streamed), so nothing is chosen
on the test blocks: the node's defaults; an exact GP at the stream's final θ on every
``--exact-stride``-th streamed reading (the VIPS approximation against the model it
approximates); θ held at fixed values; the stream thinned; the noise held at a floor.

    python benchmarks/calibration.py [--json out.json] [--threads 1] [--set NAME=VALUE ...]
    python benchmarks/calibration.py --diagnose [--json diag.json]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from scipy.spatial import cKDTree

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Z95,
    aalto_dir,
    add_run_arguments,
    coverage95,
    format_table,
    header,
    nlpd,
    rmse,
    width95,
    write_json,
)

from gp_mapper.engine import ExactPosterior, build_model
from gp_mapper.engine.core.device import set_cpu_threads
from gp_mapper.engine.tiled import UNANCHORED, TiledModel, TileLayout
from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.io.bag_convert import SEQUENCE_GAP_S
from gp_mapper.io.bag_writer import MAG_FRAME_ID, TESLA_PER_MICROTESLA
from gp_mapper.io.heading import heading_from_track, yaw_to_quaternion
from gp_mapper.mapping import FieldReading, MapperConfig, MappingPipeline, Pose
from gp_mapper.mapping.params_file import parse_overrides
from gp_mapper.mapping.pass_noise import PAIR_RADIUS_M, between_pass_noise

RUNS = (1, 2, 3, 4, 5)
BLOCK_S = 10.0
EVERY = 5
# Held-out phase: the last of each group of five blocks, so that a run's first hole comes after
# 40 s of mapping and every hole has mapped blocks on both sides.
TEST_PHASE = 4
# The diagnosis's validation blocks: the streamed block just before each test block.
VALIDATION_PHASE = 3
NS_PER_S = 1_000_000_000
# The exact GP reference of --diagnose: every 8th streamed reading (~3000 points at 6.25 Hz),
# a Cholesky this machine factors in seconds.
EXACT_STRIDE = 8
# Distances to the nearest streamed reading at which coverage is broken down [m].
DISTANCE_EDGES_M = (0.0, 0.05, 0.2, 0.5, math.inf)


class Split(NamedTuple):
    """The readings of runs 1-5 on one time line, and which ones are streamed or scored.

    Attributes:
        stamps_ns: [N] stamps (ns), increasing.
        xy_m: [N, 2] positions (m).
        field_ut: [N, 3] field (µT), room frame.
        yaw: [N] heading (rad) from the direction of travel, for the poses.
        phase: [N] block phase (block index mod 5) of each reading.
        run: [N] run number.
    """

    stamps_ns: np.ndarray
    xy_m: np.ndarray
    field_ut: np.ndarray
    yaw: np.ndarray
    phase: np.ndarray
    run: np.ndarray

    @property
    def target(self) -> np.ndarray:
        """‖B‖ [N] (µT), the node's default target."""
        return np.linalg.norm(self.field_ut, axis=1)


def load_split(runs: tuple[int, ...] = RUNS) -> Split:
    """Runs on one time line with their block phases (see the module docstring)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in Split._fields}
    next_start_ns = 0
    for run in runs:
        seq = load_aalto_sequence(aalto_dir(), seq=run)
        elapsed = seq.time_s - seq.time_s[0]
        stamps = next_start_ns + np.rint(elapsed * NS_PER_S).astype(np.int64)
        parts["stamps_ns"].append(stamps)
        parts["xy_m"].append(seq.loc_m)
        parts["field_ut"].append(seq.mag_ut)
        parts["yaw"].append(heading_from_track(seq.time_s, seq.loc_m))
        parts["phase"].append(np.floor(elapsed / BLOCK_S).astype(np.int64) % EVERY)
        parts["run"].append(np.full(elapsed.size, run))
        next_start_ns = int(stamps[-1]) + round(SEQUENCE_GAP_S * NS_PER_S)
    return Split(**{k: np.concatenate(v) for k, v in parts.items()})


def stream(split: Split, streamed: np.ndarray, overrides: dict[str, Any]) -> dict[str, Any]:
    """Stream the readings ``streamed`` [N] (bool) through the node's pipeline.

    Returns:
        The engine, the wall time, M, the pipeline's diagnostics and θ.
    """
    config = MapperConfig.from_dict({"pose_source": "topic", **overrides, "device": "cpu"})
    engine = build_model(config.engine, input_dim=config.input_dims)
    layout = config.tile_layout()
    if layout is not None:  # as the node builds its map
        engine = TiledModel(engine, TileLayout(*layout, UNANCHORED))
    index = np.flatnonzero(streamed)
    position = np.column_stack([split.xy_m, np.zeros(len(split.stamps_ns))])
    orientation = yaw_to_quaternion(split.yaw)
    field_t = split.field_ut * TESLA_PER_MICROTESLA
    start = time.perf_counter()
    with MappingPipeline(
        config, model=engine, background=False, draw_each_window=False
    ) as pipeline:
        for count, i in enumerate(index):
            stamp = int(split.stamps_ns[i])
            pipeline.add_pose(Pose(stamp, position[i], orientation[i]))
            pipeline.add_field(FieldReading(stamp, field_t[i], MAG_FRAME_ID))
            if count % 4000 == 0:
                d = pipeline.diagnostics()
                print(
                    f"    {count}/{index.size} readings, M={d['inducing_points']}, "
                    f"{time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        pipeline.flush()
        diagnostics = pipeline.diagnostics()
    seconds = time.perf_counter() - start
    return {
        "engine": engine,
        "seconds": seconds,
        "M": int(diagnostics["inducing_points"]),
        "samples": int(diagnostics["samples"]),
        "fits": int(diagnostics["fits"]),
        "outliers": int(diagnostics.get("drop_outlier", 0)),
        "hyperparameters": engine.hyperparameters(),
    }


def score(
    mean: np.ndarray, var_y: np.ndarray, y: np.ndarray, distance_m: np.ndarray | None = None
) -> dict[str, Any]:
    """RMSE, NLPD, coverage of the central 95 % interval and its mean width (all µT)."""
    sd = np.sqrt(var_y)
    z = (y - mean) / sd
    out: dict[str, Any] = {
        "rmse": rmse(mean, y),
        "nlpd": nlpd(mean, var_y, y),
        "coverage95": coverage95(mean, var_y, y),
        "width95": width95(var_y),
        # The factor on sd that would make coverage 95 %: how far off the intervals are.
        "sd_factor_for_95": float(np.quantile(np.abs(z), 0.95) / Z95),
        "mean_z2": float(np.mean(z**2)),
    }
    if distance_m is not None:
        rows = []
        for lo, hi in itertools.pairwise(DISTANCE_EDGES_M):
            sel = (distance_m >= lo) & (distance_m < hi)
            if sel.any():
                rows.append(
                    {
                        "from_m": lo,
                        "to_m": hi,
                        "n": int(sel.sum()),
                        "coverage95": coverage95(mean[sel], var_y[sel], y[sel]),
                        "rmse": rmse(mean[sel], y[sel]),
                    }
                )
        out["by_distance"] = rows
    return out


def predict_stream(run: dict[str, Any], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stream's predictive of readings at X [S, 2]: mean and latent + noise variance."""
    engine = run["engine"]
    mean, var = engine.predict(torch.as_tensor(X, dtype=torch.float64))
    return mean.numpy(), var.numpy() + engine.posterior.noise_variance


def predict_exact(
    run: dict[str, Any], X: np.ndarray, y: np.ndarray, Xs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """An exact GP on (X, y) at the stream's final θ: its predictive of readings at Xs."""
    engine = run["engine"]
    if isinstance(engine, TiledModel):  # the tile holding the map's θ
        engine = engine.tiles[engine.posterior.reference]
    posterior = ExactPosterior.from_data(
        engine.kernel,
        torch.as_tensor(X, dtype=torch.float64),
        torch.as_tensor(y, dtype=torch.float64),
        engine.noise_variance,
    )
    mean, var = posterior.predict(torch.as_tensor(Xs, dtype=torch.float64))
    return mean.numpy(), var.numpy() + engine.noise_variance


def evaluate(split: Split, overrides: dict[str, Any], held: np.ndarray, label: str) -> dict:
    """Stream every reading not in ``held`` or the test blocks; score the ``held`` ones."""
    streamed = ~held & (split.phase != TEST_PHASE)
    print(f"  {label}: streaming {int(streamed.sum())} readings ...", file=sys.stderr, flush=True)
    run = stream(split, streamed, overrides)
    Xs, ys = split.xy_m[held], split.target[held]
    distance = cKDTree(split.xy_m[streamed]).query(Xs)[0]
    result = {k: v for k, v in run.items() if k != "engine"}
    result.update(score(*predict_stream(run, Xs), ys, distance))
    result["overrides"] = overrides
    result["_run"] = run
    return result


def table_row(label: str, r: dict[str, Any]) -> list[str]:
    hp = r.get("hyperparameters", {})
    return [
        label,
        str(r.get("M", "-")),
        f"{r['rmse']:.2f}",
        f"{r['nlpd']:.2f}",
        f"{r['coverage95']:.3f}",
        f"{r['width95']:.2f}",
        f"{r['sd_factor_for_95']:.2f}",
        f"{hp['lengthscale']:.3f}" if "lengthscale" in hp else "-",
        f"{hp['noise_variance']:.3f}" if "noise_variance" in hp else "-",
        f"{r['seconds']:.0f}" if "seconds" in r else "-",
    ]


COLUMNS = [
    "run",
    "M",
    "RMSE µT",
    "NLPD",
    "coverage95",
    "width95 µT",
    "sd ×",
    "lengthscale m",
    "noise µT²",
    "wall s",
]


def diagnose_variants(base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The controlled variations (overrides on top of ``base``)."""
    return {
        "node defaults": dict(base),
        # The pass noise held by hand instead of measured (the defaults' auto): none (white
        # noise alone), the former node default (1 µT²) and near what the readings show.
        "pass noise 0": {**base, "vips.pass_noise_variance": 0.0},
        "pass noise 1 µT²": {**base, "vips.pass_noise_variance": 1.0},
        "pass noise 2 µT²": {**base, "vips.pass_noise_variance": 2.0},
        # The fit's scheduling and cost bounds (the 200 Hz soak's settings): θ fitted on the
        # whole map past 1000 points, fits without a time budget, fits on more windows.
        "whole-map fits": {**base, "vips.local_fit_inducing": 0},
        "no fit budget": {**base, "vips.fit_max_seconds": 0.0},
        "fit every 5th window": {**base, "fit_every_windows": 5},
        # Thinning: one reading per 5 cm of path (~3.5 Hz at the robot's 0.18 m/s).
        "stream thinned to 0.05 m": {**base, "min_spacing": 0.05, "vips.pass_noise_variance": 0.0},
        # The lengthscale: θ held at the seed split's fitted values (magnetic_streaming.py).
        "θ fixed: 0.7 m, 300 µT², σ² 0.2": {
            **base, "fit_iterations": 0, "lengthscale": 0.7, "kernel_variance": 300.0,
            "noise_variance": 0.2, "vips.pass_noise_variance": 0.0,
        },
    }  # fmt: skip


def pass_noise_estimate(split: Split, streamed: np.ndarray) -> dict[str, float]:
    """The between-pass noise of the streamed readings, measured as the node measures it
    (``pass_noise_variance: auto``, ``gp_mapper.mapping.pass_noise``) on all of them at once."""
    t = split.stamps_ns[streamed] / NS_PER_S
    return between_pass_noise(split.xy_m[streamed], split.target[streamed], t).as_dict()


def run_diagnosis(split: Split, base: dict[str, Any], stride: int, names: list[str]) -> dict:
    held = split.phase == VALIDATION_PHASE
    streamed = ~held & (split.phase != TEST_PHASE)
    variants = diagnose_variants(base)
    estimate = pass_noise_estimate(split, streamed)
    print(
        f"between-pass noise of the streamed readings (pairs within {PAIR_RADIUS_M} m): "
        f"{estimate['pass_noise_variance']:.3f} µT² (half mean squared difference "
        f"{estimate['pass_noise_between']:.3f} between passes, "
        f"{estimate['pass_noise_between_pairs']} pairs; {estimate['pass_noise_within']:.3f} "
        f"within a pass)",
        flush=True,
    )
    results: dict[str, dict] = {"_pass_noise_estimate": estimate}
    for name in names or list(variants):
        print(f"  variant {name}: {variants[name]}", file=sys.stderr, flush=True)
        results[name] = evaluate(split, variants[name], held, name)
        if name == "node defaults":
            run = results[name]["_run"]
            Xs, ys = split.xy_m[held], split.target[held]
            idx = np.flatnonzero(streamed)[::stride]
            start = time.perf_counter()
            mean, var_y = predict_exact(run, split.xy_m[idx], split.target[idx], Xs)
            exact = score(mean, var_y, ys, cKDTree(split.xy_m[streamed]).query(Xs)[0])
            exact.update(
                M=int(idx.size), seconds=time.perf_counter() - start,
                hyperparameters=run["hyperparameters"],
            )  # fmt: skip
            results[f"exact GP at its θ, every {stride}th reading"] = exact
    return results


def print_table(title: str, results: dict[str, dict]) -> None:
    print(f"\n{title}")
    results = {k: v for k, v in results.items() if not k.startswith("_")}
    print(format_table(COLUMNS, [table_row(name, r) for name, r in results.items()]))
    for name, r in results.items():
        if "by_distance" in r:
            parts = [
                f"[{d['from_m']:g}, {d['to_m']:g}) m: {d['coverage95']:.3f} (n {d['n']})"
                for d in r["by_distance"]
            ]
            print(f"  {name}: coverage by distance to the nearest streamed reading: "
                  + "; ".join(parts))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="override a node parameter, e.g. --set min_spacing=0.05 (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--diagnose", action="store_true",
        help="the diagnosis's variations on the validation split (phase 3), not the test blocks",
    )  # fmt: skip
    parser.add_argument("--variants", default="", help="comma-separated subset of --diagnose")
    parser.add_argument("--exact-stride", type=int, default=EXACT_STRIDE)
    args = parser.parse_args(argv)
    if not (aalto_dir() / "invensense").is_dir():
        print(f"no Aalto data at {aalto_dir()}: nothing to run", file=sys.stderr)
        return 1
    if args.device not in ("cpu", "auto"):
        print("the node's pipeline runs here on the CPU; --device is ignored", file=sys.stderr)
    set_cpu_threads(args.threads)
    overrides = parse_overrides(args.set)
    split = load_split()
    print(header("calibration of the node's map on held-out Aalto blocks", torch.device("cpu"),
                 torch.float64))  # fmt: skip
    test = split.phase == TEST_PHASE
    print(
        f"runs {RUNS}: {len(split.stamps_ns)} readings; {BLOCK_S:g} s blocks, phase "
        f"{TEST_PHASE} of every {EVERY} held out ({int(test.sum())} readings); "
        f"overrides {overrides or 'none (node defaults)'}"
    )
    if args.diagnose:
        names = [n for n in args.variants.split(",") if n]
        results = run_diagnosis(split, overrides, args.exact_stride, names)
        print_table(
            f"diagnosis: streamed phases 0-2, scored on the validation blocks (phase "
            f"{VALIDATION_PHASE}, {int((split.phase == VALIDATION_PHASE).sum())} readings)",
            results,
        )
        payload = {
            n: {k: v for k, v in r.items() if k != "_run"} if "_run" in r else r
            for n, r in results.items()
        }
        write_json(args.json, {"split": "validation", "results": payload})
        return 0
    result = evaluate(split, overrides, test, "test")
    result.pop("_run")
    print_table("held-out test blocks", {"node" if not overrides else "node + overrides": result})
    hp = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in result["hyperparameters"].items()
    )
    print(f"\nfinal θ: {hp}; samples {result['samples']}, fits {result['fits']}, "
          f"outliers dropped {result['outliers']}")  # fmt: skip
    keys = ("rmse", "nlpd", "coverage95", "width95", "M")
    payload = {k: result[k] for k in keys}
    payload["details"] = result
    write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
