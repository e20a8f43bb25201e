"""Magnetic localization on the Aalto runs: the filter against dead reckoning.

Protocol. A ‖B‖ map is built from invensense runs 1-4 of the Aalto data, streamed reading by
reading through ``MappingPipeline`` at the node's defaults (as ``calibration.py`` streams),
and saved as the node saves it. Run 5 is then localized against the map file with odometry
made from its ground-truth track (``gp_mapper.io.odometry`` at its defaults: distance scale
error ±5 %, gyro bias ±1 °/s with a random walk of 0.1 °/s/√s, 2 % white noise per step;
signs and noise drawn per seed), so that dead reckoning alone drifts by metres over the run.
Two starts: ``known``, a pose drawn around the truth (sd 0.5 m, 15°) given as AMCL's
``initialpose``; ``uniform``, a global start over the map's known area. Per seed: the
position RMSE over the whole run and over the updates where the map knows the true place,
the share of updates whose truth lies inside the filter's 95 % ellipse; converged at the first
update from which the RMSE of every later update is ≤ 0.5 m and none is off by more than 1 m,
and from there the RMSE, its 95th percentile, the heading RMSE and the ellipse share again;
the time and distance to converge; dead reckoning's RMSE and largest error from
the true start. Medians over seeds. ``--split validation`` maps runs 1-3 and localizes run 4:
the filter's defaults are chosen there, never on run 5. The office floor of ``building.py``
(seed 0, 60 x 40 m, 20 minutes at 100 Hz, per-pass offsets of 1 µT): the walk's first 15
minutes are streamed through the pipeline at the node's defaults (the tiled map), its last 5
minutes (mostly over mapped corridors; rooms first reached later are walked blind) are
localized as run 5 is, rows ``building_known`` and ``building_uniform``; ``--split
validation`` walks the floor of seed 1 instead (``--floor-seed N``: another validation
floor). Speed: filter updates per second at a fixed particle count on one core (readings
12 mm apart: ~17 a batch at the default 0.2 m).

    python benchmarks/localization.py [--seeds 10] [--split test|validation] [--json F]
        [--places aalto,building] [--starts known,uniform] [--floor-seed N]
        [--set NAME=VALUE ...] [--map-set NAME=VALUE ...] [--scratch /tmp/gp_mapper_localization]

``--map-set`` builds the maps with other mapper parameters, e.g. a three-axis map
(``--map-set target=vector --map-set model=potential``): its rows carry the suffix
``_vector``, and the filter then weighs all three components rotated by each particle's
heading.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import data_dir, format_table, run_env, write_json

from gp_mapper.engine.core.device import set_cpu_threads
from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.io.bag_writer import MAG_FRAME_ID, TESLA_PER_MICROTESLA
from gp_mapper.io.building import building_walk, make_building_world, simulate_building_run
from gp_mapper.io.heading import heading_from_track, rotate_z, yaw_to_quaternion
from gp_mapper.io.odometry import OdometryErrors, align_to_start, simulate_odometry
from gp_mapper.mapping import FieldReading, MapperConfig, MappingPipeline, Pose
from gp_mapper.mapping.localization import FieldLookup, Localizer, LocalizerConfig
from gp_mapper.mapping.localization.motion import wrap_angle
from gp_mapper.mapping.params_file import parse_overrides

SPLITS = {"test": ((1, 2, 3, 4), 5), "validation": ((1, 2, 3), 4)}
# The office floor: the walk's first 15 minutes map it, the last 5 are localized.
FLOOR_SEEDS = {"test": 0, "validation": 1}
FLOOR_MINUTES = 20.0
FLOOR_MAP_S = 900.0
NS_PER_S = 1_000_000_000
CONVERGED_RMSE_M = 0.5
KNOWN_START_SD = (0.5, 0.5, math.radians(15.0))
SPEED_PARTICLES = (500, 2000, 10_000)
# Targets of the issue, run 5 (test split).
TARGET_KNOWN_RMSE_M = 0.3
TARGET_DR_DRIFT_M = 2.0
TARGET_UNIFORM_S = 30.0
TARGET_UNIFORM_SEEDS = 8
TARGET_UPDATES_PER_S = 50.0


def aalto_dir() -> Path:
    return data_dir() / "magnetic" / "aalto-magnetic-data" / "data"


@functools.cache
def aalto_track(run: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One Aalto run as a robot records it: times from 0 [s], positions [m], the heading of
    travel [rad] and the readings in the frame of a sensor facing it [µT]. The record is in
    the room frame (the authors compensated the attitude), so it is turned back by the heading,
    as ``gp-mapper convert aalto`` writes it."""
    seq = load_aalto_sequence(aalto_dir(), seq=run)
    yaw = heading_from_track(seq.time_s, seq.loc_m)
    return seq.time_s - seq.time_s[0], seq.loc_m, yaw, rotate_z(seq.mag_ut, -yaw)


