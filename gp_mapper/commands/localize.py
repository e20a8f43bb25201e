"""``gp-mapper localize``: run the magnetic localizer on a bag against a map, offline.

The same filter as the node (``gp_mapper.mapping.localization``), fed the bag's magnetometer
and odometry in stamp order as fast as it goes. The odometry comes from a topic (``/odom``:
nav_msgs/Odometry or a pose topic of the base, the reading taken in the base's axes) or, as the
node's ``odom_source tf``, from the bag's TF (``odom -> base_link`` on ``/tf`` at each reading's
stamp, the magnetometer's mounting ``base_link -> its frame`` from ``/tf_static``): the filter
then tracks the sensor's point and everything written is the base's pose, as the node's
``amcl_pose``. Writes the estimated trajectory (``trajectory.csv``), a picture of it over the
map (``localization.png``: the map's ‖B‖, the ground truth where the bag has it, dead reckoning
from the same start, the estimate with its 95 % ellipses) and the statistics
(``localization.json``: drops and updates, and the errors where the bag has a ground-truth
pose topic).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gp_mapper.io import bag_info, read_bag
from gp_mapper.io.bag_source import TF_SOURCE, TOPIC_SOURCE, BagInfo
from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC
from gp_mapper.io.errors import BagError, IoLayerError
from gp_mapper.io.odometry import align_to_start
from gp_mapper.io.pose_types import TF_TOPIC
from gp_mapper.mapping import FieldReading
from gp_mapper.mapping.atomic import atomic_write_text
from gp_mapper.mapping.errors import MapFileError
from gp_mapper.mapping.localization import (
    CHI2_2D_95,
    FieldLookup,
    Localizer,
    LocalizerConfig,
    Step,
    settings,
)
from gp_mapper.mapping.localization.motion import planar_pose, wrap_angle
from gp_mapper.mapping.localization.tf_odometry import (
    PosedReading,
    TfOdometry,
    base_pose,
    base_poses,
    feed_posed,
    seconds_to_ns,
    tracked_odometry,
)
from gp_mapper.mapping.params_file import parse_overrides
from gp_mapper.mapping.records import StaticTransform

from . import options
from .progress import Progress

_LOG = logging.getLogger(__name__)

DEFAULT_ODOM_TOPIC = "/odom"
DEFAULT_TRUTH_TOPIC = "/pose"
MICROTESLA_PER_TESLA = 1e6
NS_PER_S = 1_000_000_000
ELLIPSES_SHOWN = 15
AUTO_SOURCE = "auto"
ODOM_SOURCES = (AUTO_SOURCE, TF_SOURCE, TOPIC_SOURCE)


class LocalizeResult(NamedTuple):
    steps: list[Step]
    drops: dict[str, int]
    stats: dict[str, Any]
    outputs: list[Path]


def add_localize_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_bag(parser)
    parser.add_argument("--map", type=Path, required=True, help="map file (map_state.npz)")
    options.add_out(parser)
    options.add_mag_topic(parser)
    parser.add_argument("--odom-source", choices=ODOM_SOURCES, default=AUTO_SOURCE,
                        help="where the odometry comes from: topic = --odom-topic; tf = "
                        "--odom-frame -> --base-frame on /tf and the magnetometer's mounting "
                        "from /tf_static, as the node's odom_source tf; auto = the topic where "
                        "the bag has it, else /tf")  # fmt: skip
    parser.add_argument("--odom-topic", default=DEFAULT_ODOM_TOPIC,
                        help="odometry topic (nav_msgs/Odometry, or a pose topic)")  # fmt: skip
    parser.add_argument("--odom-frame", default=settings.default("odom_frame_id"),
                        help="(tf) the odometry's frame")  # fmt: skip
    parser.add_argument("--base-frame", default=settings.default("base_frame_id"),
                        help="(tf) the robot's base: --initial-pose and the poses written are "
                        "this frame's")  # fmt: skip
    parser.add_argument("--truth-topic", default=DEFAULT_TRUTH_TOPIC,
                        help="ground-truth pose topic, scored where the bag has it "
                        "('' for none)")  # fmt: skip
    parser.add_argument("--initial-pose", default=None, metavar="X,Y,YAW",
                        help="start around this map-frame pose of the base (m, m, rad), as "
                        "AMCL's initialpose; default: a global start over the map's known "
                        "area")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the filter's random stream")
    options.add_set(parser, "a filter setting (docs/localization.md)", "batch_distance_m=0.2")


def _poses(bag: Path, mag_topic: str, pose_topic: str) -> tuple[np.ndarray, np.ndarray]:
    """(stamps [K] ns, poses [K, 3] x, y, yaw) of a pose topic."""
    stamps, poses = [], []
    for record in read_bag(bag, mag_topic, pose_topic, pose_type="auto"):
        if not isinstance(record, FieldReading):
            stamps.append(record.stamp_ns)
            poses.append(planar_pose(record))
    return np.array(stamps, dtype=np.int64), np.array(poses, dtype=np.float64).reshape(-1, 3)


class _Fed(NamedTuple):
    """What a feed of the filter leaves: the steps as the base's poses, the drops, and the
    base's odometry (stamps [K] ns, poses [K, 3]) for the dead reckoning."""

    steps: list[Step]
    drops: Counter[str]
    odom_stamps: np.ndarray
    odom_poses: np.ndarray


