"""ACGP on the magnetometer data: how much of a dense 50 Hz log the evidence actually needs.

Fits `gp-mapper fit` models on bags made by `gp-mapper convert aalto` (invensense, ‖B‖ on
(x, y), the node's default kernel Constant + Matérn-5/2) and scores them on held-out runs:

* split "runs": train on runs 1, 2, 4 and 5, test on run 3;
* split "path3": the magnetometer split of Pescador-Barrios et al. 2024 (App. D.4): train on run 3,
  test on runs 1, 2, 4 and 5 (``magnetic_streaming.py`` streams it in 20 batches).

Rows: ACGP (the whole log; it keeps the subset its evidence bounds say suffices), the exact GP
on 5000 random samples, and the VIPS stream (``replay``); any other registered model with
``--models`` (CaGP's and SOLVE-GP's calibration rows: ``--models
cagp,solvegp,exact,vips``; CaGP on ``--cagp-points`` random samples, each of its epochs costing
N² kernel evaluations). Columns: samples used, M (kept points or inducing points), M/N, RMSE
and NLPD of ‖B‖ in µT, the coverage of the central 95 % predictive interval (the fraction of
test readings inside it; 0.95 when calibrated) and its mean width, and the model's wall time.

    python benchmarks/acgp_magnetic.py [--splits runs,path3] [--models ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
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
from magnetic_streaming import load

from gp_mapper.commands.fit import fit_bag
from gp_mapper.engine import model_from_state
from gp_mapper.engine.acgp.model import DEFAULT_REFINEMENTS
from gp_mapper.engine.core.device import resolve_device, set_cpu_threads
from gp_mapper.io import convert_aalto
from gp_mapper.mapping.map_file import load_map
from gp_mapper.mapping.params_file import parse_overrides

SPLITS = {"runs": ((1, 2, 4, 5), (3,)), "path3": ((3,), (1, 2, 4, 5))}
# The exact GP's subset: the reference size of ``magnetic_streaming.py``'s exact GP.
EXACT_POINTS = 5000
# ACGP's factor is capped (acgp_max_points) so that a fit whose bounds do not close stays within
# this machine's time: 6000 points is a 0.3 GB factor and a few seconds per objective on a core.
# Where the cap bites, the report says "not stopped" and M/N is the cap's.
ACGP_MAX_POINTS = 6000
# Restarts of ACGP's refinement schedule: the model's default, so that the node's fit_iterations
# (100 L-BFGS iterations) bounds the fit, as in `gp-mapper fit`.
ACGP_REFINEMENTS = DEFAULT_REFINEMENTS
# CaGP's random subset on this CPU: 300 epochs of N² kernel evaluations (0 = all samples).
CAGP_POINTS = 5000
MODELS = ("acgp", "exact", "vips")


def train_bag(runs: tuple[int, ...], scratch: Path) -> Path:
    """The runs as one bag (made once, kept in the scratch folder)."""
    bag = scratch / f"aalto_{''.join(map(str, runs))}.mcap"
    if not bag.exists():
        convert_aalto(aalto_dir(), bag, sequences=runs)
    return bag


def test_points(runs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    parts = [load(r) for r in runs]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def score(state_path: Path, Xt: np.ndarray, yt: np.ndarray) -> dict[str, float]:
    """RMSE, NLPD, 95 % coverage and mean interval width of the readings' predictive."""
    model = model_from_state(load_map(state_path).engine_state, device="cpu")
    mean, var = model.predict(torch.as_tensor(Xt, dtype=torch.float64))
    mean_np = mean.numpy()
    var_y = var.numpy() + model.posterior.noise_variance
    return {
        "rmse": rmse(mean_np, yt),
        "nlpd": nlpd(mean_np, var_y, yt),
        "coverage95": coverage95(mean_np, var_y, yt),
        "width95": width95(var_y),
    }


