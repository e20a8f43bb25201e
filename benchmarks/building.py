"""A whole office floor mapped by replay: one global map against a tiled one.

The floor is ``gp_mapper.io.building``'s synthetic office (60 × 40 m of corridors and rooms,
buried dipoles at 0.3–3 m scales, a 1.2 m/s walk covering every corridor at least twice,
per-pass offsets of ~1 µT, 100 Hz, 20 minutes). Each row replays its bag through the mapping
pipeline (as ``gp-mapper replay`` does, in a child process of its own so its peak RSS is its
own) and scores the final map against the true |B| on the cells within 0.3 m of the path,
split into thirds by when each place was first visited.

Rows: ``global`` (one model, ``tile_size`` 0, at the default max_inducing 2000), ``tiled``
(the node's defaults: 16 m tiles, or ``--tile-size`` m), ``global_cap`` (``--raised-cap``:
the global map with max_inducing raised, cut at ``--cap-budget-s``), and the offline tiled
fit of the same bag (what ``gp-mapper fit --model vips`` runs) one tile after another
(``offline_serial``) and on a local Ray runtime with 2 workers (``offline_ray``); their wall
time is the fit's, Ray's with the runtime's start and stop, and again on a runtime already up
with its workers warm (a cluster's case: ``wall_s_runtime_up``).

    python benchmarks/building.py [--rows global,tiled] [--tile-size M] [--set NAME=VALUE]
        [--seed 0] [--minutes 20] [--pass-offset-ut SD] [--scratch /tmp/gp_mapper_building]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Z95, format_table, write_json

NS_PER_S = 1_000_000_000
ROWS = ("global", "tiled", "global_cap", "offline_serial", "offline_ray")
# Where a place counts as walked, and the cell size of the scored places [m].
PATH_RADIUS_M = 0.3
SCORE_RESOLUTION_M = 0.1
# The first and last stretches of the stream whose update times are compared [s].
STRETCH_S = 300.0
# Bands of distance to the path the score is also broken into [m].
DISTANCE_BANDS_M = (0.0, 0.1, 0.2, PATH_RADIUS_M + 0.01)
# The path's cells (the first band) are also scored by the passes that went within this of
# them (about a fitted lengthscale) [m], counted up to PASSES_MAX.
PASSES_RADIUS_M = 0.3
PASSES_MAX = 3


def row_overrides(row: str, args: argparse.Namespace) -> dict[str, Any]:
    """The node parameters of a row (the rest are the node's defaults)."""
    tiles = {} if args.tile_size is None else {"tile_size": args.tile_size}
    tiles.update(args.set)
    if row == "global":
        return {"tile_size": 0.0}
    if row in ("tiled", "offline_serial", "offline_ray"):
        return tiles
    if row == "global_cap":
        return {"tile_size": 0.0, "vips.max_inducing": args.raised_cap}
    raise ValueError(f"unknown row {row!r}; known: {ROWS}")


def building_bag(args: argparse.Namespace) -> Path:
    """The floor's bag in the scratch folder (written once per seed and duration)."""
    from gp_mapper.io.building import DEFAULT_PASS_OFFSET_UT, write_building_bag

    offsets = (
        "" if args.pass_offset_ut == DEFAULT_PASS_OFFSET_UT else f"_offset{args.pass_offset_ut:g}"
    )
    bag = args.scratch / f"floor_seed{args.seed}_{args.minutes:g}min{offsets}"
    if not bag.exists():
        print(f"writing {bag} ...", file=sys.stderr, flush=True)
        write_building_bag(
            bag, seed=args.seed, duration_s=60.0 * args.minutes,
            pass_offset_ut=args.pass_offset_ut,
        )  # fmt: skip
    return bag


def run_row(row: str, args: argparse.Namespace) -> dict[str, Any]:
    """Replay the bag with the row's parameters; score the final map (in this process)."""

    from gp_mapper.engine import set_cpu_threads
    from gp_mapper.io import bag_info, read_bag
    from gp_mapper.mapping import FieldReading, MapperConfig, MappingPipeline
    from gp_mapper.mapping.map_file import read_model

    set_cpu_threads(args.threads)
    bag = building_bag(args)
    info = bag_info(bag)
    duration_s = (info.end_ns - info.start_ns) / NS_PER_S
    config = MapperConfig.from_dict(
        {"pose_source": "topic", **row_overrides(row, args)}  # the bag holds the pose topic
    ).offline()  # as replay does
    updates: list[tuple[float, float]] = []  # (window end [s of data], update seconds)
    memory: list[tuple[float, float, int]] = []  # (window end [s], RSS now [MB], tiles)

    def on_commit(report: dict[str, Any]) -> None:
        end_s = (int(report["window_end_ns"]) - info.start_ns) / NS_PER_S
        updates.append((end_s, float(report.get("seconds_total", np.nan))))
        memory.append((end_s, rss_now_mb(), int(report.get("tiles", 1))))

    if row.startswith("offline"):
        return offline_row(row, args, bag, config, duration_s)
    start = time.perf_counter()
    budget_out = False
    last_print = start
    # As `gp-mapper replay` maps a bag: the map drawn once, at the end.
    with MappingPipeline(
        config, background=False, draw_each_window=False, on_commit=on_commit
    ) as pipeline:
        for count, record in enumerate(read_bag(bag, pose_type="auto")):
            if isinstance(record, FieldReading):
                pipeline.add_field(record)
            else:
                pipeline.add_pose(record)
            now = time.perf_counter()
            if count % 2048 == 0 and now - last_print > 10.0:
                last_print = now
                done = (record.stamp_ns - info.start_ns) / NS_PER_S / duration_s
                eta = (now - start) * (1.0 - done) / max(done, 1e-9)
                d = pipeline.diagnostics()
                print(
                    f"  {row}: {100 * done:5.1f} % of the stream, M={d['inducing_points']}, "
                    f"{now - start:.0f} s, ETA {eta:.0f} s",
                    file=sys.stderr, flush=True,
                )  # fmt: skip
            if row == "global_cap" and now - start > args.cap_budget_s:
                budget_out = True
                break
        pipeline.flush()
        wall_s = time.perf_counter() - start
        diagnostics = pipeline.diagnostics()
        state = args.scratch / f"{row}_seed{args.seed}.npz"
        pipeline.save(state)
    model = read_model(state, device="cpu")
    return {
        **score(model, args, duration_s, config),
        "M_total": int(diagnostics["inducing_points"]),
        "lost_readings": int(diagnostics["lost_readings"]),
        # σ²_pass the map ended with (measured with pass_noise_variance: auto) [µT²].
        "pass_noise_variance": float(diagnostics["pass_noise_variance"]),
        "pass_noise_pairs": int(diagnostics["pass_noise_pairs"]),
        "wall_s": wall_s,
        "realtime_factor": duration_s / wall_s,
        "cut_at_budget": budget_out,
        "update_s_p95": p95_stretches(updates),
        "updates": len(updates),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "rss_per_tile_mb": rss_per_tile(memory),
        "map_file_mb": state.stat().st_size / 1e6,  # every tile's state, float64
        "params": {"tile_size": config.tile_size, **row_overrides(row, args)},
    }


def offline_row(
    row: str, args: argparse.Namespace, bag: Path, config: Any, duration_s: float
) -> dict[str, Any]:
    """The offline tiled fit of the bag (serial or on Ray), scored as a replay is."""
    from gp_mapper.engine import build_model
    from gp_mapper.io import read_bag
    from gp_mapper.mapping.inputs import collect_samples
    from gp_mapper.mapping.tiled_fit import fit_tiled

    samples = collect_samples(read_bag(bag, pose_type="auto"), config)
    auxiliary = build_model(config.engine, config.input_dims).auxiliary_inputs
    samples = samples.with_auxiliary_inputs(auxiliary, config.engine.get("gam.run_gap"))
    workers = 2 if row == "offline_ray" else 0
    walls, digests = [], set()
    for _ in range(args.repeats):  # this machine is noisy: the median of several fits
        start = time.perf_counter()
        fitted = fit_tiled(samples, config, workers=workers)
        walls.append(time.perf_counter() - start)
        digests.add(state_digest(fitted.model.state_dict()))
    wall_s = float(np.median(walls))
    running: list[float] = []
    if workers:  # the same fit on a runtime already up, its workers warm (a cluster's case)
        import ray

        from gp_mapper.mapping.tiled_fit import RayRuntime

        for _ in range(args.repeats):
            with RayRuntime(workers) as runtime:
                ray.get(runtime.warming)
                start = time.perf_counter()
                again = fit_tiled(samples, config, workers=workers)
                running.append(time.perf_counter() - start)
            digests.add(state_digest(again.model.state_dict()))
    model = fitted.model
    return {
        **score(model, args, duration_s, config),
        "M_total": int(sum(fitted.report["M_per_tile"].values())),
        "lost_readings": None,
        "wall_s": wall_s,
        "realtime_factor": duration_s / wall_s,
        "cut_at_budget": False,
        "update_s_p95": {"first_5min": None, "last_5min": None},
        "updates": None,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "wall_s_each": walls,
        "wall_s_runtime_up": float(np.median(running)) if running else None,
        "wall_s_runtime_up_each": running,
        "same_state_each_fit": len(digests) == 1,
        "params": {"tile_size": config.tile_size, **row_overrides(row, args), "workers": workers},
    }


def machine(args: argparse.Namespace) -> str:
    """What the replays ran on: the GPU's name when the rows' device is one, else the CPU."""
    import os

    import torch

    device = str(args.set.get("device", "auto"))
    if device != "cpu" and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} (device {device})"
    return f"CPU, {os.cpu_count()} cores, {args.threads or os.cpu_count()} torch threads"