def odometry_source(info: BagInfo, odom_source: str, odom_topic: str) -> str:
    """``tf`` or ``topic``: ``odom_source`` itself, or for ``auto`` the odometry topic where the
    bag has it, else ``/tf`` where it has that.

    Raises:
        BagError: ``auto`` and the bag has neither (the message names both and lists the bag's
            topics), or an unknown ``odom_source``.
    """
    if odom_source not in ODOM_SOURCES:
        raise BagError(f"unknown odometry source {odom_source!r}; expected one of "
                       f"{', '.join(ODOM_SOURCES)}")  # fmt: skip
    if odom_source != AUTO_SOURCE:
        return odom_source
    if odom_topic in info.topics:
        return TOPIC_SOURCE
    if TF_TOPIC in info.topics:
        return TF_SOURCE
    listing = ", ".join(f"{name} [{t.msgtype}]" for name, t in info.topics.items())
    raise BagError(
        f"{info.path}: no odometry: neither the odometry topic {odom_topic} nor {TF_TOPIC} "
        f"is in the bag; it holds {listing or 'no topics'}"
    )


def localize_bag(
    bag: Path,
    map_path: Path,
    out: Path,
    *,
    mag_topic: str = DEFAULT_MAG_TOPIC,
    odom_source: str = AUTO_SOURCE,
    odom_topic: str = DEFAULT_ODOM_TOPIC,
    odom_frame: str = settings.default("odom_frame_id"),
    base_frame: str = settings.default("base_frame_id"),
    truth_topic: str = DEFAULT_TRUTH_TOPIC,
    initial_pose: tuple[float, float, float] | None = None,
    config: LocalizerConfig | None = None,
    progress: bool = True,
) -> LocalizeResult:
    """Localize ``bag`` against ``map_path`` and write the outputs into ``out``.

    ``odom_source`` (``auto``, ``tf`` or ``topic``) picks the odometry as
    :func:`odometry_source`; ``initial_pose`` is the base's pose in the map frame.

    Raises:
        MapFileError: the map cannot be read or is not a map of ‖B‖.
        IoLayerError: the bag or a topic is missing or damaged, or the bag has no odometry.
    """
    lookup = FieldLookup.from_map_file(map_path)
    info = bag_info(bag)
    source = odometry_source(info, odom_source, odom_topic)
    if source == TF_SOURCE and TF_TOPIC not in info.topics:
        raise BagError(f"{bag}: no {TF_TOPIC} in the bag for --odom-source tf")
    has_truth = bool(truth_topic) and truth_topic in info.topics
    localizer = Localizer(lookup, config)
    if initial_pose is None:
        localizer.initialize_global()
    start = None if initial_pose is None else np.asarray(initial_pose, dtype=np.float64)
    bar = Progress(f"localize {bag.name}") if progress else None
    total = max(info.message_count, 1)

    def report(count: int) -> None:
        if bar is not None and count % 500 == 0:
            bar.update(count / total, f"{len(localizer.steps)} updates")

    if source == TF_SOURCE:
        tf = TfOdometry(
            odom_frame, base_frame,
            timeout_ns=seconds_to_ns(settings.default("transform_timeout")),
            max_gap_ns=seconds_to_ns(settings.default("max_transform_gap")),
            ignored=((settings.default("global_frame_id"), odom_frame),),
        )  # fmt: skip
        fed = _feed_tf(bag, mag_topic, localizer, tf, start, report)
    else:
        if start is not None:
            localizer.initialize_pose(start)
        fed = _feed_topic(bag, mag_topic, odom_topic, localizer, report)
    if bar is not None:
        bar.done(f"{len(localizer.steps)} updates")
    truth = _poses(bag, mag_topic, truth_topic) if has_truth else None
    out.mkdir(parents=True, exist_ok=True)
    steps = fed.steps
    stats = statistics(steps, truth, fed.odom_stamps, fed.odom_poses)
    stats |= {"drops": dict(fed.drops), "updates": len(steps), "odom_source": source,
              "start": "global" if initial_pose is None else list(initial_pose),
              "config": dataclasses.asdict(localizer.config)}  # fmt: skip
    outputs = [
        write_trajectory(out / "trajectory.csv", steps, truth),
        write_stats(out / "localization.json", stats),
        write_picture(out / "localization.png", lookup, steps, truth,
                      fed.odom_stamps, fed.odom_poses, start),
    ]  # fmt: skip
    return LocalizeResult(steps, dict(fed.drops), stats, outputs)


