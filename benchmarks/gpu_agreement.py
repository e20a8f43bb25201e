"""Every registered model trained and queried on a device and on the CPU: how far apart they land.

Each model of the registry is built from the same settings on both devices, trained on the same
small problem (streaming models in three windows, batch models by one fit) and asked for its
latent mean and variance at fixed test points. Two modes:

- ``fixed_theta``: the model's ``exact_settings`` (θ kept, every point its own support), so the
  difference is the linear algebra's alone;
- ``fitted``: a few hyperparameter iterations as well, so the optimiser's path is compared too.

The figure per model, dtype and mode is the largest absolute difference over the largest
magnitude of the CPU's output (``max|a − b| / max|b|``), for the mean and the variance apart.

A fit can be more sensitive to rounding than the device is different: a CG solve stopped at a
tolerance ends an iteration earlier or later, a few Adam epochs on an ill-conditioned bound
amplify the last bit. So the fitted mode also reports the CPU against itself on inputs
scaled by 1 + 1e-14 (``sensitivity``): a device difference of that order is the fit's, not the
device's.

    python benchmarks/gpu_agreement.py [--device cuda] [--dtypes float64,float32] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
import torch

from gp_mapper.engine import EngineSpec, build_model, model_entry, model_names

N = 60
INPUT_DIM = 2
MODES = ("fixed_theta", "fitted")
# A perturbation of the inputs at the level of rounding (about 50 units in the last place).
ROUNDING_SCALE = 1.0 + 1e-14
# A few iterations of each model's own fit, small ACGP blocks: seconds per model on a CPU.
QUICK: dict[str, Any] = {
    "fit_iterations": 3, "acgp.block_size": 20, "solvegp.epochs": 3, "cagp.epochs": 3,
    "gam.iterations": 3, "kernel": "se", "lengthscale": 0.4, "constant_variance": 4.0,
}  # fmt: skip
TEST_POINTS = np.array([[0.5, 0.5], [1.5, 2.5], [2.9, 0.1], [1.1, 1.9], [8.0, 8.0]])


def problem(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs [N, 2] and targets: y [N], or y [N, 3] for a model of the field vector."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 3.0, (N, INPUT_DIM))
    y = 2.0 + np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.standard_normal(N)
    if model_entry(name).target == "vector":
        y = np.stack([y, 1.0 - np.cos(X[:, 0]) + 0.05 * rng.standard_normal(N), -0.5 * y], 1)
    return X, y


def trained_prediction(
    name: str, device: str, dtype: str, mode: str, scale: float = 1.0
) -> dict[str, Any]:
    """Train ``name`` on ``device`` (inputs times ``scale``) and return its predictions (CPU
    float64 arrays) and size."""
    settings = {**QUICK, "model": name, "device": device, "dtype": dtype}
    if mode == "fixed_theta":
        settings.update(model_entry(name).exact_settings(N))
    model = build_model(EngineSpec(**settings), INPUT_DIM)
    X, y = problem(name)
    X = X * scale
    start = time.perf_counter()
    if model_entry(name).kind == "streaming":
        reports = [model.update(X[p], y[p]) for p in np.array_split(np.arange(N), 3)]
    else:
        reports = [model.fit(X, y)]
    rejected = [r.reason for r in reports if not r.accepted]
    mean, var = model.predict(torch.as_tensor(TEST_POINTS))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return {
        "mean": mean.detach().double().cpu().numpy(),
        "var": var.detach().double().cpu().numpy(),
        "support": int(model.posterior.support.shape[0]),
        "device": str(model.device),
        "rejected": rejected,
        "seconds": time.perf_counter() - start,
    }


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max|a − b| / max|b|``; inf where either holds a NaN."""
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def compare(name: str, device: str, dtype: str, mode: str) -> dict[str, Any]:
    here = trained_prediction(name, "cpu", dtype, mode)
    there = trained_prediction(name, device, dtype, mode)
    row: dict[str, Any] = {}
    if mode == "fitted":
        nudged = trained_prediction(name, "cpu", dtype, mode, ROUNDING_SCALE)
        row["sensitivity"] = max(
            relative_difference(nudged["mean"], here["mean"]),
            relative_difference(nudged["var"], here["var"]),
        )
    return {
        **row,
        "mean_rel": relative_difference(there["mean"], here["mean"]),
        "var_rel": relative_difference(there["var"], here["var"]),
        "support": [here["support"], there["support"]],
        "devices": [here["device"], there["device"]],
        "rejected": here["rejected"] + there["rejected"],
        "seconds": [round(here["seconds"], 3), round(there["seconds"], 3)],
    }


def agreement(
    device: str,
    dtypes: tuple[str, ...] = ("float64", "float32"),
    names: tuple[str, ...] | None = None,
    fitted_dtypes: tuple[str, ...] = ("float64",),
    on_row: Any = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {"<dtype>/<mode>": comparison}}``; ``on_row(result)`` after each comparison.

    The fitted mode runs for ``fitted_dtypes`` only: in float32 an optimiser's path parts from
    the float64 one after a few steps on any device, so it says little about the device.
    """
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names or model_names():
        for dtype in dtypes:
            for mode in MODES:
                if mode == "fitted" and dtype not in fitted_dtypes:
                    continue
                key = f"{dtype}/{mode}"
                try:
                    row = compare(name, device, dtype, mode)
                except Exception as exc:  # one model's failure is a result
                    row = {"error": f"{type(exc).__name__}: {exc}"}
                result.setdefault(name, {})[key] = row
                if on_row is not None:
                    on_row(result)
    return result


def worst(result: dict[str, dict[str, dict[str, Any]]], key: str) -> float:
    """The largest relative difference over models and both outputs for one ``dtype/mode``."""
    values = [
        max(row["mean_rel"], row["var_rel"]) if "error" not in row else float("inf")
        for rows in result.values()
        for k, row in rows.items()
        if k == key
    ]
    return max(values, default=float("nan"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="the device compared with the CPU")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--models", help="comma-separated subset of the registry")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    names = tuple(args.models.split(",")) if args.models else None
    result = agreement(args.device, tuple(args.dtypes.split(",")), names)
    for name, rows in result.items():
        for key, row in rows.items():
            if "error" in row:
                print(f"{name:10s} {key:20s} ERROR {row['error']}")
            else:
                extra = (
                    f"  (rounding sensitivity {row['sensitivity']:.1e})"
                    if "sensitivity" in row
                    else ""
                )
                figures = f"mean {row['mean_rel']:.1e}  var {row['var_rel']:.1e}"
                print(f"{name:10s} {key:20s} {figures}{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
