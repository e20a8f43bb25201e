"""SOLVE-GP on the magnetometer data: one batch fit of a whole log, then the stream carries on.

Data: the Aalto invensense runs 1-5 (about 43 000 samples) on one time line, ‖B‖ on (x, y).
Every 5th 10-second block of each run (blocks 4, 9, 14, ... counted from the run's start) is left
out of the training bag and scored: held-out time blocks test the map between passes, where
every-5th-sample hold-outs would sit between two training neighbours 20 ms away.

The training bag is written with ``gp_mapper.io.bag_writer`` from the Aalto arrays (as
test/commands/test_replay.py's ``aalto_slice_bag``): the field messages of the kept blocks, the
pose stream of the whole run, runs joined one after another with ``SEQUENCE_GAP_S`` between.

Rows (each one ``gp-mapper fit`` on that bag, scored on the held-out blocks; RMSE, NLPD, 95 %
coverage and mean 95 % interval width of ‖B‖ in µT with the noise added to the latent variance;
wall time of the whole fit command):

* ``solvegp``: the batch model (SOLVE-GP, the node's settings), scored on its own fitted state;
* ``solvegp→stream``: the same fit's map_state.npz, the streaming model that carries it on;
* ``vips``: the stream over the bag (``--model vips``);
* ``exact``: the exact GP on 5000 random samples (as ``acgp_magnetic.py``);
* ``acgp``: ACGP, its factor capped as ``acgp_magnetic.py`` caps it.

Handoff: ``replay --resume`` of the solvegp map_state.npz on a further run (run 6, its own
every-5th-block hold-out), against the solvegp map before the resume and a fresh VIPS replay
of run 6 alone, scored on run 6's held-out blocks and on runs 1-5's.

``--max-seconds S`` keeps the first S seconds of every run (a reduced slice; the table says so).

    python benchmarks/solvegp_magnetic.py [--max-seconds 120] [--models solvegp,vips,exact,acgp]
        [--set solvegp.epochs=20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acgp_magnetic import ACGP_MAX_POINTS, ACGP_REFINEMENTS, EXACT_POINTS
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

from gp_mapper.commands.fit import fit_bag
from gp_mapper.commands.replay import replay_bag
from gp_mapper.engine import build_model, model_entry, model_from_state
from gp_mapper.engine.core.device import resolve_device, set_cpu_threads
from gp_mapper.io import load_aalto_sequence, read_bag
from gp_mapper.io.bag_convert import SEQUENCE_GAP_S
from gp_mapper.io.bag_writer import BASE_EPOCH_NS, FieldStream, PoseStream, write_field_pose_bag
from gp_mapper.mapping.batch_fit import FITTED_STATE, model_spec, split_overrides
from gp_mapper.mapping.inputs import collect_samples
from gp_mapper.mapping.map_file import load_map
from gp_mapper.mapping.params_file import config_from_params_file, parse_overrides

TRAIN_RUNS = (1, 2, 3, 4, 5)
HANDOFF_RUN = 6
# Held-out time blocks: every 5th block of 10 s.
BLOCK_S = 10.0
HOLD_OUT_EVERY = 5
MODELS = ("solvegp", "vips", "exact", "acgp")
NS_PER_S = 1_000_000_000
TESLA_PER_MICROTESLA = 1e-6


@dataclass(frozen=True)
class Runs:
    """Runs on one time line: the training bag's arrays and the held-out points."""

    stamps_ns: np.ndarray  # [N] every sample
    loc_m: np.ndarray  # [N, 2]
    mag_ut: np.ndarray  # [N, 3]
    held: np.ndarray  # [N] bool: in a held-out block

    @property
    def test(self) -> tuple[np.ndarray, np.ndarray]:
        """Held-out inputs [T, 2] and ‖B‖ [T] µT."""
        return self.loc_m[self.held], np.linalg.norm(self.mag_ut[self.held], axis=1)


def held_out_blocks(time_s: np.ndarray) -> np.ndarray:
    """True for the samples of every ``HOLD_OUT_EVERY``-th ``BLOCK_S`` block from the start."""
    block = np.floor((time_s - time_s[0]) / BLOCK_S).astype(np.int64)
    return block % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1


def load_runs(runs: tuple[int, ...], max_seconds: float | None) -> Runs:
    """The runs joined on one time line (as ``convert_aalto``), with their held-out masks."""
    parts, start_ns = [], BASE_EPOCH_NS
    for run in runs:
        seq = load_aalto_sequence(aalto_dir(), seq=run)
        t = seq.time_s
        keep = np.ones(t.size, dtype=bool) if max_seconds is None else t - t[0] <= max_seconds
        t, loc, mag = t[keep], seq.loc_m[keep], seq.mag_ut[keep]
        stamps = start_ns + np.round((t - t[0]) * NS_PER_S).astype(np.int64)
        parts.append((stamps, loc, mag, held_out_blocks(t)))
        start_ns = int(stamps[-1]) + round(SEQUENCE_GAP_S * NS_PER_S)
    return Runs(*(np.concatenate([p[i] for p in parts]) for i in range(4)))


