"""Magnetic localization on the Aalto runs and an office floor: the filter against dead reckoning.

Maps. The Aalto maps are built from invensense runs 1-4, streamed reading by reading through
``MappingPipeline`` (as ``calibration.py`` streams) and saved as the node saves them; run 5 is
localized against the map file. ``--split validation`` maps runs 1-3 and localizes run 4: the
filter's defaults are chosen there, never on run 5. The office floor of ``building.py`` (seed
0, 60 x 40 m, 20 minutes at 100 Hz, per-pass offsets of 1 µT): the walk's first 15 minutes are
streamed through the pipeline (the tiled map), its last 5 minutes (mostly over mapped
corridors; rooms first reached later are walked blind) are localized; ``--split validation``
walks the floor of seed 1 instead (``--floor-seed N``: another validation floor). Each place
is mapped twice, side by side (``--maps``): ``norm``, ‖B‖ at the node's defaults, and
``vector``, the three-axis map (``target: vector``, ``model: potential``, ``theta_memory:
true``: ``VECTOR_MAP``), against which the filter weighs all three components rotated by each
particle's heading (rows ``..._vector``; the JSON's ``maps`` records each map's overrides:
older results' three-axis map was the potential at its defaults, θ fitted on each window
alone).
``--map-set`` adds mapper parameters to both (rows and map files carry them in their names).

Odometry. Made from the ground-truth track (``gp_mapper.io.odometry``; scale and bias signs
and the noise drawn per seed), in two grades (``--grades``), each a row: ``pedestrian``, the
module's defaults (distance scale ±5 %, gyro bias ±1 °/s with a random walk of 0.1 °/s/√s, 2 %
white noise per step: a step counter and a phone's gyro; the rows without a grade in older
results), and ``robot``, wheel odometry (``ROBOT_ODOMETRY``: scale ±2 %, bias ±0.05 °/s, walk
0.005 °/s/√s, 1 % per step).

Starts (``--starts``). ``known``: a pose drawn around the truth (sd 0.5 m, 15°) given as AMCL's
``initialpose``. ``uniform``: a global start over the map's known area. ``kidnapped``: a known
start, and at the middle sample of the localized walk the robot is carried to another place of
the same walk: the track is the walk up to there, then the walk from an index whose place is
≥ 10 m from the kidnap point, on the map, and from which at least 120 m of walk remain (drawn
per seed among those), to its end. The readings are those of the true places; the odometry is
made from the spliced track with its second part moved rigidly to start where the first ends,
so it shows no motion at the splice (one error draw over both parts, as one robot's wheels and
gyro). These rows run with AMCL's suggested recovery (``recovery_alpha_slow`` 0.001,
``recovery_alpha_fast`` 0.1) unless ``--set`` names them. The Aalto runs cover a room of
4 x 4 m: no place is 10 m from another, so they have no kidnapped rows.

Metrics per seed. The position error of each filter update against the truth at its middle
reading; the map's known cells (``FieldLookup.is_known`` at the truth) split the updates into
mapped and off-map ones. Converged at the first update from which every later MAPPED update
keeps the RMSE ≤ 0.5 m and none is off by more than 1 m (off-map updates are not counted as
divergence); the time (s) and distance walked (m) to it; after it the RMSE over all updates
and over the mapped ones, the 95th percentile, the heading RMSE, and the share of updates whose
truth lies inside the filter's 95 % ellipse (all, mapped). Over the whole run the RMSE, the RMSE
where mapped and the ellipse share. Kidnapped: recovered at the first update after the carry
from which the same rule holds, the time and distance walked from the carry to it, whether
within 60 m, and whether the filter drew particles anew (noticed) before that. Off the map:
the walk is cut into on-map segments by the off-map stretches of ≥ 2 m walked (and by the
carry); for every stretch entered from a segment where the filter had settled (the rule
within that segment), the stretch's length, the filter's spread there (the position sd along
the major axis: median and largest) and, back on the map, the distance walked until the rule
holds again within the next segment (re-convergence; none when it does not before the segment
ends). Dead reckoning from the true start: its RMSE and largest error. Summaries over seeds:
medians and 90th percentiles (of converged seeds), the share never converged.

Speed: filter updates per second at fixed particle counts on one core for each map kind (the
three-axis likelihood on the vector map; readings 12 mm apart: ~17 a batch at 0.2 m).
Pictures (``--plot DIR``, or beside ``--json``): per place and map kind, the map's ‖B‖ (grey
where it knows nothing), the true path, seed 0's estimate and its 95 % ellipses, for the known
start and, where run, the kidnapped one (robot grade where run).

    python benchmarks/localization.py [--seeds N] [--uniform-seeds N] [--split test|validation]
        [--places aalto,building] [--grades robot,pedestrian] [--maps norm,vector]
        [--starts known,uniform,kidnapped] [--floor-seed N] [--set NAME=VALUE ...]
        [--map-set NAME=VALUE ...] [--scratch /tmp/gp_mapper_localization] [--no-speed]
        [--json F] [--plot DIR]

Seeds: known 10, uniform 20, kidnapped 10; ``--seeds`` sets every start's, ``--uniform-seeds``
the uniform start's. Rows are named ``<place>_<grade>_<start>[_vector]`` (``aalto5_robot_known``,
``building_pedestrian_uniform_vector``); the JSON also holds the pedestrian rows of the known
and uniform starts under their older names (``aalto5_known``, ``building_uniform_vector``),
their summaries marked ``same_as``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import pickle
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from common import aalto_dir, format_table, run_env, write_json

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
# Odometry grades. A robot's wheel odometry: the wheel radius calibrated to 2 % (issue 55:
# 1-3 %), a MEMS gyro whose bias was taken at standstill, 0.05 °/s left, drifting 0.005 °/s/√s
# (ten times slower than a phone's), 1 % noise per increment (wheel slip, encoder counts).
# The pedestrian grade is the odometry module's defaults (module docstring).
ROBOT_ODOMETRY = OdometryErrors(
    scale=0.02, gyro_bias_deg_s=0.05, gyro_walk_deg_s=0.005, step_sd=0.01
)
GRADES = {"robot": ROBOT_ODOMETRY, "pedestrian": OdometryErrors()}
# The map kinds side by side: mapper overrides (``norm``: the node's defaults). The three-axis
# map is the potential model with the hyperparameters' evidence carried across windows
# (``theta_memory``, which the setting recommends for this model): fitted window by window
# alone, its tiles' θ wandered on the test floor (lengthscales 3.3-8.8 m, one tile's noise
# 37 µT²) and the map called rooms it never saw known.
VECTOR_MAP = {"target": "vector", "model": "potential", "vips.theta_memory": True}
MAP_KINDS: dict[str, dict[str, Any]] = {"norm": {}, "vector": VECTOR_MAP}
STARTS = ("known", "uniform", "kidnapped")
DEFAULT_SEEDS = {"known": 10, "uniform": 20, "kidnapped": 10}
# The kidnap (module docstring): carried at least this far, with this much walk left after.
KIDNAP_MIN_M = 10.0
KIDNAP_MIN_REST_M = 120.0
# AMCL's documented suggestion for its recovery (nav2 amcl: "0.001" and "0.1").
KIDNAP_RECOVERY = {"recovery_alpha_slow": 0.001, "recovery_alpha_fast": 0.1}
# Off-map stretches shorter than this walk (a door, a corner the map missed) are only counted.
OFFMAP_MIN_M = 2.0
# Targets (issue 55).
TARGET_UNIFORM_S = 30.0  # Aalto run 5: uniform start within 30 s
TARGET_WITHIN_M = 60.0  # office floor: uniform start converged, kidnap recovered
TARGET_REACQUIRE_M = 20.0  # office floor: re-converged after an unmapped room
TARGET_UPDATES_PER_S = 200.0  # 2000 particles, three-axis likelihood


class Track(NamedTuple):
    """A walk to localize: times from 0 [s], true positions [m] and headings [rad], readings
    in the base's level axes [µT]; the track the odometry is made from (the truth, or for a
    kidnapped robot the truth without the carry) and the first sample after the carry."""

    time_s: np.ndarray
    xy: np.ndarray
    yaw: np.ndarray
    mag_ut: np.ndarray
    odom_xy: np.ndarray
    odom_yaw: np.ndarray
    kidnap: int | None = None


def track_of(t: np.ndarray, xy: np.ndarray, yaw: np.ndarray, mag_ut: np.ndarray) -> Track:
    return Track(t, xy, yaw, mag_ut, xy, yaw)


def walked(xy: np.ndarray) -> np.ndarray:
    """Distance walked [m] at each sample from the first."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))])