def state_digest(state: dict[str, np.ndarray]) -> str:
    """A hash of every array of a model's state: equal hashes, the same map bit for bit."""
    h = hashlib.sha256()
    for key in sorted(state):
        h.update(key.encode())
        h.update(np.ascontiguousarray(state[key]).tobytes())
    return h.hexdigest()[:16]


def rss_now_mb() -> float:
    """This process's resident memory now [MB] (``ru_maxrss`` is the peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 1e6


def rss_per_tile(memory: list[tuple[float, float, int]]) -> float | None:
    """RSS the map added from its first window to its last, per tile at the end [MB]: an
    upper bound on a tile's share (the allocator's high water counts too)."""
    if len(memory) < 2:
        return None
    return (memory[-1][1] - memory[0][1]) / max(memory[-1][2], 1)


def p95_stretches(updates: list[tuple[float, float]]) -> dict[str, float | None]:
    """p95 of the update times in the first and in the last STRETCH_S of the stream [s]."""
    times = np.array(updates).reshape(-1, 2)
    if not len(times):
        return {"first_5min": None, "last_5min": None}
    first = times[times[:, 0] <= STRETCH_S, 1]
    last = times[times[:, 0] >= times[:, 0].max() - STRETCH_S, 1]
    return {
        "first_5min": float(np.percentile(first, 95)) if len(first) else None,
        "last_5min": float(np.percentile(last, 95)) if len(last) else None,
    }


def score(model: Any, args: argparse.Namespace, duration_s: float, config: Any) -> dict:
    """The final map against the true |B| on the cells within 0.3 m of the path."""
    import torch

    from gp_mapper.engine.tiled import TiledModel
    from gp_mapper.io.building import (
        building_walk,
        first_visit_times,
        make_building_world,
        path_cells,
        simulate_building_run,
    )

    world = make_building_world(args.seed)
    walk = building_walk(world, duration_s=duration_s, seed=args.seed)
    cells = path_cells(walk.position_m, SCORE_RESOLUTION_M, PATH_RADIUS_M)
    first = first_visit_times(cells, walk.time_s, walk.position_m, PATH_RADIUS_M)
    truth = world.norm_at(cells)
    with torch.no_grad():
        mean, var = (t.numpy() for t in model.predict(torch.as_tensor(cells)))
        prior = model.posterior.prior_variance(torch.as_tensor(cells)).numpy()
    err = mean - truth
    thirds = np.array_split(np.argsort(first, kind="stable"), 3)
    covered = np.abs(err) <= Z95 * np.sqrt(var)
    # On the path the error is what the passes' offsets leave; off it, the field between.
    distance = cKDTree(walk.position_m).query(cells)[0]
    by_distance = []
    for lo, hi in itertools.pairwise(DISTANCE_BANDS_M):
        inside = (distance >= lo) & (distance < hi)
        if inside.any():
            by_distance.append({
                "from_m": lo, "to_m": hi, "n": int(inside.sum()),
                "coverage95": float(covered[inside].mean()),
                "rmse": float(np.sqrt(np.mean(err[inside] ** 2))),
                "sd_median": float(np.median(np.sqrt(var[inside]))),
            })  # fmt: skip
    # On the path, by how many passes went within a lengthscale of the place: where one did,
    # the map's error is that pass's offset, which its intervals must hold.
    run = simulate_building_run(world, walk, pass_offset_ut=args.pass_offset_ut, seed=args.seed)
    on_path = np.flatnonzero(distance < DISTANCE_BANDS_M[1])
    seen = cKDTree(walk.position_m).query_ball_point(cells[on_path], PASSES_RADIUS_M)
    passes = [np.unique(walk.pass_index[rows]) for rows in seen]
    count = np.array([min(len(p), PASSES_MAX) for p in passes])
    offset = np.array([run.pass_offset_ut[p].mean() for p in passes])
    by_passes = []
    for k in range(1, PASSES_MAX + 1):
        inside = count == k
        if inside.any():
            by_passes.append({
                "passes": k if k < PASSES_MAX else f">={k}", "n": int(inside.sum()),
                "coverage95": float(covered[on_path][inside].mean()),
                "rmse": float(np.sqrt(np.mean(err[on_path][inside] ** 2))),
                "sd_median": float(np.median(np.sqrt(var[on_path][inside]))),
                "offset_rms": float(np.sqrt(np.mean(offset[inside] ** 2))),
            })  # fmt: skip
    return {
        "rmse_thirds": [float(np.sqrt(np.mean(err[t] ** 2))) for t in thirds],
        "rmse": float(np.sqrt(np.mean(err**2))),
        "baseline": float(np.std(truth)),
        "coverage95": float(covered.mean()),
        "by_distance": by_distance,
        "by_passes": by_passes,
        "unknown_share": float(np.mean(var > config.unknown_variance_ratio * prior)),
        "tiles": len(model.tiles) if isinstance(model, TiledModel) else 1,
        "stream_s": duration_s,
        # The map's mean on the scored cells, bit for bit: equal digests are the same map.
        "map_digest": hashlib.sha256(np.ascontiguousarray(mean).tobytes()).hexdigest()[:16],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="global,tiled", help=f"comma list of {ROWS}")
    parser.add_argument("--tile-size", type=float, help="tiled rows' tile [m]; node default")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a node parameter of the tiled rows (repeatable), as gp-mapper replay --set",
    )  # fmt: skip
    parser.add_argument("--raised-cap", type=int, default=8000, help="global_cap's cap")
    parser.add_argument("--cap-budget-s", type=float, default=3600.0, help="global_cap's cut")
    parser.add_argument("--seed", type=int, default=0, help="the floor and its walk")
    parser.add_argument("--repeats", type=int, default=3, help="offline fits timed (median)")
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the walk")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--pass-offset-ut", type=float, default=None,
        help="sd of the per-pass offsets of the floor's readings [µT] (a diagnosis: 0 shows "
        "what the offsets cost); the floor's default",
    )  # fmt: skip
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/gp_mapper_building"))
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # a child process: one row
    parser.add_argument("--row-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from gp_mapper.io.building import DEFAULT_PASS_OFFSET_UT
    from gp_mapper.mapping.params_file import parse_overrides

    if args.pass_offset_ut is None:
        args.pass_offset_ut = DEFAULT_PASS_OFFSET_UT
    args.set = parse_overrides(args.set)
    args.scratch.mkdir(parents=True, exist_ok=True)
    if args.row:
        Path(args.row_out).write_text(json.dumps(run_row(args.row, args)))
        return 0
    building_bag(args)
    rows: dict[str, Any] = {}
    for row in args.rows.split(","):
        out = args.scratch / f"{row}_seed{args.seed}.json"
        print(f"row {row} ...", file=sys.stderr, flush=True)
        child = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])]
        subprocess.run([*child, "--row", row, "--row-out", str(out)], check=True)
        rows[row] = json.loads(out.read_text())
    headers = ["row", "RMSE thirds µT", "RMSE", "const", "cov95", "unknown", "M", "tiles",
               "lost", "wall s", "× real time", "upd p95 first/last s", "RSS MB"]  # fmt: skip
    table = []
    for name, r in rows.items():
        p95 = r["update_s_p95"]
        table.append([
            name, " / ".join(f"{v:.2f}" for v in r["rmse_thirds"]), f"{r['rmse']:.2f}",
            f"{r['baseline']:.2f}", f"{r['coverage95']:.3f}", f"{r['unknown_share']:.3f}",
            str(r["M_total"]), str(r["tiles"]), str(r["lost_readings"]), f"{r['wall_s']:.0f}",
            f"{r['realtime_factor']:.2f}" + (" (cut)" if r["cut_at_budget"] else ""),
            f"{p95['first_5min'] or float('nan'):.2f} / {p95['last_5min'] or float('nan'):.2f}",
            f"{r['rss_mb']:.0f}",
        ])  # fmt: skip
    print(f"# office floor, seed {args.seed}, {args.minutes:g} min at 100 Hz")
    print(format_table(headers, table))
    for name, r in rows.items():
        bands = "; ".join(
            f"[{b['from_m']:g}, {b['to_m']:g}) m: {b['coverage95']:.3f} (RMSE {b['rmse']:.2f}, "
            f"sd {b['sd_median']:.2f})"
            for b in r.get("by_distance", [])
        )
        print(f"  {name}: coverage95 by distance to the path: {bands}")
        seen = "; ".join(
            f"{b['passes']}: {b['coverage95']:.3f} (n {b['n']}, RMSE {b['rmse']:.2f}, "
            f"sd {b['sd_median']:.2f}, the passes' mean offset {b['offset_rms']:.2f} rms)"
            for b in r.get("by_passes", [])
        )
        if seen:
            print(f"  {name}: on the path, by the passes within {PASSES_RADIUS_M:g} m: {seen}")
    payload: dict[str, Any] = {
        "seed": args.seed, "minutes": args.minutes, "rows": rows, "machine": machine(args),
    }  # fmt: skip
    if "offline_serial" in rows and "offline_ray" in rows:
        serial, ray = rows["offline_serial"], rows["offline_ray"]
        payload["ray_speedup"] = serial["wall_s"] / ray["wall_s"]
        payload["ray_same_map"] = serial["map_digest"] == ray["map_digest"]
        up = ray.get("wall_s_runtime_up")
        payload["ray_speedup_runtime_up"] = None if not up else serial["wall_s"] / up
        print(
            f"offline fit on Ray with 2 workers: {payload['ray_speedup']:.2f}x the serial fit "
            f"with the runtime's start and stop, "
            f"{payload['ray_speedup_runtime_up'] or float('nan'):.2f}x on a runtime already up; "
            f"same map: {payload['ray_same_map']}"
        )
    write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
