"""How far along a pass the between-pass error of ‖B‖ stays the same: a diagnosis.

The node's ``pass_noise_variance: auto`` measures σ²_pass, the variance of the part of a
reading's error that differs between passes over the same place (``mapping/pass_noise.py``),
and the map treats it as independent from reading to reading. Whether that is right depends
on how far along a pass the error stays the same: one offset for the whole pass (a heading
residue on a straight corridor) is shared by every reading of the pass, and a map that counts
those readings as independent draws of it averages it away; an error that changes within
centimetres (a pose offset read against a steep field) is nearly independent between cells.

This script measures it. For readings of two passes at the same place (within ``--radius``,
at least ``--gap`` s apart) the difference δ = y_i − y_j holds the two passes' errors and the
white noise; the field cancels. For two such pairs of the same two passes (their readings
within 15 s of each other in time), half the mean squared difference of their δs, γ(s),
against s, how far apart along the path the two places are, is a variogram of the
between-pass error along the pass. Printed as γ(s) / var(δ): low and flat (the white noise's
share) where the error is one offset per pass, 1 where the two places' errors are
independent; and the length where it has gone half way, what the node reports as
``pass_noise_length_m`` (the same functions, ``mapping/pass_noise.py``).

Data: Aalto invensense runs 1–5 (the calibration's readings, every 5th at 50 Hz) and
``benchmarks/building.py``'s office floor (seed 0, 20 minutes, every 10th at 100 Hz; its
per-pass offsets are one constant per pass by construction).

    python benchmarks/pass_error.py [--json out.json]

JSON: {"places": {NAME: {"between_pairs", "half_mean_sq_delta", "bins_m", "ratio", "pairs",
"length_m"}}}.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import numpy as np
from common import data_dir, format_table, write_json

from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.io.building import building_walk, make_building_world, simulate_building_run
from gp_mapper.mapping.pass_noise import (
    LENGTH_BINS_M,
    between_pass_length,
    between_pass_variogram,
    same_place_pairs,
)


def measured(t: np.ndarray, xy: np.ndarray, y: np.ndarray, radius: float, gap: float) -> dict:
    """The variogram of one place's readings (``mapping.pass_noise.between_pass_variogram``,
    what the node's ``pass_noise_length_m`` is read from) and the length it gives."""
    i, j, between = same_place_pairs(xy, t, radius, gap)
    i, j = i[between], j[between]
    values = y.reshape(len(y), -1)
    ratio, counts = between_pass_variogram(xy, values, t, i, j)
    return {
        "between_pairs": len(i),
        "half_mean_sq_delta": float(np.mean((values[i] - values[j]) ** 2) / 2.0),
        "bins_m": list(LENGTH_BINS_M),
        "ratio": ratio.tolist(),
        "pairs": counts.tolist(),
        "length_m": between_pass_length(ratio, counts),
    }


def aalto_readings(thin: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs 1–5 on one time line (1000 s between runs): times, positions, ‖B‖."""
    root = data_dir() / "magnetic" / "aalto-magnetic-data" / "data"
    times, positions, norms, start = [], [], [], 0.0
    for run in (1, 2, 3, 4, 5):
        seq = load_aalto_sequence(root, "invensense", run)
        t = seq.time_s - seq.time_s[0] + start
        times.append(t[::thin])
        positions.append(seq.loc_m[::thin, :2])
        norms.append(np.linalg.norm(seq.mag_ut[::thin], axis=1))
        start = t[-1] + 1000.0
    return np.concatenate(times), np.concatenate(positions), np.concatenate(norms)


def floor_readings(thin: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The office floor's walk (20 minutes): times, positions, ‖B‖ as read."""
    world = make_building_world(seed)
    walk = building_walk(world, duration_s=1200.0, seed=seed)
    run = simulate_building_run(world, walk, seed=seed)
    return (
        walk.time_s[::thin],
        walk.position_m[::thin],
        np.linalg.norm(run.mag_ut[::thin], axis=1),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--radius", type=float, default=0.05, help="same place [m]")
    parser.add_argument("--gap", type=float, default=10.0, help="different passes [s apart]")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    places = {}
    sources = {"office floor, seed 0 (every 10th)": lambda: floor_readings(10)}
    if (data_dir() / "magnetic" / "aalto-magnetic-data" / "data" / "invensense").is_dir():
        sources = {"Aalto runs 1-5 (every 5th)": lambda: aalto_readings(5), **sources}
    else:
        print("no Aalto data (set GP_MAPPER_DATA): the floor only", file=sys.stderr)
    for name, read in sources.items():
        print(f"{name} ...", file=sys.stderr, flush=True)
        t, xy, y = read()
        places[name] = measured(t, xy, y, args.radius, args.gap)
    headers = ["readings", "pairs", "½ mean δ² µT²", "length m"] + [
        f"{lo:g}–{hi:g} m" for lo, hi in itertools.pairwise(LENGTH_BINS_M)
    ]
    rows = [
        [name, str(p["between_pairs"]), f"{p['half_mean_sq_delta']:.2f}", f"{p['length_m']:.2f}"]
        + [f"{r:.2f}" if np.isfinite(r) else "–" for r in p["ratio"]]
        for name, p in places.items()
    ]
    print("γ(s) / var(δ) of the between-pass differences, s along the path (1: independent)")
    print(format_table(headers, rows))
    write_json(args.json, {"places": places, "settings": vars(args)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