def kidnapped_track(track: Track, known: np.ndarray, seed: int) -> Track | None:
    """The walk with a carry at its middle sample (module docstring); ``known`` [N] marks the
    samples on the map. None when no place qualifies."""
    t, xy, yaw, mag = track.time_s, track.xy, track.yaw, track.mag_ut
    m = t.size // 2
    rest = walked(xy)[-1] - walked(xy)
    candidates = np.flatnonzero(
        (np.linalg.norm(xy - xy[m], axis=1) >= KIDNAP_MIN_M) & known & (rest >= KIDNAP_MIN_REST_M)
    )
    if not candidates.size:
        return None
    j = int(np.random.default_rng(20_000 + seed).choice(candidates))
    dt = float(np.median(np.diff(t)))
    time_s = np.concatenate([t[: m + 1], t[m] + dt + (t[j:] - t[j])])
    # The odometry's track: the second part turned and moved to start where the first ends.
    turn = float(wrap_angle(yaw[m] - yaw[j]))
    c, s = math.cos(turn), math.sin(turn)
    moved = xy[m] + (xy[j:] - xy[j]) @ np.array([[c, s], [-s, c]])
    return Track(
        time_s,
        np.concatenate([xy[: m + 1], xy[j:]]),
        np.concatenate([yaw[: m + 1], yaw[j:]]),
        np.concatenate([mag[: m + 1], mag[j:]]),
        np.concatenate([xy[: m + 1], moved]),
        np.concatenate([yaw[: m + 1], wrap_angle(yaw[j:] + turn)]),
        kidnap=m + 1,
    )


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