def _feed_topic(
    bag: Path, mag_topic: str, odom_topic: str, localizer: Localizer, report: Callable[[int], None]
) -> _Fed:
    """The bag's magnetometer and odometry topic into the filter, in stamp order."""
    odom_stamps, odom_poses = [], []
    for count, record in enumerate(read_bag(bag, mag_topic, odom_topic, pose_type="auto")):
        if isinstance(record, FieldReading):
            localizer.add_field(record.stamp_ns, np.asarray(record.field_t) * MICROTESLA_PER_TESLA)
        else:
            pose = planar_pose(record)
            localizer.add_odometry(record.stamp_ns, pose)
            odom_stamps.append(record.stamp_ns)
            odom_poses.append(pose)
        report(count)
    return _Fed(list(localizer.steps), Counter(localizer.drops), np.array(odom_stamps),
                np.array(odom_poses).reshape(-1, 3))  # fmt: skip


def _feed_tf(
    bag: Path,
    mag_topic: str,
    localizer: Localizer,
    tf: TfOdometry,
    start: np.ndarray | None,
    report: Callable[[int], None],
) -> _Fed:
    """The bag's magnetometer, /tf and /tf_static through ``tf`` into the filter, as the node
    feeds it: each reading posed at its stamp gives the filter the odometry of the sensor's
    point (when its stamp is newer) and the reading with its attitude. A start (the base's
    pose) waits for the first posed reading, whose lever arm turns it into the point's; the
    steps come back as the base's poses, each through the lever arm of its time."""
    levers: list[np.ndarray] = []  # the lever arm at each step
    odom_stamps: list[int] = []
    odom_poses: list[np.ndarray] = []  # the base's, in the odom frame

    def feed(posed: PosedReading) -> None:
        nonlocal start
        if start is not None:
            localizer.initialize_pose(tracked_odometry(start[:2], float(start[2]), posed.lever_m))
            start = None
        if feed_posed(localizer, posed, odom_stamps[-1] if odom_stamps else None):
            odom_stamps.append(posed.stamp_ns)
            odom_poses.append(base_poses(posed.odometry[None, :], posed.lever_m)[0])
        levers.extend([posed.lever_m] * (len(localizer.steps) - len(levers)))

    records = read_bag(bag, mag_topic, pose_source=TF_SOURCE)
    for count, record in enumerate(records):
        if isinstance(record, FieldReading):
            field_ut = np.asarray(record.field_t) * MICROTESLA_PER_TESLA
            posed = tf.add_reading(record.stamp_ns, field_ut, record.frame_id)
        elif isinstance(record, StaticTransform):
            posed = tf.add_transform(record.transform, static=True)
        else:
            posed = tf.add_transform(record, static=False)
        for reading in posed:
            feed(reading)
        report(count)
    drops = Counter(localizer.drops) + tf.drops
    if tf.pending:  # the bag ended before their transforms came
        drops["waiting_at_end_of_bag"] += tf.pending
    steps = []
    for step, lever in zip(localizer.steps, levers, strict=True):
        mean, covariance = base_pose(step.estimate.mean, step.estimate.covariance, lever)
        steps.append(step._replace(
            odometry=base_poses(step.odometry[None, :], lever)[0],
            estimate=step.estimate._replace(mean=mean, covariance=covariance),
        ))  # fmt: skip
    return _Fed(steps, drops, np.array(odom_stamps, dtype=np.int64),
                np.array(odom_poses).reshape(-1, 3))  # fmt: skip


def _truth_at(truth: tuple[np.ndarray, np.ndarray], stamps_ns: np.ndarray) -> np.ndarray:
    """The truth pose nearest in time to each stamp."""
    t, poses = truth
    i = np.searchsorted(t, stamps_ns).clip(1, t.size - 1)
    i = np.where(np.abs(t[i - 1] - stamps_ns) <= np.abs(t[i] - stamps_ns), i - 1, i)
    return poses[i]


