"""Why the tiled map's intervals miss on the office floor: exact GPs on boxes of the validation
floor, each with another model of what the readings carry besides the field.

Protocol. The validation floor of ``building.py`` (``gp_mapper.io.building``, seed 1, 20
minutes at 100 Hz, per-pass offsets of 1 µT) is cut into boxes of 12 × 12 m (``--boxes``,
south-west corners). In each box the walk's readings are averaged per 10-cm cell and pass (as
the map's cells do), and an exact GP with a constant mean is fitted by L-BFGS on the marginal
likelihood of those cell means (white noise divided by each cell's count), for each model:

- ``field``: one Matérn-5/2 field, the node's kernel;
- ``field_m32``: one Matérn-3/2 field (rougher);
- ``two_scales``: two Matérn-5/2 fields, the second starting at a 0.2-m lengthscale;
- ``time_drift``: the field plus a Matérn-5/2 over the reading's time (a drifting offset);
- ``time_offset_measured``: the field plus an Ornstein–Uhlenbeck offset over the reading's
  time (exponential covariance), its variance held at the measured between-pass variance
  and its time scale fitted: the pass error as a state carried along the stream, no labels;
- ``pass_offsets``: the field plus one offset per pass (a covariance σ²_p where two cells
  share a pass), the floor's own error model; it needs the walk's pass labels, which a robot
  does not have;
- ``pass_offsets_measured``: the same with σ²_p held at the between-pass variance the node
  measures on the whole walk (``mapping.pass_noise``, as ``pass_noise_variance: auto``);
- ``turn_offsets`` and ``turn_offsets_measured``: the same two with labels a robot can make,
  its own path cut into traversals (``turn_segments``: a cut where the direction of travel
  over the next ``--turn-span`` metres differs by more than ``--turn-deg`` from that over the
  last as many, at the sharpest such point, or after a stop of 5 s); the cells are then
  averaged per cell and label;
- ``turn_pure_measured`` (a diagnosis): the path's segments cut again wherever the walk's pass
  changes, so no label holds two passes; σ²_p held.

Each model predicts the field alone at the cells within 0.3 m of the path (the benchmark's
scored cells), scored against the true ‖B‖: RMSE and 95 % coverage of N(mean, latent
variance). No target; the table says which error model the floor's intervals need.

    python benchmarks/floor_noise_model.py [--boxes 20,0;40,20;5,25] [--seed 1]
        [--turn-span 3] [--turn-deg 45] [--json F]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import numpy as np
import torch
from common import format_table, run_env, write_json

from gp_mapper.io.building import (
    building_walk,
    make_building_world,
    path_cells,
    simulate_building_run,
)

MODELS = (
    "field", "field_m32", "two_scales", "time_drift", "time_offset_measured", "pass_offsets",
    "pass_offsets_measured", "turn_offsets", "turn_offsets_measured", "turn_pure_measured",
)  # fmt: skip
# Models whose cells and offsets follow the path's own segmentation, not the walk's passes.
SEGMENTED = ("turn_offsets", "turn_offsets_measured")
# Steps the segmentation resamples the path at [m], and a stop that ends a traversal [s].
TURN_STEP_M = 0.25
STOP_S = 5.0
BOX_M = 12.0
CELL_M = 0.1
PATH_RADIUS_M = 0.3
DURATION_S = 1200.0
# Cells this far inside a box's edge are scored (the GP sees no data beyond the box).
MARGIN_M = 0.5
# Starting values: field variance [µT²], lengthscale [m], white noise per reading [µT²], the
# nuisance's variance [µT²] and time scale [s], the second field's variance and lengthscale.
START = {"lv": 30.0, "ll": 0.7, "ln": 0.5, "dv": 1.0, "dl": 20.0, "sv": 5.0, "sl": 0.2}
JITTER = 1e-8


def matern(a: torch.Tensor, b: torch.Tensor, ell: torch.Tensor, nu: float) -> torch.Tensor:
    r = torch.cdist(a / ell, b / ell)
    if nu == 1.5:
        s = math.sqrt(3.0) * r
        return (1.0 + s) * torch.exp(-s)
    s = math.sqrt(5.0) * r
    return (1.0 + s + s * s / 3.0) * torch.exp(-s)


def turn_segments(position: np.ndarray, time_s: np.ndarray, span_m: float, turn_deg: float
                  ) -> np.ndarray:  # fmt: skip
    """[N] labels of the path's traversals, from the path alone (no pass labels).

    The path is resampled every TURN_STEP_M of travel; at each step the direction of travel
    over the next ``span_m`` is compared with that over the last ``span_m``; where they differ
    by more than ``turn_deg``, the sharpest step of each such stretch starts a new label. A
    stop of STOP_S or more starts one too.
    """
    step = np.linalg.norm(np.diff(position, axis=0), axis=1)
    travel = np.concatenate([[0.0], np.cumsum(step)])
    marks = np.arange(0.0, travel[-1], TURN_STEP_M)
    at = np.searchsorted(travel, marks)  # the first reading at or past each mark
    pts = position[np.minimum(at, len(position) - 1)]
    k = max(round(span_m / TURN_STEP_M), 1)
    angle = np.zeros(len(pts))
    if len(pts) > 2 * k:
        before = pts[k:-k] - pts[: -2 * k]
        after = pts[2 * k :] - pts[k:-k]
        cos = np.einsum("ij,ij->i", before, after) / np.maximum(
            np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1), 1e-9
        )
        angle[k:-k] = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    turning = angle > turn_deg
    cuts = []
    start = None
    for i, flag in enumerate(np.append(turning, False)):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            cuts.append(start + int(np.argmax(angle[start:i])))
            start = None
    new = np.zeros(len(position), dtype=bool)
    new[at[cuts]] = True
    # STOP_S or more between two moving readings (standing still, or no readings): a new label.
    moving = np.flatnonzero(np.concatenate([[True], step > 1e-3]))
    new[moving[1:][np.diff(time_s[moving]) >= STOP_S]] = True
    return np.cumsum(new)


def measured_pass_variance(run: Any) -> float:
    """σ²_pass as the node measures it on the whole walk (``pass_noise_variance: auto``)."""
    from gp_mapper.mapping.pass_noise import PassNoiseEstimator

    estimator = PassNoiseEstimator()
    y = np.linalg.norm(run.mag_ut, axis=1)
    for rows in np.array_split(np.arange(len(y)), max(len(y) // 400, 1)):
        estimator.add(run.position_m[rows], y[rows], run.time_s[rows], None)
    return float(estimator.estimate().variance)


class Box:
    """One box's cell means (position, time, label, count) and its scored cells; the cells are
    averaged per cell and ``labels`` (the walk's passes, or the path's own segments)."""

    def __init__(
        self, run: Any, world: Any, corner: tuple[float, float], labels: np.ndarray
    ) -> None:
        lo = np.asarray(corner, dtype=np.float64)
        hi = lo + BOX_M
        inside = np.all((run.position_m >= lo) & (run.position_m < hi), axis=1)
        pos, t, passes = run.position_m[inside], run.time_s[inside], labels[inside]
        y = np.linalg.norm(run.mag_ut[inside], axis=1)
        keys = np.column_stack([np.floor(pos / CELL_M).astype(np.int64), passes])
        _, inverse, count = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        inverse = inverse.ravel()

        def mean(v: np.ndarray) -> np.ndarray:
            out = np.zeros((count.size, *v.shape[1:]))
            np.add.at(out, inverse, v)
            return out / (count if v.ndim == 1 else count[:, None])

        self.X = torch.as_tensor(mean(pos))
        self.y = torch.as_tensor(mean(y))
        self.t = torch.as_tensor(mean(t))[:, None]
        self.count = torch.as_tensor(count, dtype=torch.float64)
        cell_pass = torch.as_tensor(mean(passes.astype(np.float64))).round()
        self.same_pass = (cell_pass[:, None] == cell_pass[None, :]).double()
        self.passes = int(np.unique(passes).size)
        scored = path_cells(run.position_m, CELL_M, PATH_RADIUS_M)
        keep = np.all((scored >= lo + MARGIN_M) & (scored < hi - MARGIN_M), axis=1)
        self.Xs = torch.as_tensor(scored[keep])
        self.truth = world.norm_at(scored[keep])


def fit_and_score(box: Box, model: str, pass_variance: float) -> dict[str, Any]:
    """Fit the model's θ on the box's cell means; RMSE and coverage of the field alone.
    ``pass_variance``: σ²_p of the ``*_measured`` models, held."""
    start = dict(START, dv=pass_variance) if model.endswith("_measured") else START
    raw = {k: torch.tensor(math.log(v), dtype=torch.float64, requires_grad=True)
           for k, v in start.items()}  # fmt: skip
    nu = 1.5 if model == "field_m32" else 2.5
    extra = {"two_scales": ["sv", "sl"], "time_drift": ["dv", "dl"], "pass_offsets": ["dv"],
             "turn_offsets": ["dv"], "time_offset_measured": ["dl"]}  # fmt: skip
    names = ["lv", "ll", "ln", *extra.get(model, [])]
    mu = box.y.mean()

    def field(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        k = raw["lv"].exp() * matern(a, b, raw["ll"].exp(), nu)
        if model == "two_scales":
            k = k + raw["sv"].exp() * matern(a, b, raw["sl"].exp(), 2.5)
        return k

    def gram() -> torch.Tensor:
        k = field(box.X, box.X) + torch.diag(raw["ln"].exp() / box.count + JITTER)
        if model == "time_drift":
            k = k + raw["dv"].exp() * matern(box.t, box.t, raw["dl"].exp(), 2.5)
        if model == "time_offset_measured":
            k = k + raw["dv"].exp() * torch.exp(-torch.cdist(box.t, box.t) / raw["dl"].exp())
        if model in ("pass_offsets", "pass_offsets_measured", "turn_pure_measured", *SEGMENTED):
            k = k + raw["dv"].exp() * box.same_pass
        return k

    params = [raw[n] for n in names]
    optimiser = torch.optim.LBFGS(params, max_iter=200, line_search_fn="strong_wolfe")
    residual = (box.y - mu)[:, None]

    def loss() -> torch.Tensor:
        optimiser.zero_grad()
        chol = torch.linalg.cholesky(gram())
        value = 0.5 * (residual * torch.cholesky_solve(residual, chol)).sum()
        value = value + torch.log(torch.diagonal(chol)).sum()
        value.backward()
        return value

    optimiser.step(loss)
    with torch.no_grad():
        chol = torch.linalg.cholesky(gram())
        cross = field(box.Xs, box.X)
        mean = mu + cross @ torch.cholesky_solve(residual, chol)[:, 0]
        v = torch.linalg.solve_triangular(chol, cross.T, upper=False)
        prior = field(box.Xs[:1], box.Xs[:1])[0, 0]
        var = torch.clamp(prior - (v * v).sum(0), min=1e-12)
    err = mean.numpy() - box.truth
    sd = np.sqrt(var.numpy())
    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "coverage95": float(np.mean(np.abs(err) <= 1.96 * sd)),
        "sd_median": float(np.median(sd)),
        "theta": {n: float(raw[n].exp()) for n in names},
        **({"pass_variance_held": pass_variance} if model.endswith("_measured") else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", default="20,0;40,20;5,25",
                        help="south-west corners of the 12-m boxes, 'x,y;x,y'")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="the floor (1: validation)")
    parser.add_argument(
        "--turn-span",
        type=float,
        default=3.0,
        help="the segmentation's span of travel either side of a turn [m]",
    )
    parser.add_argument(
        "--turn-deg", type=float, default=45.0, help="the segmentation's turn [degrees]"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    env = run_env()
    corners = [tuple(float(v) for v in b.split(",")) for b in args.boxes.split(";")]
    world = make_building_world(args.seed)
    walk = building_walk(world, duration_s=DURATION_S, seed=args.seed)
    run = simulate_building_run(world, walk, seed=args.seed)
    segments = turn_segments(run.position_m, run.time_s, args.turn_span, args.turn_deg)
    changes = (np.diff(segments) != 0) | (np.diff(run.pass_index) != 0)
    pure = np.concatenate([[0], np.cumsum(changes)])
    pass_variance = measured_pass_variance(run)
    passes = int(run.pass_index.max()) + 1
    labels = int(segments.max()) + 1
    # The share of the readings in their segment's most common pass (1: no segment holds two).
    purity = sum(np.bincount(run.pass_index[segments == s]).max() for s in range(labels))
    purity /= len(segments)
    print(f"  the walk: {passes} passes, the path cut into {labels} segments; "
          f"purity {purity:.3f}; σ²_pass measured {pass_variance:.2f} µT²",
          file=sys.stderr)  # fmt: skip
    results: dict[str, Any] = {
        "seed": args.seed, "boxes": {}, "passes": passes, "segments": labels,
        "turn_span_m": args.turn_span, "turn_deg": args.turn_deg,
        "pass_variance_measured": pass_variance, "segment_purity": purity,
    }  # fmt: skip
    began = time.perf_counter()
    for i, corner in enumerate(corners):
        box = Box(run, world, corner, run.pass_index)
        cut = Box(run, world, corner, segments)
        split = Box(run, world, corner, pure)
        name = f"{corner[0]:g},{corner[1]:g}"
        entry = {"cells": int(box.y.numel()), "scored": int(box.truth.size),
                 "passes": box.passes, "segments": cut.passes,
                 "constant": float(np.std(box.truth)), "models": {}}  # fmt: skip
        for model in MODELS:
            on = cut if model in SEGMENTED else split if model == "turn_pure_measured" else box
            entry["models"][model] = fit_and_score(on, model, pass_variance)
        results["boxes"][name] = entry
        elapsed = time.perf_counter() - began
        eta = elapsed / (i + 1) * (len(corners) - i - 1)
        print(f"  box {name}: {box.y.numel()} cells ({i + 1}/{len(corners)}, ETA {eta:.0f} s)",
              file=sys.stderr)  # fmt: skip
    header = ["box", "cells / passes / segments", "const µT",
              *[f"{m}: RMSE / cov95" for m in MODELS]]  # fmt: skip
    table = []
    for name, entry in results["boxes"].items():
        table.append([name, f"{entry['cells']} / {entry['passes']} / {entry['segments']}",
                      f"{entry['constant']:.2f}",
                      *[f"{entry['models'][m]['rmse']:.2f} / {entry['models'][m]['coverage95']:.3f}"
                        for m in MODELS]])  # fmt: skip
    print(f"# the validation floor (seed {args.seed}): the field predicted within 0.3 m of the "
          "path, exact GPs per 12-m box")  # fmt: skip
    print(format_table(header, table))
    if args.json:
        results["env"] = env
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