def map_suffix(overrides: dict[str, Any]) -> str:
    """A map's row suffix: ``_vector`` for a three-axis map (``target: vector``), then
    ``_name-value`` for each override that is not ``VECTOR_MAP``'s; "" for the defaults."""
    rest = dict(overrides)
    vector = rest.get("target") == "vector"
    if vector:
        rest = {k: v for k, v in rest.items() if VECTOR_MAP.get(k, object()) != v}
    return ("_vector" if vector else "") + overrides_tag(rest)


def map_label(suffix: str) -> str:
    """A map kind's name in the JSON and the pictures: ``norm``, ``vector``, ..."""
    return suffix.lstrip("_") or "norm"


def row_name(place: str, grade: str, start: str, suffix: str) -> str:
    return f"{place}_{grade}_{start}{suffix}"


def legacy_name(place: str, grade: str, start: str, suffix: str) -> str | None:
    """The name older results gave the row (pedestrian odometry, known or uniform start)."""
    if grade == "pedestrian" and start in ("known", "uniform"):
        return f"{place}_{start}{suffix}"
    return None


def cached_lookup(path: Path) -> FieldLookup:
    """The map file's lookup grid, kept beside it in the scratch folder (a three-axis floor's
    grid takes minutes to predict): the same map file, the same lookup."""
    cache = path.with_suffix(".lookup.pkl")
    if cache.exists() and cache.stat().st_mtime >= path.stat().st_mtime:
        with cache.open("rb") as f:
            return pickle.load(f)
    lookup = FieldLookup.from_map_file(path)
    with cache.open("wb") as f:
        pickle.dump(lookup, f, protocol=pickle.HIGHEST_PROTOCOL)
    return lookup


def build_map(runs: tuple[int, ...], scratch: Path, overrides: dict[str, Any]) -> Path:
    """Stream the runs through the node's pipeline (defaults, or ``overrides``) and save the
    map file."""
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


def settled(
    err: np.ndarray, mask: np.ndarray, first: int = 0, last: int | None = None
) -> int | None:
    """The first update in ``[first, last)`` from which the updates in ``mask`` up to ``last``
    keep the RMSE ≤ 0.5 m and none is off by more than 1 m (a mean over the rest of a run
    hides an early miss); None when there is none."""
    stop = err.size if last is None else last
    index = np.flatnonzero(mask[first:stop]) + first
    if not index.size:
        return None
    e = err[index]
    suffix = np.sqrt(np.cumsum((e**2)[::-1])[::-1] / np.arange(e.size, 0, -1))
    worst = np.maximum.accumulate(e[::-1])[::-1]
    ok = np.flatnonzero((suffix <= CONVERGED_RMSE_M) & (worst <= 2.0 * CONVERGED_RMSE_M))
    return int(index[ok[0]]) if ok.size else None


def runs_of(flags: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of True in ``flags``."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def offmap_stretches(
    err: np.ndarray,
    known: np.ndarray,
    sd: np.ndarray,
    dist: np.ndarray,
    step_s: np.ndarray,
    cuts: tuple[int, ...] = (),
) -> tuple[list[dict[str, Any]], int]:
    """The off-map stretches of ≥ OFFMAP_MIN_M walked entered from a settled segment (module
    docstring), and the count of shorter ones. ``dist`` and ``step_s`` are the distance walked
    and the time at each update; ``cuts``: updates that also start a segment (the carry)."""
    stretches = runs_of(~known)
    long = [(a, b) for a, b in stretches if dist[b - 1] - dist[a] >= OFFMAP_MIN_M]
    short = len(stretches) - len(long)
    bounds = sorted({0, err.size, *cuts, *(a for a, _ in long), *(b for _, b in long)})
    out = []
    for a, b in long:
        before = max(x for x in bounds if x < a) if a > 0 else 0
        entered_settled = a > 0 and settled(err, known, before, a) is not None
        if not entered_settled:
            continue
        nxt = min(x for x in bounds if x > b) if b < err.size else err.size
        back = settled(err, known, b, nxt) if b < err.size else None
        out.append({
            "start_s": float(step_s[a]),
            "length_m": float(dist[b - 1] - dist[a]),
            "seconds": float(step_s[b - 1] - step_s[a]),
            "sd_median_m": float(np.median(sd[a:b])),
            "sd_max_m": float(sd[a:b].max()),
            "error_max_m": float(err[a:b].max()),
            "back_on_map": b < err.size,
            "walked_back_m": float(dist[nxt - 1] - dist[b]) if b < err.size else 0.0,
            "reconverge_m": None if back is None else float(dist[back] - dist[b]),
            "reconverge_s": None if back is None else float(step_s[back] - step_s[b]),
        })  # fmt: skip
    return out, short