def statistics(
    steps: list[Step],
    truth: tuple[np.ndarray, np.ndarray] | None,
    odom_stamps: np.ndarray,
    odom_poses: np.ndarray,
) -> dict[str, Any]:
    """Error statistics against the ground truth (none without it)."""
    if not steps:
        return {"truth": truth is not None}
    out: dict[str, Any] = {"truth": truth is not None,
                           "converged_at_end": bool(steps[-1].converged)}  # fmt: skip
    if truth is None or truth[0].size < 2:
        return out
    stamps = np.array([s.stamp_ns for s in steps])
    est = np.array([s.estimate.mean for s in steps])
    real = _truth_at(truth, stamps)
    err = np.linalg.norm(est[:, :2] - real[:, :2], axis=1)
    heading = np.abs(wrap_angle(est[:, 2] - real[:, 2]))
    inside = [s.estimate.covers(r[:2]) for s, r in zip(steps, real, strict=True)]
    first = next((k for k, s in enumerate(steps) if s.converged), None)
    out |= {
        "rmse_m": float(np.sqrt(np.mean(err**2))),
        "p95_m": float(np.quantile(err, 0.95)),
        "final_error_m": float(err[-1]),
        "heading_rmse_deg": float(np.degrees(np.sqrt(np.mean(heading**2)))),
        "ellipse95": float(np.mean(inside)),
        "first_converged_s": None if first is None
        else float((stamps[first] - stamps[0]) / NS_PER_S),
    }  # fmt: skip
    if first is not None:
        out["rmse_after_converged_m"] = float(np.sqrt(np.mean(err[first:] ** 2)))
    if odom_poses.shape[0] >= 2:
        dead = align_to_start(odom_poses, _truth_at(truth, odom_stamps[:1])[0])
        dr_err = np.linalg.norm(dead[:, :2] - _truth_at(truth, odom_stamps)[:, :2], axis=1)
        out["dead_reckoning_rmse_m"] = float(np.sqrt(np.mean(dr_err**2)))
        out["dead_reckoning_max_m"] = float(dr_err.max())
    return out


def write_trajectory(
    path: Path, steps: list[Step], truth: tuple[np.ndarray, np.ndarray] | None
) -> Path:
    header = ("stamp_ns,x,y,yaw,var_x,cov_xy,var_y,var_yaw,particles,effective_size,converged,"
              "observed_ut,map_sd_ut")  # fmt: skip
    real = None
    if truth is not None and truth[0].size and steps:
        header += ",truth_x,truth_y,truth_yaw,error_m"
        real = _truth_at(truth, np.array([s.stamp_ns for s in steps]))
    lines = [header]
    for k, s in enumerate(steps):
        m, c = s.estimate.mean, s.estimate.covariance
        row = (f"{s.stamp_ns},{m[0]:.4f},{m[1]:.4f},{m[2]:.5f},{c[0, 0]:.6g},{c[0, 1]:.6g},"
               f"{c[1, 1]:.6g},{c[2, 2]:.6g},{s.estimate.particles},"
               f"{s.estimate.effective_size:.1f},{int(s.converged)},{s.observed_ut:.3f},"
               f"{s.predicted_sd_ut:.3f}")  # fmt: skip
        if real is not None:
            error = math.hypot(m[0] - real[k, 0], m[1] - real[k, 1])
            row += f",{real[k, 0]:.4f},{real[k, 1]:.4f},{real[k, 2]:.5f},{error:.4f}"
        lines.append(row)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def write_stats(path: Path, stats: dict[str, Any]) -> Path:
    atomic_write_text(path, json.dumps(stats, indent=1) + "\n")
    return path


