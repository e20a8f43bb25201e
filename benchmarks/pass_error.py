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
within ``--same-pass`` s of each other in time), half the mean squared difference of their
δs, γ(s), against s, how far apart along the path the two places are, is a variogram of the
between-pass error along the pass. Printed as γ(s) / var(δ): low and flat (the white noise's
share) where the error is one offset per pass, 1 where the two places' errors are
independent.

Data: Aalto invensense runs 1–5 (the calibration's readings, every 5th at 50 Hz) and
``benchmarks/building.py``'s office floor (seed 0, 20 minutes, every 10th at 100 Hz; its
per-pass offsets are one constant per pass by construction).

    python benchmarks/pass_error.py [--json out.json]

JSON: {"places": {NAME: {"between_pairs", "half_mean_sq_delta", "bins_m",
"gamma", "ratio", "pairs"}}}.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import numpy as np
from common import data_dir, format_table, write_json
from scipy.spatial import cKDTree

from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.io.building import building_walk, make_building_world, simulate_building_run

# Along-path distance bins of the variogram [m].
BINS_M = (0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
# Reference pairs drawn for the variogram (each against every pair of the same passes).
REFERENCES = 4000


def between_pass_variogram(
    t: np.ndarray,
    xy: np.ndarray,
    y: np.ndarray,
    *,
    radius: float,
    gap: float,
    same_pass: float,
    seed: int = 0,
) -> dict:
    """γ(s) of the differences between two passes' readings at the same place (docstring)."""
    tree = cKDTree(xy)
    pairs = tree.query_pairs(radius, output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    keep = np.abs(t[i] - t[j]) >= gap
    i, j = i[keep], j[keep]
    swap = t[i] > t[j]  # i the earlier reading of each pair
    i, j = np.where(swap, j, i), np.where(swap, i, j)
    order = np.argsort(t[i], kind="stable")
    i, j = i[order], j[order]
    delta = y[i] - y[j]
    ti, tj = t[i], t[j]
    rng = np.random.default_rng(seed)
    sums = np.zeros(len(BINS_M) - 1)
    counts = np.zeros(len(BINS_M) - 1, dtype=np.int64)
    for a in rng.choice(len(i), size=min(len(i), REFERENCES), replace=False):
        lo, hi = np.searchsorted(ti, [ti[a] + 1e-3, ti[a] + same_pass])
        other = np.arange(lo, hi)
        other = other[np.abs(tj[other] - tj[a]) < same_pass]
        if not len(other):
            continue
        s = np.linalg.norm(xy[i[other]] - xy[i[a]], axis=1)
        half_sq = 0.5 * (delta[other] - delta[a]) ** 2
        b = np.digitize(s, BINS_M) - 1
        inside = (b >= 0) & (b < len(counts))
        np.add.at(sums, b[inside], half_sq[inside])
        np.add.at(counts, b[inside], 1)
    half_mean_sq = float(np.mean(delta**2) / 2.0)
    gamma = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return {
        "between_pairs": len(delta),
        "half_mean_sq_delta": half_mean_sq,  # σ²_pass + the white noise
        "bins_m": list(BINS_M),
        "gamma": gamma.tolist(),
        # γ against var(δ) = 2 × half_mean_sq: 1 where the errors are independent.
        "ratio": (gamma / (2.0 * half_mean_sq)).tolist(),
        "pairs": counts.tolist(),
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
    parser.add_argument("--same-pass", type=float, default=15.0, help="one pass [s]")
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
        places[name] = between_pass_variogram(
            t, xy, y, radius=args.radius, gap=args.gap, same_pass=args.same_pass
        )
    headers = ["readings", "pairs", "½ mean δ² µT²"] + [
        f"{lo:g}–{hi:g} m" for lo, hi in itertools.pairwise(BINS_M)
    ]
    rows = [
        [name, str(p["between_pairs"]), f"{p['half_mean_sq_delta']:.2f}"]
        + [f"{r:.2f}" if np.isfinite(r) else "–" for r in p["ratio"]]
        for name, p in places.items()
    ]
    print("γ(s) / var(δ) of the between-pass differences, s along the path (1: independent)")
    print(format_table(headers, rows))
    write_json(args.json, {"places": places, "settings": vars(args) | {"bins_m": BINS_M}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