class Trace(NamedTuple):
    """What a picture shows of one seed: the true track, the estimates and their position
    covariances, and the carry's first sample (None)."""

    xy: np.ndarray
    estimate: np.ndarray  # [U, 2]
    covariance: np.ndarray  # [U, 2, 2]
    kidnap: int | None


def localize_track(
    lookup: FieldLookup,
    track: Track,
    seed: int,
    start: str,
    config: LocalizerConfig,
    errors: OdometryErrors,
) -> tuple[dict[str, Any], Trace]:
    """One seed of one start on a track with its readings (module docstring)."""
    t = track.time_s
    truth = np.column_stack([track.xy, track.yaw])
    odom = simulate_odometry(t, track.odom_xy, track.odom_yaw, errors, seed).pose
    stamps = np.rint(t * NS_PER_S).astype(np.int64)
    localizer = Localizer(lookup, dataclasses.replace(config, seed=seed))
    rng = np.random.default_rng(10_000 + seed)
    if start == "uniform":
        localizer.initialize_global()
    else:
        localizer.initialize_pose(truth[0] + rng.standard_normal(3) * KNOWN_START_SD)
    injected: list[int] = []  # particles drawn anew by the recovery, so far, at each update
    began = time.perf_counter()
    for i, stamp in enumerate(stamps):
        localizer.add_odometry(int(stamp), odom[i])
        localizer.add_field(int(stamp), track.mag_ut[i])
        while len(injected) < len(localizer.steps):
            injected.append(localizer.injected)
    seconds = time.perf_counter() - began
    steps = localizer.steps
    step_s = np.array([s.stamp_ns / NS_PER_S for s in steps])
    index = np.searchsorted(t, step_s).clip(0, t.size - 1)
    est = np.array([s.estimate.mean for s in steps])
    err = np.linalg.norm(est[:, :2] - truth[index, :2], axis=1)
    heading_err = np.abs(wrap_angle(est[:, 2] - truth[index, 2]))
    sd = np.array([s.estimate.position_sd_m for s in steps])
    known = lookup.is_known(truth[index, :2])
    inside = np.array([s.estimate.covers(truth[i, :2]) for s, i in zip(steps, index, strict=True)])
    dist = walked(track.odom_xy)[index]  # walked, the carry not counted
    dr = align_to_start(odom, truth[0])
    dr_err = np.linalg.norm(dr[:, :2] - truth[:, :2], axis=1)
    out: dict[str, Any] = {
        "seed": seed,
        "updates": len(steps),
        "seconds": seconds,
        "dead_reckoning_rmse_m": float(np.sqrt(np.mean(dr_err**2))),
        "dead_reckoning_final_m": float(dr_err[-1]),
        "dead_reckoning_max_m": float(dr_err.max()),
        "rmse_all_m": float(np.sqrt(np.mean(err**2))),
        # Where the map knows the true place (an unmapped room is walked blind).
        "rmse_known_m": float(np.sqrt(np.mean(err[known] ** 2))) if known.any() else None,
        "known_share": float(known.mean()),
        "ellipse95_all": float(np.mean(inside)),
        "injected": int(localizer.injected),
    }
    k = settled(err, known)
    out["converged"] = k is not None
    if k is not None:
        after = slice(k, None)
        mapped = known[after]
        out |= {
            "rmse_m": float(np.sqrt(np.mean(err[after] ** 2))),
            "rmse_mapped_m": float(np.sqrt(np.mean(err[after][mapped] ** 2))),
            "p95_m": float(np.quantile(err[after], 0.95)),
            "converge_s": float(step_s[k]),
            "converge_m": float(dist[k]),
            "heading_rmse_deg": float(np.degrees(np.sqrt(np.mean(heading_err[after] ** 2)))),
            "ellipse95": float(np.mean(inside[after])),
            "ellipse95_mapped": float(np.mean(inside[after][mapped])),
            "particles_final": int(steps[-1].estimate.particles),
        }
    cuts: tuple[int, ...] = ()
    kidnap_update = None
    if track.kidnap is not None:
        kidnap_update = int(np.searchsorted(index, track.kidnap))
        cuts = (kidnap_update,)
        carried_s = float(t[track.kidnap])
        carried_m = float(walked(track.odom_xy)[track.kidnap])
        r = settled(err, known, kidnap_update)
        drawn = np.asarray(injected)
        before = int(drawn[kidnap_update - 1]) if kidnap_update > 0 else 0
        until = r if r is not None else len(steps) - 1
        out |= {
            "kidnap_s": carried_s,
            "kidnap_walked_m": carried_m,
            "carried_m": float(np.linalg.norm(track.xy[track.kidnap] - track.xy[track.kidnap - 1])),
            "converged_before_kidnap": settled(err, known, 0, kidnap_update) is not None,
            "injected_before_kidnap": before,
            "injected_after_kidnap": int(drawn[until]) - before,
            "recovered": r is not None,
        }
        if r is not None:
            out |= {
                "recovery_s": float(step_s[r] - carried_s),
                "recovery_m": float(dist[r] - carried_m),
            }
    stretches, short = offmap_stretches(err, known, sd, dist, step_s, cuts)
    out |= {"offmap": stretches, "offmap_short": short}
    trace = Trace(track.xy, est[:, :2], np.array([s.estimate.covariance[:2, :2] for s in steps]),
                  track.kidnap)  # fmt: skip
    return out, trace