def write_picture(
    path: Path,
    lookup: FieldLookup,
    steps: list[Step],
    truth: tuple[np.ndarray, np.ndarray] | None,
    odom_stamps: np.ndarray,
    odom_poses: np.ndarray,
    start: np.ndarray | None = None,
) -> Path:
    """The picture; dead reckoning from the true start where the bag has the truth, else from
    ``start`` (the given initial pose) where there is one."""
    from matplotlib.figure import Figure  # deferred: matplotlib takes ~0.3 s to import
    from matplotlib.patches import Ellipse

    figure = Figure(figsize=(8, 7), dpi=110)
    axes = figure.add_subplot()
    x0, x1, y0, y1 = lookup.grid.extent
    shown = np.where(lookup.known, lookup.mean_grid, np.nan)
    image = axes.imshow(shown, origin="lower", extent=(x0, x1, y0, y1), cmap="viridis")
    figure.colorbar(image, ax=axes, label="map ‖B‖ [µT]", shrink=0.8)
    anchor, anchored = start, "the given start"
    if truth is not None and truth[0].size:
        axes.plot(truth[1][:, 0], truth[1][:, 1], color="black", lw=1.0, label="ground truth")
        anchor, anchored = _truth_at(truth, odom_stamps[:1])[0], "the true start"
    if anchor is not None and odom_poses.shape[0] >= 2:
        dead = align_to_start(odom_poses, anchor)
        axes.plot(dead[:, 0], dead[:, 1], color="tab:orange", lw=0.8, ls="--",
                  label=f"dead reckoning (from {anchored})")  # fmt: skip
    if steps:
        est = np.array([s.estimate.mean for s in steps])
        axes.plot(est[:, 0], est[:, 1], color="tab:red", lw=1.0, label="estimate")
        # The ellipses of a converged filter: a lost one's cover the room and hide the rest.
        held = [s for s in steps if s.converged]
        for s in held[:: max(1, len(held) // ELLIPSES_SHOWN)]:
            values, vectors = np.linalg.eigh(s.estimate.covariance[:2, :2])
            width, height = 2 * np.sqrt(np.maximum(values, 0.0) * CHI2_2D_95)
            angle = math.degrees(math.atan2(vectors[1, 1], vectors[0, 1]))
            axes.add_patch(Ellipse(tuple(s.estimate.mean[:2]), width, height, angle=angle - 90,
                                   fill=False, color="tab:red", lw=0.5, alpha=0.7))  # fmt: skip
    axes.set(xlabel="x [m]", ylabel="y [m]", xlim=(x0, x1), ylim=(y0, y1),
             title="magnetic localization (95 % ellipses once converged)")  # fmt: skip
    axes.set_aspect("equal")
    axes.legend(loc="lower left", fontsize=8, framealpha=0.8)
    figure.savefig(path)
    return path


def _pose_argument(text: str) -> tuple[float, float, float]:
    parts = [float(v) for v in text.split(",")]
    if len(parts) != 3 or not all(math.isfinite(v) for v in parts):
        raise ValueError(f"--initial-pose takes X,Y,YAW (three finite numbers); got {text!r}")
    return parts[0], parts[1], parts[2]


def run_localize(args: argparse.Namespace) -> int:
    try:
        overrides = parse_overrides(args.set)
        config = LocalizerConfig(**{**overrides, "seed": args.seed})
        initial = None if args.initial_pose is None else _pose_argument(args.initial_pose)
    except (TypeError, ValueError) as err:
        print(f"gp-mapper localize: error: {err}", file=sys.stderr)
        return 2
    try:
        result = localize_bag(
            args.bag, args.map, args.out, mag_topic=args.mag_topic,
            odom_source=args.odom_source, odom_topic=args.odom_topic,
            odom_frame=args.odom_frame, base_frame=args.base_frame,
            truth_topic=args.truth_topic, initial_pose=initial, config=config,
        )  # fmt: skip
    except (MapFileError, IoLayerError) as err:
        print(f"gp-mapper localize: error: {err}", file=sys.stderr)
        return 1
    print(summary(result))
    return 0


def summary(result: LocalizeResult) -> str:
    s = result.stats
    odometry = "/tf" if s["odom_source"] == TF_SOURCE else "the odometry topic"
    lines = [f"localized: {s['updates']} filter updates, odometry from {odometry}; drops: "
             f"{s['drops'] or 'none'}"]  # fmt: skip
    if "rmse_m" in s:
        converged = s.get("first_converged_s")
        lines.append(
            f"against the ground truth: RMSE {s['rmse_m']:.2f} m (p95 {s['p95_m']:.2f} m, "
            f"final {s['final_error_m']:.2f} m), heading {s['heading_rmse_deg']:.1f}°, truth in "
            f"the 95 % ellipse {100 * s['ellipse95']:.0f} %; first converged "
            + ("never" if converged is None else f"at {converged:.1f} s")
        )
        if "dead_reckoning_rmse_m" in s:
            lines.append(f"dead reckoning alone: RMSE {s['dead_reckoning_rmse_m']:.2f} m, "
                         f"largest error {s['dead_reckoning_max_m']:.2f} m")  # fmt: skip
    elif s.get("updates"):
        lines.append("no ground truth in the bag: nothing scored")
    lines += [f"wrote {p}" for p in result.outputs]
    return "\n".join(lines)
