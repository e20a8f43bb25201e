"""Why ACGP's stopping rule does not fire on the magnetometer: its evidence bounds block by block.

ACGP (Bartels et al. 2023) stops its Cholesky when the upper and lower bounds on log p(y) of
all N readings agree to a relative tolerance r (``acgp_rel_tol``, 0.01). On Aalto invensense
runs 1 and 2 (‖B‖ on (x, y), 17 980 readings at 50 Hz; the readings as the data hold them, in
ACGP's seeded random order) this script runs the stopped Cholesky without fitting θ, at the
node's fitted θ on these runs (Matérn-5/2, ℓ 0.23 m, variance 100 µT², constant 515 µT²;
``calibration.py``) and at several noise variances σ², up to ``--points`` points, and prints
the bounds on the log-determinant (D) and the quadratic term (Q) at evenly spaced blocks, the
relative gap (U − L) / |midpoint| and whether the rule fired.

    python benchmarks/acgp_rule.py [--noise 0.001,0.12,1,2.5] [--points 6000] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import data_dir, format_table, write_json

RUNS = (1, 2)
# The node's fitted θ on these runs (calibration.py's stream): the θ a fit would start near.
THETA = {"kernel": "matern52", "lengthscale": 0.23, "kernel_variance": 100.0,
         "constant_variance": 515.0}  # fmt: skip
# Blocks shown per noise variance.
SHOWN = 6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noise", default="0.001,0.12,1,2.5", help="σ² values [µT²], comma list")
    parser.add_argument("--points", type=int, default=6000, help="the factor's cap (points)")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    from gp_mapper.engine import EngineSpec, build_model, set_cpu_threads
    from gp_mapper.io.aalto import load_aalto_sequence

    root = data_dir() / "magnetic" / "aalto-magnetic-data" / "data"
    if not root.exists():
        print(f"no Aalto data at {root} (set GP_MAPPER_DATA)", file=sys.stderr)
        return 2
    set_cpu_threads(1)
    runs = [load_aalto_sequence(root, seq=s) for s in RUNS]
    X = np.concatenate([r.loc_m for r in runs])
    y = np.concatenate([np.linalg.norm(r.mag_ut, axis=1) for r in runs])
    rows: list[list[str]] = []
    results: dict[str, Any] = {}
    for noise in (float(v) for v in args.noise.split(",")):
        spec = EngineSpec(model="acgp", noise_variance=noise, acgp_max_points=args.points,
                          device="cpu", **THETA)  # fmt: skip
        model = build_model(spec, 2)
        start = time.perf_counter()
        report = model.fit(X, y, optimise=False)
        seconds = time.perf_counter() - start
        history = model.history
        shown = history[:: max(1, len(history) // SHOWN)]
        results[f"{noise:g}"] = {
            "stopped": report.details["stopped"],
            "M": model.num_points,
            "relative_gap": report.details["relative_gap"],
            "seconds": seconds,
            "blocks": [{**b._asdict(), "relative_gap": b.relative_gap} for b in history],
        }
        for b in shown:
            rows.append([
                f"{noise:g}", str(b.s), f"{b.L_D:.0f} / {b.U_D:.0f}", f"{b.L_Q:.0f} / {b.U_Q:.0f}",
                f"{b.lower:.0f} / {b.upper:.0f}", f"{b.relative_gap:.3g}",
            ])  # fmt: skip
        fired = "fired" if report.details["stopped"] else "not fired"
        gap = report.details["relative_gap"]
        rows.append(
            [f"{noise:g}", f"stop at {model.num_points}", "", "", "", f"{gap:.3g} ({fired})"]
        )
    print(f"# ACGP's bounds on Aalto runs {RUNS} ({len(y)} readings), r = 0.01, cap {args.points}")
    print(format_table(["σ² µT²", "points s", "log det L / U", "quad L / U", "log p L / U",
                        "relative gap"], rows))  # fmt: skip
    write_json(args.json, {"runs": list(RUNS), "n": len(y), "theta": THETA, "noise": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