def median_p90(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.median(values)), float(np.quantile(values, 0.9))


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (and 90th percentiles) over seeds; the keys of older results kept."""

    def values(key: str) -> list[float]:
        return [r[key] for r in per_seed if r.get(key) is not None]

    def median(key: str) -> float | None:
        return median_p90(values(key))[0]

    converged = [r for r in per_seed if r["converged"]]
    converge_s, converge_s_p90 = median_p90(values("converge_s"))
    converge_m, converge_m_p90 = median_p90(values("converge_m"))
    out = {
        "rmse_m": median("rmse_m"),
        "rmse_mapped_m": median("rmse_mapped_m"),
        "rmse_all_m": median("rmse_all_m"),
        "rmse_known_m": median("rmse_known_m"),
        "known_share": median("known_share"),
        "ellipse95_all": median("ellipse95_all"),
        "p95_m": median("p95_m"),
        "converge_s": converge_s,
        "converge_s_p90": converge_s_p90,
        "converge_m": converge_m,
        "converge_m_p90": converge_m_p90,
        "heading_rmse_deg": median("heading_rmse_deg"),
        "ellipse95": median("ellipse95"),
        "ellipse95_mapped": median("ellipse95_mapped"),
        "ellipse95_mapped_min": min(values("ellipse95_mapped"), default=None),
        "dead_reckoning_rmse_m": median("dead_reckoning_rmse_m"),
        "dead_reckoning_final_m": median("dead_reckoning_final_m"),
        "dead_reckoning_max_m": median("dead_reckoning_max_m"),
        "seeds": len(per_seed),
        "converged_seeds": len(converged),
        "never_converged_share": 1.0 - len(converged) / len(per_seed) if per_seed else None,
        "converged_within_30s": sum(r["converge_s"] <= TARGET_UNIFORM_S for r in converged),
        "converged_within_60m": sum(r["converge_m"] <= TARGET_WITHIN_M for r in converged),
    }
    if any("recovered" in r for r in per_seed):
        recovered = [r for r in per_seed if r.get("recovered")]
        recovery_m, recovery_m_p90 = median_p90(values("recovery_m"))
        recovery_s, recovery_s_p90 = median_p90(values("recovery_s"))
        out |= {
            "converged_before_kidnap": sum(r["converged_before_kidnap"] for r in per_seed),
            "noticed_seeds": sum(r["injected_after_kidnap"] > 0 for r in per_seed),
            "recovered_seeds": len(recovered),
            "recovered_within_60m": sum(r["recovery_m"] <= TARGET_WITHIN_M for r in recovered),
            "recovery_m": recovery_m,
            "recovery_m_p90": recovery_m_p90,
            "recovery_s": recovery_s,
            "recovery_s_p90": recovery_s_p90,
            "carried_m": median("carried_m"),
        }
    stretches = [s for r in per_seed for s in r["offmap"]]
    back = [s for s in stretches if s["back_on_map"]]
    again = [s["reconverge_m"] for s in back if s["reconverge_m"] is not None]
    reconverge_m, reconverge_m_p90 = median_p90(again)
    out |= {
        "offmap_stretches": len(stretches),
        "offmap_short": sum(r["offmap_short"] for r in per_seed),
        "offmap_length_m": median_p90([s["length_m"] for s in stretches])[0],
        "offmap_sd_m": median_p90([s["sd_median_m"] for s in stretches])[0],
        "offmap_sd_max_m": max((s["sd_max_m"] for s in stretches), default=None),
        "offmap_back": len(back),
        "reconverged": len(again),
        "reconverged_within_20m": sum(m <= TARGET_REACQUIRE_M for m in again),
        "reconverge_m": reconverge_m,
        "reconverge_m_p90": reconverge_m_p90,
        "per_seed": per_seed,
    }
    return out


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


def seeds_for(args: argparse.Namespace) -> dict[str, int]:
    """Seeds per start: the defaults, ``--seeds`` for every start, ``--uniform-seeds``."""
    counts = {s: args.seeds if args.seeds is not None else n for s, n in DEFAULT_SEEDS.items()}
    if args.uniform_seeds is not None:
        counts["uniform"] = args.uniform_seeds
    return counts


def split_names(text: str, allowed: tuple[str, ...] | list[str], what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise SystemExit(f"{what}: {','.join(unknown) or 'none'}; choose from {','.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds of every start (default: known 10, uniform 20, "
                        "kidnapped 10)")  # fmt: skip
    parser.add_argument("--uniform-seeds", type=int, default=None,
                        help="seeds of the uniform start (over --seeds)")  # fmt: skip
    parser.add_argument("--split", choices=sorted(SPLITS), default="test")
    parser.add_argument("--starts", default=",".join(STARTS))
    parser.add_argument("--grades", default=",".join(GRADES),
                        help="odometry grades: robot (wheels, ±2 %%, 0.05 °/s), pedestrian "
                        "(the odometry module's defaults: ±5 %%, 1 °/s)")  # fmt: skip
    parser.add_argument("--maps", default=",".join(MAP_KINDS),
                        help="map kinds side by side: norm (‖B‖), vector (three-axis, "
                        "target vector, model potential)")  # fmt: skip
    parser.add_argument("--places", default="aalto,building",
                        help="aalto (the Aalto runs, the split's run), building (the office "
                        "floor's last 5 minutes)")  # fmt: skip
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
        help="a mapper parameter added to every map kind; rows are named with it "
        "(aalto5_robot_known_name-value)",
    )
    parser.add_argument("--floor-seed", type=int, default=None,
                        help="validation split only: another validation floor than seed 1 "
                        "(never 0, the test floor)")  # fmt: skip
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/gp_mapper_localization"))
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", type=Path, default=None,
                        help="folder of the pictures (default: beside --json; none without "
                        "either)")  # fmt: skip
    args = parser.parse_args(argv)
    set_cpu_threads(1)
    places = split_names(args.places, ("aalto", "building"), "--places")
    grades = split_names(args.grades, list(GRADES), "--grades")
    kinds = split_names(args.maps, list(MAP_KINDS), "--maps")
    starts = split_names(args.starts, STARTS, "--starts")
    seeds = seeds_for(args)
    if "aalto" in places and not aalto_dir().is_dir():
        print(f"Aalto data not found under {aalto_dir()} (set GP_MAPPER_DATA)", file=sys.stderr)
        return 2
    overrides = parse_overrides(args.set)
    config = LocalizerConfig(**overrides)
    kidnap_config = dataclasses.replace(
        config, **{k: v for k, v in KIDNAP_RECOVERY.items() if k not in overrides}
    )
    args.scratch.mkdir(parents=True, exist_ok=True)
    map_runs, run = SPLITS[args.split]
    floor_seed = FLOOR_SEEDS[args.split]
    if args.floor_seed is not None:
        if args.split != "validation" or args.floor_seed == FLOOR_SEEDS["test"]:
            parser.error("--floor-seed picks a validation floor: --split validation, not seed 0")
        floor_seed = args.floor_seed
    map_set = parse_overrides(args.map_set)
    # Each kind's mapper overrides and row suffix; kinds that come to the same map run once.
    maps: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        merged = {**MAP_KINDS[kind], **map_set}
        maps.setdefault(map_suffix(merged), merged)
    results: dict[str, Any] = {"runs": {}, "maps": {}, "skipped": {}}
    tracks: dict[str, Track] = {}
    lookups: dict[tuple[str, str], FieldLookup] = {}  # (place, suffix)
    if "aalto" in places:
        place = f"aalto{run}"
        for suffix, merged in maps.items():
            path = build_map(map_runs, args.scratch, merged)
            lookups[(place, suffix)] = cached_lookup(path)
        tracks[place] = track_of(*aalto_track(run))
        results["map"] = {"runs": list(map_runs),
                          "overrides": {map_label(s): o for s, o in maps.items()}}  # fmt: skip
    if "building" in places:
        floor = floor_run(floor_seed)
        lookup_s = {}
        for suffix, merged in maps.items():
            path = build_floor_map(floor, floor_seed, args.scratch, merged)
            began = time.perf_counter()
            lookups[("building", suffix)] = cached_lookup(path)
            lookup_s[map_label(suffix)] = time.perf_counter() - began
            print(f"  floor lookup grid ({map_label(suffix)}): {lookup_s[map_label(suffix)]:.0f}"
                  " s", file=sys.stderr)  # fmt: skip
        test = floor.time_s >= FLOOR_MAP_S
        tracks["building"] = track_of(floor.time_s[test] - floor.time_s[test][0],
                                      floor.position_m[test], floor.heading_rad[test],
                                      floor.mag_ut[test])  # fmt: skip
        results["floor"] = {"seed": floor_seed, "map_s": FLOOR_MAP_S, "minutes": FLOOR_MINUTES,
                            "lookup_s": lookup_s}  # fmt: skip
    for (place, suffix), lookup in lookups.items():
        print(f"{place}{suffix} map: known area {lookup.known_area_m2:.1f} m², ℓ "
              f"{lookup.lengthscale_m:.2f} m, noise {lookup.noise}", file=sys.stderr)  # fmt: skip
        results["maps"][f"{place.rstrip('0123456789')}{suffix}"] = {
            "known_area_m2": lookup.known_area_m2, "lengthscale_m": lookup.lengthscale_m,
            "noise": dataclasses.asdict(lookup.noise), "field": lookup.has_field,
        }  # fmt: skip
    # The kidnapped walks, one per place and seed, placed by the first map's known cells.
    kidnapped: dict[tuple[str, int], Track | None] = {}
    if "kidnapped" in starts:
        for place, track in tracks.items():
            lookup = lookups[(place, next(iter(maps)))]
            known = lookup.is_known(track.xy)
            for seed in range(seeds["kidnapped"]):
                kidnapped[(place, seed)] = kidnapped_track(track, known, seed)
    plot_grade = "robot" if "robot" in grades else grades[0]
    traces: dict[tuple[str, str, str], Trace] = {}
    jobs = []
    for place in tracks:
        for grade in grades:
            for start in starts:
                for suffix in maps:
                    name = row_name(place, grade, start, suffix)
                    if start == "kidnapped" and kidnapped[(place, 0)] is None:
                        why = (f"no place ≥ {KIDNAP_MIN_M:g} m from the kidnap point with "
                               f"{KIDNAP_MIN_REST_M:g} m of walk after it")  # fmt: skip
                        results["skipped"][name] = why
                        print(f"  {name}: skipped, {why}", file=sys.stderr)
                        continue
                    jobs.append((place, grade, start, suffix, name))
    total = sum(seeds[start] for _, _, start, _, _ in jobs)
    began = time.perf_counter()
    done = 0
    for place, grade, start, suffix, name in jobs:
        lookup = lookups[(place, suffix)]
        per_seed = []
        for seed in range(seeds[start]):
            track = tracks[place]
            if start == "kidnapped":
                track = kidnapped[(place, seed)]
                if track is None:
                    continue
            use = kidnap_config if start == "kidnapped" else config
            record, trace = localize_track(lookup, track, seed, start, use, GRADES[grade])
            per_seed.append(record)
            if seed == 0 and grade == plot_grade and start in ("known", "kidnapped"):
                traces[(place, suffix, start)] = trace
            done += 1
            elapsed = time.perf_counter() - began
            eta = elapsed / done * (total - done)
            r = record
            extra = ""
            if start == "kidnapped":
                extra = (f", recovered {r.get('recovery_m', math.nan):.0f} m after the carry"
                         f" (particles drawn anew {r['injected_after_kidnap']})")  # fmt: skip
            rmse_known = r["rmse_known_m"] if r["rmse_known_m"] is not None else math.nan
            print(f"  {name} seed {seed}: rmse {rmse_known:.2f} m where mapped, converged "
                  f"{r.get('converge_s', math.nan):.0f} s "
                  f"{r.get('converge_m', math.nan):.0f} m{extra}, dead reckoning "
                  f"{r['dead_reckoning_rmse_m']:.2f} m ({done}/{total}, ETA {eta:.0f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip
        summary = summarise(per_seed)
        summary |= {"place": place, "grade": grade, "start": start, "map": map_label(suffix)}
        results["runs"][name] = summary
    for place, grade, start, suffix, name in jobs:
        old = legacy_name(place, grade, start, suffix)
        if old is not None:
            results["runs"][old] = {k: v for k, v in results["runs"][name].items()
                                    if k != "per_seed"} | {"same_as": name}  # fmt: skip
    if not args.no_speed:
        results["speeds"] = {}
        for suffix in maps:
            place = next(p for p, s in lookups if s == suffix)
            print(f"  speed: {place}{suffix} map", file=sys.stderr, flush=True)
            rates = speed(lookups[(place, suffix)], config)
            results["speeds"][map_label(suffix)] = {"place": place, **rates}
        results["speed"] = next(iter(results["speeds"].values()))  # older results' key
    results["params"] = dataclasses.asdict(config)
    results["kidnap_params"] = {k: getattr(kidnap_config, k) for k in KIDNAP_RECOVERY}
    results["grades"] = {g: dataclasses.asdict(GRADES[g]) for g in grades}
    results["seeds"] = seeds
    results["split"] = args.split
    folder = args.plot or (Path(args.json).parent if args.json else None)
    if folder is not None and traces:
        from localization_plot import plot_place

        stem = Path(args.json).stem if args.json else "localization"
        results["plots"] = []
        for (place, suffix), lookup in lookups.items():
            panels = {s: traces[(place, suffix, s)] for s in ("known", "kidnapped")
                      if (place, suffix, s) in traces}  # fmt: skip
            if panels:
                path = folder / f"{stem}_{place}_{map_label(suffix)}.png"
                title = f"{place}, {map_label(suffix)} map, {plot_grade} odometry, seed 0"
                plot_place(path, lookup, panels, title)
                results["plots"].append(str(path))
                print(f"wrote {path}", file=sys.stderr)
    print_table(results)
    write_json(args.json, {**results, "env": run_env()})
    return 0


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def pair(r: dict[str, Any], key: str, digits: int = 1) -> str:
    """``median / p90`` of a key."""
    return f"{fmt(r[key], digits)} / {fmt(r[f'{key}_p90'], digits)}"


def print_table(results: dict[str, Any]) -> None:
    runs = {name: r for name, r in results["runs"].items() if "same_as" not in r}
    rows = [
        [name, f"{r['converged_seeds']}/{r['seeds']}", fmt(r["never_converged_share"]),
         pair(r, "converge_m"), pair(r, "converge_s"), fmt(r["rmse_all_m"]),
         fmt(r["rmse_known_m"]), fmt(r["rmse_mapped_m"]), fmt(r["p95_m"]),
         fmt(r["heading_rmse_deg"], 1),
         f"{fmt(r['ellipse95_all'])} / {fmt(r['ellipse95_mapped'])}",
         fmt(r["dead_reckoning_rmse_m"]), fmt(r["dead_reckoning_max_m"]),
         f"{r['converged_within_30s']} / {r['converged_within_60m']}"]
        for name, r in runs.items()
    ]  # fmt: skip
    headers = ["run", "converged", "never", "converge m (median / p90)", "converge s",
               "RMSE all m", "RMSE where mapped m", "RMSE after, mapped m", "p95 after m",
               "heading after °", "in 95 % ellipse all / after (mapped)",
               "dead reckoning RMSE m", "DR max m", "within 30 s / 60 m"]  # fmt: skip
    print(f"# magnetic localization, {results['split']} split (medians over seeds; ‖B‖ and "
          "three-axis (_vector) rows side by side)")  # fmt: skip
    print(format_table(headers, rows))
    kidnaps = {name: r for name, r in runs.items() if "recovered_seeds" in r}
    if kidnaps:
        rows = [
            [name, f"{r['converged_before_kidnap']}/{r['seeds']}", fmt(r["carried_m"], 1),
             f"{r['noticed_seeds']}/{r['seeds']}", f"{r['recovered_seeds']}/{r['seeds']}",
             f"{r['recovered_within_60m']}/{r['seeds']}", pair(r, "recovery_m"),
             pair(r, "recovery_s")]
            for name, r in kidnaps.items()
        ]  # fmt: skip
        headers = ["run", "converged before", "carried m", "particles drawn anew", "recovered",
                   "within 60 m", "recovery m (median / p90)", "recovery s"]  # fmt: skip
        print("\n# kidnapped: carried at mid-walk, recovery walked after the carry")
        print(format_table(headers, rows))
    offmap = {name: r for name, r in runs.items() if r["offmap_stretches"]}
    if offmap:
        rows = [
            [name, str(r["offmap_stretches"]), str(r["offmap_short"]),
             fmt(r["offmap_length_m"], 1), fmt(r["offmap_sd_m"]), fmt(r["offmap_sd_max_m"]),
             f"{r['reconverged']}/{r['offmap_back']}",
             f"{r['reconverged_within_20m']}/{r['offmap_back']}", pair(r, "reconverge_m")]
            for name, r in offmap.items()
        ]  # fmt: skip
        headers = ["run", "stretches", f"shorter than {OFFMAP_MIN_M:g} m", "length m",
                   "spread sd m (median)", "sd max m", "re-converged", "within 20 m",
                   "re-converge m (median / p90)"]  # fmt: skip
        print("\n# off the map (stretches entered on track, all seeds): apart from convergence")
        print(format_table(headers, rows))
    for name, why in results.get("skipped", {}).items():
        print(f"{name}: skipped, {why}")
    for label, s in results.get("speeds", {}).items():
        print(f"filter updates per second, {label} map ({s['place']}): " + ", ".join(
            f"{p} particles {u:.0f}/s" for p, u in zip(s["particles"], s["updates_per_s"],
                                                       strict=True)))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