def overrides_tag(overrides: dict[str, Any]) -> str:
    """``_name-value`` for each ``--map-set`` override, sorted: map files' and rows' names."""
    return "".join(f"_{k}-{v}" for k, v in sorted(overrides.items()))


def build_map(runs: tuple[int, ...], scratch: Path, overrides: dict[str, Any]) -> Path:
    """Stream the runs through the node's pipeline (defaults, or ``overrides``: ``--map-set``)
    and save the map file."""
    path = scratch / f"map_runs{''.join(map(str, runs))}{overrides_tag(overrides)}.npz"
    if path.exists():
        return path
    config = MapperConfig.from_dict({"pose_source": "topic", "device": "cpu", **overrides})
    start = time.perf_counter()
    offset_ns = 0
    with MappingPipeline(config, background=False, draw_each_window=False) as pipeline:
        for run in runs:
            t, xy, yaw, body_ut = aalto_track(run)
            stamps = offset_ns + np.rint(t * NS_PER_S).astype(np.int64)
            position = np.column_stack([xy, np.zeros(len(stamps))])
            orientation = yaw_to_quaternion(yaw)
            field_t = body_ut * TESLA_PER_MICROTESLA
            for i, stamp in enumerate(stamps):
                pipeline.add_pose(Pose(int(stamp), position[i], orientation[i]))
                pipeline.add_field(FieldReading(int(stamp), field_t[i], MAG_FRAME_ID))
            offset_ns = int(stamps[-1]) + 5 * NS_PER_S
            print(f"  map: run {run} streamed, M={pipeline.diagnostics()['inducing_points']}, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
        pipeline.flush()
        pipeline.save(path)
    return path


def floor_run(seed: int) -> Any:
    """The office floor of ``building.py`` (20 minutes at 100 Hz), in memory."""
    world = make_building_world(seed)
    walk = building_walk(world, duration_s=FLOOR_MINUTES * 60.0, seed=seed)
    return simulate_building_run(world, walk, seed=seed)


def build_floor_map(run: Any, seed: int, scratch: Path, overrides: dict[str, Any]) -> Path:
    """Stream the floor's first FLOOR_MAP_S seconds through the node's pipeline (defaults:
    the tiled map; or ``overrides``) and save the map file."""
    path = scratch / f"floor_seed{seed}_first{FLOOR_MAP_S:g}s{overrides_tag(overrides)}.npz"
    if path.exists():
        return path
    config = MapperConfig.from_dict(
        {"pose_source": "topic", "device": "cpu", **overrides}
    ).offline()
    keep = run.time_s < FLOOR_MAP_S
    stamps = np.rint(run.time_s[keep] * NS_PER_S).astype(np.int64)
    position = np.column_stack([run.position_m[keep], np.zeros(int(keep.sum()))])
    orientation = yaw_to_quaternion(run.heading_rad[keep])
    field_t = run.mag_ut[keep] * TESLA_PER_MICROTESLA
    start = time.perf_counter()
    with MappingPipeline(config, background=False, draw_each_window=False) as pipeline:
        for i, stamp in enumerate(stamps):
            pipeline.add_pose(Pose(int(stamp), position[i], orientation[i]))
            pipeline.add_field(FieldReading(int(stamp), field_t[i], MAG_FRAME_ID))
            if i % 20_000 == 0:
                done = i / stamps.size
                elapsed = time.perf_counter() - start
                eta = elapsed * (1 - done) / max(done, 1e-9)
                M = pipeline.diagnostics()["inducing_points"]
                print(f"  floor map: {100 * done:.0f} %, M={M}, {elapsed:.0f} s, ETA {eta:.0f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
        pipeline.flush()
        pipeline.save(path)
    return path


def localize_run(
    lookup: FieldLookup, run: int, seed: int, start: str, config: LocalizerConfig
) -> dict[str, Any]:
    """One seed of one start on one Aalto run (module docstring)."""
    return localize_track(lookup, *aalto_track(run), seed, start, config)


def localize_track(
    lookup: FieldLookup,
    t: np.ndarray,
    xy: np.ndarray,
    yaw: np.ndarray,
    mag_ut: np.ndarray,
    seed: int,
    start: str,
    config: LocalizerConfig,
) -> dict[str, Any]:
    """One seed of one start on a track with its readings (module docstring)."""
    truth = np.column_stack([xy, yaw])
    odom = simulate_odometry(t, xy, yaw, OdometryErrors(), seed).pose
    stamps = np.rint(t * NS_PER_S).astype(np.int64)
    localizer = Localizer(lookup, dataclasses.replace(config, seed=seed))
    rng = np.random.default_rng(10_000 + seed)
    if start == "known":
        given = truth[0] + rng.standard_normal(3) * KNOWN_START_SD
        localizer.initialize_pose(given)
    else:
        localizer.initialize_global()
    began = time.perf_counter()
    for i, stamp in enumerate(stamps):
        localizer.add_odometry(int(stamp), odom[i])
        localizer.add_field(int(stamp), mag_ut[i])
    seconds = time.perf_counter() - began
    steps = localizer.steps
    step_s = np.array([s.stamp_ns / NS_PER_S for s in steps])
    index = np.searchsorted(t, step_s).clip(0, t.size - 1)
    est = np.array([s.estimate.mean for s in steps])
    err = np.linalg.norm(est[:, :2] - truth[index, :2], axis=1)
    heading_err = np.abs(wrap_angle(est[:, 2] - truth[index, 2]))
    # Converged at the first update from which the RMSE of every later update is ≤ 0.5 m and
    # none is off by more than twice that (a mean over the rest of a run hides an early miss).
    suffix = np.sqrt(np.cumsum((err**2)[::-1])[::-1] / np.arange(err.size, 0, -1))
    worst = np.maximum.accumulate(err[::-1])[::-1]
    ok = np.flatnonzero((suffix <= CONVERGED_RMSE_M) & (worst <= 2.0 * CONVERGED_RMSE_M))
    steps_m = np.linalg.norm(np.diff(xy, axis=0), axis=1)
    travelled = np.concatenate([[0.0], np.cumsum(steps_m)])
    dr = align_to_start(odom, truth[0])
    dr_err = np.linalg.norm(dr[:, :2] - truth[:, :2], axis=1)
    known = lookup.is_known(truth[index, :2])
    inside_all = [s.estimate.covers(truth[i, :2]) for s, i in zip(steps, index, strict=True)]
    out: dict[str, Any] = {
        "seed": seed,
        "updates": len(steps),
        "seconds": seconds,
        "dead_reckoning_rmse_m": float(np.sqrt(np.mean(dr_err**2))),
        "dead_reckoning_final_m": float(dr_err[-1]),
        "dead_reckoning_max_m": float(dr_err.max()),
        "converged": bool(ok.size),
        "rmse_all_m": float(np.sqrt(np.mean(err**2))),
        # Where the map knows the true place (an unmapped room is walked blind).
        "rmse_known_m": float(np.sqrt(np.mean(err[known] ** 2))) if known.any() else None,
        "known_share": float(known.mean()),
        "ellipse95_all": float(np.mean(inside_all)),
    }
    if ok.size:
        k = int(ok[0])
        after = slice(k, None)
        inside = inside_all[k:]
        out |= {
            "rmse_m": float(np.sqrt(np.mean(err[after] ** 2))),
            "p95_m": float(np.quantile(err[after], 0.95)),
            "converge_s": float(step_s[k]),
            "converge_m": float(travelled[index[k]]),
            "heading_rmse_deg": float(np.degrees(np.sqrt(np.mean(heading_err[after] ** 2)))),
            "ellipse95": float(np.mean(inside)),
            "particles_final": int(steps[-1].estimate.particles),
        }
    return out


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float | None:
        values = [r[key] for r in per_seed if key in r]
        return float(np.median(values)) if values else None

    return {
        "rmse_m": median("rmse_m"),
        "rmse_all_m": median("rmse_all_m"),
        "rmse_known_m": median("rmse_known_m"),
        "known_share": median("known_share"),
        "ellipse95_all": median("ellipse95_all"),
        "p95_m": median("p95_m"),
        "converge_s": median("converge_s"),
        "converge_m": median("converge_m"),
        "heading_rmse_deg": median("heading_rmse_deg"),
        "ellipse95": median("ellipse95"),
        "dead_reckoning_rmse_m": median("dead_reckoning_rmse_m"),
        "dead_reckoning_final_m": median("dead_reckoning_final_m"),
        "dead_reckoning_max_m": median("dead_reckoning_max_m"),
        "seeds": len(per_seed),
        "converged_seeds": sum(r["converged"] for r in per_seed),
        "converged_within_30s": sum(
            r["converged"] and r["converge_s"] <= TARGET_UNIFORM_S for r in per_seed
        ),
        "per_seed": per_seed,
    }


def speed(lookup: FieldLookup, config: LocalizerConfig) -> dict[str, list[float]]:
    """Filter updates per second at fixed particle counts (one core)."""
    rates = []
    for count in SPEED_PARTICLES:
        fixed = dataclasses.replace(config, min_particles=count, max_particles=count)
        localizer = Localizer(lookup, fixed)
        localizer.initialize_global()
        rng = np.random.default_rng(0)
        pose = np.zeros(3)
        stamp = 0
        level = lookup.far_mean
        began, updates = time.perf_counter(), 0
        while time.perf_counter() - began < 3.0:
            for _ in range(10):  # one batch: readings over the batch distance
                stamp += 20_000_000
                pose = pose + np.array([0.012, 0.0, 0.0])
                localizer.add_odometry(stamp, pose)
                localizer.add_field(stamp, np.array([level + rng.normal(), 0.0, 0.0]))
            updates = len(localizer.steps)
        rates.append(updates / (time.perf_counter() - began))
    return {"particles": list(SPEED_PARTICLES), "updates_per_s": rates}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--split", choices=sorted(SPLITS), default="test")
    parser.add_argument("--starts", default="known,uniform")
    parser.add_argument("--places", default="aalto,building",
                        help="aalto (the Aalto runs, the split's run), building (the office "
                        "floor's last 5 minutes; test split only)")  # fmt: skip
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a LocalizerConfig field (e.g. batch_distance_m=0.2)",
    )
    parser.add_argument(
        "--map-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a mapper parameter of the maps (e.g. target=vector); their rows are named "
        "with a suffix (aalto5_known_vector)",
    )
    parser.add_argument("--floor-seed", type=int, default=None,
                        help="validation split only: another validation floor than seed 1 "
                        "(never 0, the test floor)")  # fmt: skip
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/gp_mapper_localization"))
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    set_cpu_threads(1)
    if "aalto" in args.places.split(",") and not aalto_dir().is_dir():
        print(f"Aalto data not found under {aalto_dir()} (set GP_MAPPER_DATA)", file=sys.stderr)
        return 2
    overrides = parse_overrides(args.set)
    config = LocalizerConfig(**overrides)
    args.scratch.mkdir(parents=True, exist_ok=True)
    map_runs, run = SPLITS[args.split]
    places = args.places.split(",")
    floor_seed = FLOOR_SEEDS[args.split]
    if args.floor_seed is not None:
        if args.split != "validation" or args.floor_seed == FLOOR_SEEDS["test"]:
            parser.error("--floor-seed picks a validation floor: --split validation, not seed 0")
        floor_seed = args.floor_seed
    starts = args.starts.split(",")
    results: dict[str, Any] = {"runs": {}}
    tracks: dict[str, Any] = {}
    lookups: dict[str, FieldLookup] = {}
    map_overrides = parse_overrides(args.map_set)
    suffix = "_vector" if map_overrides.get("target") == "vector" else overrides_tag(map_overrides)
    if "aalto" in places:
        path = build_map(map_runs, args.scratch, map_overrides)
        lookups["aalto"] = FieldLookup.from_map_file(path)
        tracks["aalto"] = run
        results["map"] = {"runs": list(map_runs), "overrides": map_overrides}
    if "building" in places:
        floor = floor_run(floor_seed)
        path = build_floor_map(floor, floor_seed, args.scratch, map_overrides)
        began = time.perf_counter()
        lookups["building"] = FieldLookup.from_map_file(path)
        print(f"  floor lookup grid: {time.perf_counter() - began:.0f} s", file=sys.stderr)
        test = floor.time_s >= FLOOR_MAP_S
        tracks["building"] = (floor.time_s[test] - floor.time_s[test][0], floor.position_m[test],
                              floor.heading_rad[test], floor.mag_ut[test])  # fmt: skip
        results["floor"] = {"seed": floor_seed, "map_s": FLOOR_MAP_S, "minutes": FLOOR_MINUTES,
                            "lookup_s": time.perf_counter() - began}  # fmt: skip
    for place, lookup in lookups.items():
        print(f"{place} map: known area {lookup.known_area_m2:.1f} m², ℓ {lookup.lengthscale_m:.2f}"
              f" m, noise {lookup.noise}", file=sys.stderr)  # fmt: skip
        results.setdefault("maps", {})[place] = {
            "known_area_m2": lookup.known_area_m2, "lengthscale_m": lookup.lengthscale_m,
            "noise": dataclasses.asdict(lookup.noise),
        }  # fmt: skip
    began = time.perf_counter()
    total = len(starts) * args.seeds * len(lookups)
    done = 0
    for place, lookup in lookups.items():
        for start in starts:
            per_seed = []
            for seed in range(args.seeds):
                if place == "aalto":
                    per_seed.append(localize_run(lookup, tracks[place], seed, start, config))
                    name = f"aalto{run}_{start}{suffix}"
                else:
                    per_seed.append(localize_track(lookup, *tracks[place], seed, start, config))
                    name = f"building_{start}{suffix}"
                done += 1
                elapsed = time.perf_counter() - began
                eta = elapsed / done * (total - done)
                r = per_seed[-1]
                print(f"  {name} seed {seed}: rmse {r.get('rmse_m', math.nan):.2f} m, "
                      f"converged {r.get('converge_s', math.nan):.0f} s, dead reckoning "
                      f"{r['dead_reckoning_rmse_m']:.2f} m ({done}/{total}, ETA {eta:.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
            results["runs"][name] = summarise(per_seed)
    if not args.no_speed:
        results["speed"] = speed(next(iter(lookups.values())), config)
    results["params"] = dataclasses.asdict(config)
    results["split"] = args.split
    print_table(results)
    write_json(args.json, {**results, "env": run_env()})
    return 0


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(results: dict[str, Any]) -> None:
    rows = [
        [name, fmt(r["rmse_all_m"]), fmt(r["rmse_known_m"]), fmt(r["rmse_m"]), fmt(r["p95_m"]),
         fmt(r["converge_s"], 1), fmt(r["converge_m"], 1), fmt(r["heading_rmse_deg"], 1),
         f"{fmt(r['ellipse95_all'])} / {fmt(r['ellipse95'])}",
         fmt(r["dead_reckoning_rmse_m"]), fmt(r["dead_reckoning_max_m"]),
         f"{r['converged_seeds']}/{r['seeds']}", str(r["converged_within_30s"])]
        for name, r in results["runs"].items()
    ]  # fmt: skip
    headers = ["run", "RMSE all m", "RMSE where mapped m", "RMSE after m", "p95 m",
               "converge s", "converge m", "heading °", "in 95 % ellipse all / after",
               "dead reckoning RMSE m", "DR max m", "converged", "within 30 s"]  # fmt: skip
    print(f"# magnetic localization, {results['split']} split (medians over seeds)")
    print(format_table(headers, rows))
    if "speed" in results:
        s = results["speed"]
        print("filter updates per second: " + ", ".join(
            f"{p} particles {u:.0f}/s" for p, u in zip(s["particles"], s["updates_per_s"],
                                                       strict=True)))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