def run_model(
    model: str,
    bag: Path,
    out: Path,
    Xt: np.ndarray,
    yt: np.ndarray,
    acgp: dict[str, int],
    cagp_points: int = CAGP_POINTS,
    settings: dict[str, object] | None = None,
) -> dict:
    max_samples = {"exact": EXACT_POINTS, "cagp": cagp_points, "cagp_cg": cagp_points}.get(model, 0)
    overrides = {**(settings or {}), **(acgp if model == "acgp" else {})}
    start = time.perf_counter()
    result = fit_bag(
        bag, out / model, model=model, max_samples=max_samples, overrides=overrides,
        progress=False,
        max_minutes=0,  # the protocol's fit, not the command's budget
    )  # fmt: skip
    seconds = time.perf_counter() - start
    report = result.report
    if result.snapshot is None:
        return {"accepted": False, "reason": report.get("reason"), "seconds": seconds}
    return {
        "accepted": True,
        "N": int(report["samples_used"]),
        "M": int(report["M"]),
        "M_over_N": float(report["M_over_N"]),
        **score(result.outputs.state, Xt, yt),
        "seconds": seconds,
        "lower": report.get("lower"),
        "upper": report.get("upper"),
        "log_evidence": report.get("log_evidence"),
        "stopped": report.get("fit", {}).get("stopped"),
        "relative_gap": report.get("fit", {}).get("relative_gap"),
        "hyperparameters": report["hyperparameters"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--splits", default="runs,path3", help="comma-separated: runs, path3")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models")
    parser.add_argument(
        "--scratch", type=Path, default=Path("/tmp/gp_mapper_acgp_magnetic"),
        help="where the bags and fitted maps go",
    )  # fmt: skip
    parser.add_argument(
        "--acgp-max-points", type=int, default=ACGP_MAX_POINTS,
        help=f"cap on ACGP's factor (default {ACGP_MAX_POINTS}; 0 = all samples)",
    )  # fmt: skip
    parser.add_argument(
        "--acgp-refinements", type=int, default=ACGP_REFINEMENTS,
        help=f"restarts of ACGP's refinement schedule (default {ACGP_REFINEMENTS})",
    )  # fmt: skip
    parser.add_argument(
        "--cagp-points", type=int, default=CAGP_POINTS,
        help=f"CaGP's random subset (default {CAGP_POINTS}; 0 = all samples)",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a node or model setting for every fit, e.g. --set solvegp.epochs=30 (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    settings = parse_overrides(args.set)
    if not aalto_dir().is_dir():
        print(f"no Aalto data at {aalto_dir()}: nothing to run", file=sys.stderr)
        return 1
    set_cpu_threads(args.threads)
    device = resolve_device(args.device)
    print(header("ACGP on the Aalto magnetometer runs", device, torch.float64))
    args.scratch.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, dict]] = {}
    for split in args.splits.split(","):
        train, test = SPLITS[split]
        bag = train_bag(train, args.scratch)
        Xt, yt = test_points(test)
        results[split] = {}
        for model in args.models.split(","):
            print(f"  {split}: fitting {model} ...", file=sys.stderr, flush=True)
            acgp = {
                "acgp.max_points": args.acgp_max_points,
                "acgp.refinements": args.acgp_refinements,
            }
            row = run_model(
                model, bag, args.scratch / split, Xt, yt, acgp, args.cagp_points, settings
            )
            results[split][model] = row
            print(f"  {split}/{model}: {json.dumps(row, default=str)}", file=sys.stderr)
        rows = [
            [
                model,
                str(r.get("N", "-")),
                str(r.get("M", "-")),
                f"{r['M_over_N']:.3f}" if r.get("accepted") else "-",
                f"{r['rmse']:.2f}" if r.get("accepted") else str(r.get("reason")),
                f"{r['nlpd']:.2f}" if r.get("accepted") else "-",
                f"{r['coverage95']:.3f}" if r.get("accepted") else "-",
                f"{r['width95']:.1f}" if r.get("accepted") else "-",
                f"{r['seconds']:.0f}",
                "-" if r.get("relative_gap") is None else f"{r['relative_gap']:.3f}",
                "-" if r.get("stopped") is None else str(r["stopped"]),
            ]
            for model, r in results[split].items()
        ]
        print(f"\nsplit {split}: train runs {train}, test runs {test} ({len(yt)} readings)")
        columns = [
            "model", "N", "M", "M/N", "RMSE µT", "NLPD", "coverage95", "width95 µT", "seconds",
            "bound gap", "stopped",
        ]  # fmt: skip
        print(format_table(columns, rows))
    if args.json:
        write_json(args.json, {"device": str(device), "splits": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
