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
- ``pass_offsets``: the field plus one offset per pass (a covariance σ²_p where two cells
  share a pass), the floor's own error model; it needs the walk's pass labels, which a robot
  does not have.

Each model predicts the field alone at the cells within 0.3 m of the path (the benchmark's
scored cells), scored against the true ‖B‖: RMSE and 95 % coverage of N(mean, latent
variance). No target; the table says which error model the floor's intervals need.

    python benchmarks/floor_noise_model.py [--boxes 20,0;40,20;5,25] [--seed 1] [--json F]
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

MODELS = ("field", "field_m32", "two_scales", "time_drift", "pass_offsets")
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


class Box:
    """One box's cell means (position, time, pass, count) and its scored cells."""

    def __init__(self, run: Any, world: Any, corner: tuple[float, float]) -> None:
        lo = np.asarray(corner, dtype=np.float64)
        hi = lo + BOX_M
        inside = np.all((run.position_m >= lo) & (run.position_m < hi), axis=1)
        pos, t, passes = run.position_m[inside], run.time_s[inside], run.pass_index[inside]
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


def fit_and_score(box: Box, model: str) -> dict[str, Any]:
    """Fit the model's θ on the box's cell means; RMSE and coverage of the field alone."""
    raw = {k: torch.tensor(math.log(v), dtype=torch.float64, requires_grad=True)
           for k, v in START.items()}  # fmt: skip
    nu = 1.5 if model == "field_m32" else 2.5
    extra = {"two_scales": ["sv", "sl"], "time_drift": ["dv", "dl"], "pass_offsets": ["dv"]}
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
        if model == "pass_offsets":
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", default="20,0;40,20;5,25",
                        help="south-west corners of the 12-m boxes, 'x,y;x,y'")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="the floor (1: validation)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    env = run_env()
    corners = [tuple(float(v) for v in b.split(",")) for b in args.boxes.split(";")]
    world = make_building_world(args.seed)
    walk = building_walk(world, duration_s=DURATION_S, seed=args.seed)
    run = simulate_building_run(world, walk, seed=args.seed)
    results: dict[str, Any] = {"seed": args.seed, "boxes": {}}
    began = time.perf_counter()
    for i, corner in enumerate(corners):
        box = Box(run, world, corner)
        name = f"{corner[0]:g},{corner[1]:g}"
        entry = {"cells": int(box.y.numel()), "scored": int(box.truth.size), "passes": box.passes,
                 "constant": float(np.std(box.truth)), "models": {}}  # fmt: skip
        for model in MODELS:
            entry["models"][model] = fit_and_score(box, model)
        results["boxes"][name] = entry
        elapsed = time.perf_counter() - began
        eta = elapsed / (i + 1) * (len(corners) - i - 1)
        print(f"  box {name}: {box.y.numel()} cells ({i + 1}/{len(corners)}, ETA {eta:.0f} s)",
              file=sys.stderr)  # fmt: skip
    header = ["box", "cells / passes", "const µT",
              *[f"{m}: RMSE / cov95" for m in MODELS]]  # fmt: skip
    table = []
    for name, entry in results["boxes"].items():
        table.append([name, f"{entry['cells']} / {entry['passes']}", f"{entry['constant']:.2f}",
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