def write_bag(runs: Runs, bag: Path) -> int:
    """The kept blocks' field and every pose; returns the number of field samples written."""
    train = ~runs.held
    position = np.column_stack([runs.loc_m, np.zeros(runs.held.size)])
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (runs.held.size, 1))
    write_field_pose_bag(
        bag,
        FieldStream(
            runs.stamps_ns[train], runs.mag_ut[train] * TESLA_PER_MICROTESLA, "imu_link", None
        ),
        PoseStream(runs.stamps_ns, position, quat, "map"),
        force=True,
    )
    return int(train.sum())


def scores(mean: np.ndarray, var_y: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """RMSE, NLPD, 95 % coverage and mean 95 % width [µT] of y under N(mean, var_y)."""
    return {
        "rmse": rmse(mean, y),
        "nlpd": nlpd(mean, var_y, y),
        "coverage95": coverage95(mean, var_y, y),
        "width95": width95(var_y),
    }


def score(state: Path, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The scores of the model in ``state`` on (X, y), the noise added to the latent variance."""
    model = model_from_state(load_map(state).engine_state, device="cpu")
    mean, var = model.predict(torch.as_tensor(X, dtype=torch.float64))
    return scores(mean.numpy(), var.numpy() + model.posterior.noise_variance, y)


def fit_row(
    model: str, bag: Path, out: Path, X: np.ndarray, y: np.ndarray, overrides: dict[str, Any]
) -> dict[str, Any]:
    """``gp-mapper fit --model model`` on ``bag``, scored on (X, y).

    A fit command that raises is a row with the error (the other models still run); a batch
    model is then fitted once more in-process on the same samples (``fit_in_process``), so
    that the model itself is scored even where writing its map failed.
    """
    start = time.perf_counter()
    try:
        result = fit_bag(
            bag,
            out,
            model=model,
            max_samples=EXACT_POINTS if model == "exact" else 0,
            overrides=overrides,
            progress=False,
            max_minutes=0,  # the protocol's fit, not the command's budget
        )
    except Exception as err:  # a benchmark row, not a crash: the error is the finding
        seconds = time.perf_counter() - start
        reason = f"gp-mapper fit raised {type(err).__name__}: {err}"
        print(f"  {model}: {reason}", file=sys.stderr, flush=True)
        row = {"accepted": False, "reason": reason, "seconds": seconds}
        if model_entry(model).kind == "batch":
            row["in_process"] = fit_in_process(model, bag, X, y, overrides)
        return row
    seconds = time.perf_counter() - start
    report = result.report
    if result.snapshot is None:
        return {"accepted": False, "reason": report.get("reason"), "seconds": seconds}
    state = out / FITTED_STATE if (out / FITTED_STATE).is_file() else result.outputs.state
    return {
        "accepted": True,
        "N": int(report.get("samples_used", 0)),
        "M": report.get("M"),
        **score(state, X, y),
        "seconds": seconds,
        "state": str(result.outputs.state),
    }


def fit_in_process(
    model: str, bag: Path, X: np.ndarray, y: np.ndarray, overrides: dict[str, Any]
) -> dict[str, Any]:
    """The fit ``gp-mapper fit`` runs (same samples, settings and builder), without its files."""
    node_values, settings = split_overrides(overrides)
    config = config_from_params_file(None, **{"pose_source": "topic", **node_values})
    start = time.perf_counter()
    samples = collect_samples(read_bag(bag, pose_type="auto"), config)
    gp = build_model(model_spec(config, model, settings), config.input_dims)
    report = gp.fit(samples.X, samples.y)
    seconds = time.perf_counter() - start
    if not report.accepted:
        return {"accepted": False, "reason": report.reason, "seconds": seconds}
    mean, var = gp.predict(torch.as_tensor(X, dtype=torch.float64))
    m = mean.cpu().numpy()
    noise = getattr(gp, "noise_variance", None)
    var_y = var.cpu().numpy() + (gp.posterior.noise_variance if noise is None else noise)
    return {
        "accepted": True,
        "N": len(samples.y),
        "M": report.m_after,
        **scores(m, var_y, y),
        "seconds": seconds,
    }


def for_model(model: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides a model takes: ``solve_*`` only for solvegp, ``acgp_*`` only for acgp."""
    out = {k: v for k, v in overrides.items() if not k.startswith(("solve_", "acgp_"))}
    prefix = {"solvegp": "solve_", "acgp": "acgp_"}.get(model)
    if prefix:
        out.update({k: v for k, v in overrides.items() if k.startswith(prefix)})
    return out


def cell(row: dict[str, Any], key: str, digits: int = 2) -> str:
    return f"{row[key]:.{digits}f}" if row.get("accepted", True) and key in row else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models")
    parser.add_argument(
        "--max-seconds", type=float, help="keep the first S seconds of each run (a reduced slice)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a node or model setting for every fit (solve_* to solvegp, acgp_* to acgp)",
    )  # fmt: skip
    parser.add_argument("--no-handoff", action="store_true", help="skip the run-6 continuation")
    parser.add_argument(
        "--scratch", type=Path, default=Path("/tmp/gp_mapper_solvegp_magnetic"),
        help="where the bags and fitted maps go",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not aalto_dir().is_dir():
        print(f"no Aalto data at {aalto_dir()}: nothing to run", file=sys.stderr)
        return 1
    set_cpu_threads(args.threads)
    device = resolve_device(args.device)
    print(header("SOLVE-GP on the Aalto magnetometer runs 1-5", device, torch.float64))
    sliced = args.max_seconds is not None
    if sliced:
        print(f"REDUCED SLICE: the first {args.max_seconds:g} s of every run, not whole runs")
    overrides = {
        "acgp.max_points": ACGP_MAX_POINTS,
        "acgp.refinements": ACGP_REFINEMENTS,
        **parse_overrides(args.set),
    }
    args.scratch.mkdir(parents=True, exist_ok=True)
    runs = load_runs(TRAIN_RUNS, args.max_seconds)
    bag = args.scratch / "aalto_12345_blocks.mcap"
    n_train = write_bag(runs, bag)
    X_test, y_test = runs.test
    print(
        f"runs {TRAIN_RUNS}: {runs.held.size} samples, {n_train} in the bag, "
        f"{y_test.size} held out (every {HOLD_OUT_EVERY}th {BLOCK_S:g}-s block)"
    )
    results: dict[str, Any] = {}
    for model in args.models.split(","):
        print(f"  fitting {model} ...", file=sys.stderr, flush=True)
        row = fit_row(model, bag, args.scratch / model, X_test, y_test, for_model(model, overrides))
        results[model] = row
        if model == "solvegp" and row["accepted"]:
            # The same fit as the stream carries it (map_state.npz): the handoff's start.
            results["solvegp→stream"] = {
                "accepted": True,
                "N": row["N"],
                "M": "-",
                **score(Path(row["state"]), X_test, y_test),
                "seconds": row["seconds"],
            }
        print(f"  {model}: {json.dumps(row, default=str)}", file=sys.stderr, flush=True)
    for name in list(results):
        if "in_process" in results[name]:
            results[f"{name} (in-process)"] = results[name]["in_process"]
    table = [
        [name, str(r.get("N", "-")), str(r.get("M", "-")), cell(r, "rmse"), cell(r, "nlpd"),
         cell(r, "coverage95", 3), cell(r, "width95", 1), f"{r['seconds']:.0f}",
         "" if r.get("accepted") else str(r.get("reason"))[:90]]
        for name, r in results.items()
    ]  # fmt: skip
    print(f"\nheld-out blocks of runs 1-5 ({y_test.size} readings, ‖B‖ std {y_test.std():.2f} µT)")
    columns = ["model", "N", "M", "RMSE µT", "NLPD", "coverage95", "width95 µT", "seconds",
               "failure"]  # fmt: skip
    print(format_table(columns, table))

    handoff: dict[str, Any] = {}
    solve = results.get("solvegp", {})
    if not args.no_handoff and solve.get("accepted"):  # needs the fit's map_state.npz
        later = load_runs((HANDOFF_RUN,), args.max_seconds)
        later_bag = args.scratch / f"aalto_{HANDOFF_RUN}_blocks.mcap"
        write_bag(later, later_bag)
        X6, y6 = later.test
        node = for_model("vips", overrides)
        start = time.perf_counter()
        resumed = replay_bag(
            later_bag, args.scratch / "handoff", resume=Path(solve["state"]), overrides=node,
            progress=False,
        )  # fmt: skip
        resumed_s = time.perf_counter() - start
        start = time.perf_counter()
        fresh = replay_bag(later_bag, args.scratch / "fresh6", overrides=node, progress=False)
        fresh_s = time.perf_counter() - start
        rows = {
            "solvegp map (before)": (Path(solve["state"]), 0.0),
            "solvegp map + VIPS on run 6 (resume)": (resumed.outputs.state, resumed_s),
            "VIPS on run 6 alone": (fresh.outputs.state, fresh_s),
        }
        table = []
        for name, (state, seconds) in rows.items():
            on6, on15 = score(state, X6, y6), score(state, X_test, y_test)
            handoff[name] = {"run6": on6, "runs1to5": on15, "seconds": seconds}
            table.append(
                [name, f"{on6['rmse']:.2f}", f"{on6['nlpd']:.2f}",
                 f"{on6['coverage95']:.3f} / {on6['width95']:.1f}", f"{on15['rmse']:.2f}",
                 f"{on15['nlpd']:.2f}", f"{on15['coverage95']:.3f} / {on15['width95']:.1f}",
                 f"{seconds:.0f}"]
            )  # fmt: skip
        print(f"\nhandoff: continued on run {HANDOFF_RUN} ({y6.size} held-out readings)")
        columns = ["map", "run 6 RMSE", "run 6 NLPD", "run 6 cov95 / width95", "runs 1-5 RMSE",
                   "runs 1-5 NLPD", "runs 1-5 cov95 / width95", "seconds"]  # fmt: skip
        print(format_table(columns, table))
    write_json(
        args.json,
        {
            "device": str(device),
            "reduced_slice_s": args.max_seconds,
            "held_out": int(y_test.size),
            "train_samples": n_train,
            "models": results,
            "handoff": handoff,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
