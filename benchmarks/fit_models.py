"""Every model fitted offline on two Aalto runs, as ``gp-mapper fit`` fits it: time, memory, and
the map on a run it never saw.

Protocol. Invensense runs 1 and 2 are converted to one bag as a user would (``gp-mapper convert
aalto DATA aalto12 --sequences 1,2``) and fitted with ``gp-mapper fit aalto12 --model NAME`` at
the model's defaults (``--set`` overrides), each model in a child process of its own (its peak
RSS is its own) with ``--max-minutes`` as the fit's budget and a wall-clock cut. The map file is
then read back and predicts the readings of the held-out run (``--holdout``: run 3, the test
run; run 4 is the validation run a default is chosen on): the predictive of a reading is
N(mean, latent variance + noise variance), scored by RMSE, NLPD, 95 % coverage and interval
width. The table also gives the fit's own time estimate (printed before it starts), M, the
progress lines' largest gap and the model's stop reason (ACGP: whether its rule fired).

    python benchmarks/fit_models.py [--models vips,acgp,...] [--holdout 3] [--set NAME=VALUE]
        [--max-minutes 30] [--cut-minutes 20] [--scratch /tmp/gp_mapper_fit] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import aalto_dir, coverage95, format_table, nlpd, rmse, width95, write_json

MODELS = ("vips", "gam_stream", "exact", "acgp", "solvegp", "cagp", "cagp_cg", "gam")
TRAIN_RUNS = (1, 2)
# A progress line at least this often is the target for long work [s].
PROGRESS_TARGET_S = 10.0


def training_bag(scratch: Path) -> Path:
    """Runs 1 and 2 as one bag, written once (what ``gp-mapper convert aalto`` writes)."""
    from gp_mapper.io.bag_convert import convert_aalto

    bag = scratch / "aalto12"
    if not bag.exists():
        print(f"writing {bag} ...", file=sys.stderr, flush=True)
        convert_aalto(aalto_dir(), bag, sequences=TRAIN_RUNS)
    return bag


def run_model(name: str, args: argparse.Namespace, bag: Path) -> dict[str, Any]:
    """``gp-mapper fit`` of one model in a child process; its outputs, stderr and peak RSS."""
    out = args.scratch / f"fit_{name}"
    rss_file = args.scratch / f"fit_{name}.rss"
    fit_args = [
        "fit", str(bag), "--model", name, "--out", str(out),
        "--max-minutes", f"{args.max_minutes:g}",
        *(a for key, value in args.set.items() for a in ("--set", f"{key}={value}")),
    ]  # fmt: skip
    command = [
        sys.executable,
        __file__,
        "--child",
        json.dumps(fit_args),
        "--rss-out",
        str(rss_file),
    ]
    start = time.perf_counter()
    stamps: list[float] = []
    lines: list[str] = []
    with subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as child:
        assert child.stderr is not None
        # The cut holds whether or not the fit prints: a timer, not the next line, kills it.
        watchdog = threading.Timer(60.0 * args.cut_minutes, child.kill)
        watchdog.start()
        for line in child.stderr:  # the progress lines a log would hold, with their times
            stamps.append(time.perf_counter())
            lines.append(line.rstrip())
        child.wait()
        watchdog.cancel()
    wall = time.perf_counter() - start
    gaps = np.diff([start, *stamps, start + wall])
    found = (re.search(r"fit on \d+ samples: (.*)", line) for line in lines)
    return {
        "returncode": child.returncode,
        "cut": wall > 60.0 * args.cut_minutes,
        "seconds": wall,
        "rss_mb": float(rss_file.read_text()) if rss_file.exists() else None,
        "estimate": next((m.group(1) for m in found if m), None),
        "progress_gap_s": float(gaps.max()),
        "stderr_tail": lines[-3:],
        "out": str(out),
    }


def child(fit_args: list[str], rss_out: Path) -> int:
    """One ``gp-mapper fit`` in this process, its peak RSS written to ``rss_out`` [MB]."""
    from gp_mapper.cli import main as cli_main

    code = cli_main(fit_args)
    rss_out.write_text(str(peak_rss_mb()))
    return code


def peak_rss_mb() -> float:
    """This process's own peak RSS [MB]: VmHWM of its memory map (``ru_maxrss`` after an exec
    keeps the forking parent's peak, which would count the driver's memory in every fit)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def score(out: Path, holdout: int) -> dict[str, Any]:
    """The fitted map file's predictive at the held-out run's readings."""
    import torch

    from gp_mapper.io.aalto import load_aalto_sequence
    from gp_mapper.mapping.map_file import read_model

    model = read_model(out / "map_state.npz", device="cpu")
    run = load_aalto_sequence(aalto_dir(), seq=holdout)
    y = np.linalg.norm(run.mag_ut, axis=1)
    with torch.no_grad():
        mean, var = (t.numpy() for t in model.predict(torch.as_tensor(run.loc_m)))
    var_y = var + float(model.posterior.noise_variance)
    report = json.loads((out / "fit_report.json").read_text())
    fit = report.get("fit", {}) if isinstance(report.get("fit"), dict) else {}
    return {
        "M": int(report.get("M", 0)),
        "rmse": rmse(mean, y),
        "nlpd": nlpd(mean, var_y, y),
        "coverage95": coverage95(mean, var_y, y),
        "width95": width95(var_y),
        "rule": str(fit.get("reason", report.get("reason", ""))),
        "seconds_fit": report.get("seconds_fit", report.get("seconds")),
        "seconds_estimated": report.get("seconds_estimated"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma list of {MODELS}")
    parser.add_argument(
        "--holdout", type=int, default=3, help="the run scored (3 test, 4 validation)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a parameter or model setting of every fit (repeatable), as gp-mapper fit --set",
    )  # fmt: skip
    parser.add_argument("--max-minutes", type=float, default=30.0, help="gp-mapper fit's budget")
    parser.add_argument("--cut-minutes", type=float, default=20.0, help="a child's wall cut")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/gp_mapper_fit"))
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one fit: gp-mapper fit's arguments
    parser.add_argument("--rss-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child), args.rss_out)
    from gp_mapper.mapping.params_file import parse_overrides

    args.set = parse_overrides(args.set)
    if not aalto_dir().exists():
        print(f"no Aalto data at {aalto_dir()} (set GP_MAPPER_DATA)", file=sys.stderr)
        return 2
    args.scratch.mkdir(parents=True, exist_ok=True)
    bag = training_bag(args.scratch)
    models: dict[str, dict[str, Any]] = {}
    names = args.models.split(",")
    for k, name in enumerate(names):
        print(f"[{k + 1}/{len(names)}] fit {name} ...", file=sys.stderr, flush=True)
        row = run_model(name, args, bag)
        if row["returncode"] == 0 and not row["cut"]:
            row.update(score(Path(row["out"]), args.holdout))
        models[name] = row
        print(f"  {name}: {row['seconds']:.0f} s, exit {row['returncode']}", file=sys.stderr)
    headers = ["model", "seconds", "estimate", "RSS MB", "M", "RMSE µT", "NLPD", "cov95",
               "width95 µT", "max progress gap s", "stop"]  # fmt: skip
    table = []
    for name, r in models.items():
        scored = "rmse" in r
        outcome = r["rule"] if scored else ("cut" if r["cut"] else " ".join(r["stderr_tail"][-1:]))
        table.append([
            name, f"{r['seconds']:.0f}", str(r["estimate"] or "–"),
            "–" if r["rss_mb"] is None else f"{r['rss_mb']:.0f}",
            str(r.get("M", "–")),
            *((f"{r['rmse']:.2f}", f"{r['nlpd']:.2f}", f"{r['coverage95']:.3f}",
               f"{r['width95']:.2f}") if scored else ("–",) * 4),
            f"{r['progress_gap_s']:.0f}", outcome[:90],
        ])  # fmt: skip
    print(f"# gp-mapper fit on Aalto runs {TRAIN_RUNS}, scored on run {args.holdout}")
    print(format_table(headers, table))
    write_json(args.json, {
        "train_runs": list(TRAIN_RUNS), "holdout": args.holdout, "settings": args.set,
        "max_minutes": args.max_minutes, "progress_target_s": PROGRESS_TARGET_S, "models": models,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
