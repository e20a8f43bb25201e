"""``gp-mapper convert``: build a replayable rosbag2 from a data set.

``gp-mapper convert aalto DATA_DIR OUT_BAG`` converts the Aalto recordings;
``gp-mapper convert synthetic OUT_BAG`` writes a simulated run through the synthetic room (with
``--robot``, as a robot records it: TF and the magnetometer in its own frame), and
``gp-mapper convert building OUT_BAG`` a walk of the synthetic 60 × 40 m office floor.
An OUT_BAG named ``*.mcap`` or ``*.db3`` becomes that one storage file (as ``ros2 bag``
and rosbags open it); any other name becomes a rosbag2 directory. This module is a command
line front: it prints a short summary to stdout and one-line errors to stderr.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from gp_mapper.io.bag_convert import convert_aalto
from gp_mapper.io.bag_source import STORAGE_SUFFIXES
from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC, STORAGE_PLUGINS
from gp_mapper.io.building import (
    DEFAULT_DURATION_S,
    DEFAULT_PASS_OFFSET_UT,
    DEFAULT_POSE_RATE_HZ,
    DEFAULT_WALK_RATE_HZ,
    write_building_bag,
)
from gp_mapper.io.errors import BagError, DatasetError
from gp_mapper.io.pose_types import POSE_MSGTYPES
from gp_mapper.io.robot_bag import (
    DEFAULT_HARD_IRON_UT,
    TF_MSGTYPE,
    TF_STATIC_TOPIC,
    TF_TOPIC,
    write_synthetic_robot_bag,
)
from gp_mapper.io.synthetic import write_synthetic_bag

__all__ = [
    "EXAMPLES",
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "add_convert_arguments",
    "run_convert",
    "write_as_named",
]

EXIT_OK = 0
EXIT_FAILED = 1  # the output could not be written (exists, disk, rosbags)
EXIT_BAD_INPUT = 2  # the input data is missing or malformed (argparse's usage-error code)
_PROG = "gp-mapper convert"
DEFAULT_STORAGE = "mcap"
# Summary = BagSummary | ConvertSummary: both NamedTuples with an ``out_bag`` field.
Summary = TypeVar("Summary")

EXAMPLES = """\
examples:
  gp-mapper convert synthetic demo.mcap --duration 60
  gp-mapper convert synthetic robot.mcap --robot --hard-iron 12 -8 5
  gp-mapper convert building floor.mcap --seed 1
  gp-mapper convert aalto data/ aalto.mcap --sequences 1,2,3
  gp-mapper convert aalto data/ aalto_bag --storage sqlite3 --force
  gp-mapper convert aalto data/ run5.mcap --sequences 5 --odometry-seed 0

OUT_BAG ending in .mcap or .db3 is written as that one file; any other name as a
rosbag2 directory (metadata.yaml beside the storage file).
"""


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``aalto``, ``synthetic`` and ``building`` sources and their options to ``parser``.

    The chosen source is stored in ``args.convert_source``; call :func:`run_convert` with the
    parsed namespace.
    """
    parser.epilog = EXAMPLES
    sources = parser.add_subparsers(dest="convert_source", metavar="SOURCE", required=True)

    aalto = sources.add_parser(
        "aalto",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
        help="the Aalto robot magnetometer recordings (Solin et al. 2018)",
        description="Convert Aalto magnetometer sequences into one rosbag2 "
        "(MagneticField in tesla on the mag topic, PoseStamped in frame map on the pose topic).",
    )
    aalto.add_argument(
        "data_dir",
        type=Path,
        metavar="DATA_DIR",
        help="folder holding one sub-folder per sensor (invensense/ ...)",
    )
    aalto.add_argument("out_bag", type=Path, metavar="OUT_BAG", help=_OUT_BAG_HELP)
    aalto.add_argument(
        "--sensor", default="invensense", help="sensor folder (default: %(default)s)"
    )
    aalto.add_argument(
        "--sequences",
        type=_sequence_list,
        default=(1, 2, 3, 4, 5),
        help="comma-separated sequence numbers, in time-line order "
        "(default: 1,2,3,4,5, the stationary-field sequences)",
    )
    aalto.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=None,
        help="keep only the first seconds of each sequence",
    )
    aalto.add_argument(
        "--field-frame",
        choices=("body", "room"),
        default="body",
        help="body (default): the recorded room-frame field rotated by minus the pose's "
        "heading, so the node's target: vector, x, y or z rotates it back to the recorded "
        "vector exactly; room: the recorded vector as is (right for target: norm only, any "
        "other target would apply the heading twice)",
    )
    aalto.add_argument(
        "--odometry-seed",
        type=int,
        default=None,
        metavar="SEED",
        help="also write wheel odometry made from the track, with a drifting distance scale "
        "and gyro (nav_msgs/Odometry on /odom, frame odom; seeded), for gp-mapper localize",
    )
    _add_common(aalto)

    synthetic = sources.add_parser(
        "synthetic",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
        help="a simulated run through the synthetic 8 m x 6 m room",
        description="Simulate a robot run through the synthetic magnetic world and write it "
        "in the same layout as the Aalto conversion.\n"
        "With --robot, write it as a robot records it (gp_mapper.io.robot_bag): /tf with\n"
        "drifting wheel odometry and a localizer's map -> odom, /tf_static with the\n"
        "magnetometer's mounting, and the readings in imu_link with a hard-iron offset.",
    )
    _add_simulated(synthetic, seed="world and noise seed", duration_s=180.0, rate_hz=50.0)
    synthetic.add_argument(
        "--heading-bias",
        type=float,
        default=0.0,
        metavar="UT",
        help="add a heading-dependent bias of this amplitude (µT) to ‖B‖: the fixed "
        "compass-deviation curve of gp_mapper.io.synthetic.HEADING_BIAS_SHAPE (default: none)",
    )
    synthetic.add_argument(
        "--robot",
        action="store_true",
        help="a robot's recording: /tf, /tf_static, no pose topic",
    )
    synthetic.add_argument(
        "--hard-iron",
        type=float,
        nargs=3,
        default=None,
        metavar=("X", "Y", "Z"),
        help="with --robot: the magnetometer's hard-iron offset in its own axes, µT (default: "
        + " ".join(f"{v:g}" for v in DEFAULT_HARD_IRON_UT)
        + ")",
    )

    building = sources.add_parser(
        "building",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
        help="a walk of the synthetic 60 m x 40 m office floor (benchmarks/building.py's)",
        description="Walk the synthetic office floor (corridors and rooms over buried "
        "dipoles, every corridor walked at least twice at 1.2 m/s, a per-pass offset of the "
        "norm) and write it in the same layout as the Aalto conversion: a bag to map a "
        "building from (README, Mapping a building).",
    )
    _add_simulated(
        building, seed="floor, walk and noise seed", duration_s=DEFAULT_DURATION_S,
        rate_hz=DEFAULT_WALK_RATE_HZ, pose_rate_hz=DEFAULT_POSE_RATE_HZ,
    )  # fmt: skip
    building.add_argument(
        "--pass-offset",
        type=float,
        default=DEFAULT_PASS_OFFSET_UT,
        metavar="UT",
        help="standard deviation of the per-pass offset of ‖B‖, µT (default: %(default)s)",
    )


def _add_simulated(
    parser: argparse.ArgumentParser,
    *,
    seed: str,
    duration_s: float,
    rate_hz: float,
    pose_rate_hz: float | None = None,
) -> None:
    """OUT_BAG and the options of a simulated run (seed, length, rates, pose type)."""
    parser.add_argument("out_bag", type=Path, metavar="OUT_BAG", help=_OUT_BAG_HELP)
    parser.add_argument("--seed", type=int, default=0, help=f"{seed} (default: 0)")
    parser.add_argument(
        "--duration",
        type=_positive_float,
        default=duration_s,
        help="run length in seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--rate",
        type=_positive_float,
        default=rate_hz,
        help="magnetometer rate in Hz (default: %(default)s)",
    )
    parser.add_argument(
        "--pose-type",
        choices=sorted(POSE_MSGTYPES),
        default="pose_stamped",
        help="pose message type (default: %(default)s)",
    )
    _add_common(parser, pose_rate_hz=pose_rate_hz)


def run_convert(args: argparse.Namespace) -> int:
    """Run the conversion the parsed ``args`` describe; print a summary.

    Returns:
        0 on success, 2 when the input data is missing or malformed, 1 when the bag cannot be
        written (for example it exists and ``--force`` was not given).
    """
    handler = _HANDLERS[args.convert_source]
    try:
        args.storage = _storage_for(args.out_bag, args.storage)
    except ValueError as err:
        print(f"{_PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        lines = handler(args)
    except DatasetError as err:
        print(f"{_PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BagError as err:
        print(f"{_PROG}: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    print("\n".join(lines))
    return EXIT_OK


def _run_aalto(args: argparse.Namespace) -> list[str]:
    summary = write_as_named(
        convert_aalto,
        args.out_bag,
        args.force,
        data_dir=args.data_dir,
        sensor=args.sensor,
        sequences=args.sequences,
        storage=args.storage,
        mag_topic=args.mag_topic,
        pose_topic=args.pose_topic,
        max_seconds=args.max_seconds,
        pose_rate_hz=args.pose_rate,
        rotate_field_to_body=args.field_frame == "body",
        odometry_seed=args.odometry_seed,
    )
    odometry = (
        []
        if args.odometry_seed is None
        else [f"  /odom: {summary.num_pose} nav_msgs/msg/Odometry (frame odom, simulated)"]
    )
    return [
        f"wrote {summary.out_bag} ({summary.storage})",
        f"  field frame: {args.field_frame}",
        f"  source: Aalto {summary.sensor}, sequences {','.join(map(str, summary.sequences))}",
        f"  {args.mag_topic}: {summary.num_field} sensor_msgs/msg/MagneticField (tesla)",
        f"  {args.pose_topic}: {summary.num_pose} geometry_msgs/msg/PoseStamped (frame map)",
        *odometry,
        f"  span: {summary.duration_s:.1f} s; non-finite rows dropped: {summary.nan_rows_dropped}",
    ]


def _run_synthetic(args: argparse.Namespace) -> list[str]:
    if args.robot:
        return _run_robot(args)
    if args.hard_iron is not None:
        raise DatasetError("--hard-iron needs --robot (the pose-topic run has no hard iron)")
    bias = f", heading bias {args.heading_bias:g} µT" if args.heading_bias else ""
    return _write_simulated(
        args, write_synthetic_bag, f"synthetic world, seed {args.seed}{bias}",
        heading_bias_ut=args.heading_bias,
    )  # fmt: skip


def _run_robot(args: argparse.Namespace) -> list[str]:
    """``convert synthetic --robot``: the run as a robot records it (gp_mapper.io.robot_bag)."""
    pose_options = {
        "--pose-type": args.pose_type != "pose_stamped",
        "--pose-topic": args.pose_topic != DEFAULT_POSE_TOPIC,
        "--pose-rate": args.pose_rate is not None,
        "--heading-bias": args.heading_bias != 0.0,
    }
    if given := [name for name, used in pose_options.items() if used]:
        raise DatasetError(f"--robot writes TF, not a pose topic: drop {', '.join(given)}")
    hard_iron = DEFAULT_HARD_IRON_UT if args.hard_iron is None else tuple(args.hard_iron)
    try:
        summary = write_as_named(
            write_synthetic_robot_bag, args.out_bag, args.force, seed=args.seed,
            duration_s=args.duration, rate_hz=args.rate, hard_iron_ut=hard_iron,
            storage=args.storage, mag_topic=args.mag_topic,
        )  # fmt: skip
    except ValueError as err:
        raise DatasetError(str(err)) from err
    iron = " ".join(f"{v:g}" for v in hard_iron)
    return [
        f"wrote {summary.out_bag} ({summary.storage})",
        f"  source: synthetic robot run, seed {args.seed}, hard iron ({iron}) µT",
        f"  {summary.mag_topic}: {summary.num_field} sensor_msgs/msg/MagneticField "
        "(tesla, frame imu_link)",
        f"  {TF_TOPIC}: {summary.num_odom + summary.num_map_odom} {TF_MSGTYPE} "
        f"({summary.num_odom} odom -> base_link, {summary.num_map_odom} map -> odom)",
        f"  {TF_STATIC_TOPIC}: {summary.num_static} {TF_MSGTYPE} "
        "(base_link -> imu_link, transient local)",
        f"  span: {summary.duration_s:.1f} s",
    ]


def _run_building(args: argparse.Namespace) -> list[str]:
    if args.pass_offset < 0.0:
        raise DatasetError(f"--pass-offset must be non-negative, got {args.pass_offset}")
    source = f"synthetic office floor, seed {args.seed}, per-pass offsets {args.pass_offset:g} µT"
    return _write_simulated(args, write_building_bag, source, pass_offset_ut=args.pass_offset)


def _write_simulated(
    args: argparse.Namespace, write: Callable[..., Any], source: str, **kwargs: Any
) -> list[str]:
    """Write a simulated run with the options :func:`_add_simulated` adds; its summary."""
    summary = write_as_named(
        write,
        args.out_bag,
        args.force,
        seed=args.seed,
        duration_s=args.duration,
        rate_hz=args.rate,
        storage=args.storage,
        mag_topic=args.mag_topic,
        pose_topic=args.pose_topic,
        pose_type=args.pose_type,
        pose_rate_hz=args.pose_rate,
        **kwargs,
    )
    return [
        f"wrote {summary.out_bag} ({summary.storage})",
        f"  source: {source}",
        f"  {summary.mag_topic}: {summary.num_field} sensor_msgs/msg/MagneticField (tesla)",
        f"  {summary.pose_topic}: {summary.num_pose} {POSE_MSGTYPES[summary.pose_type]}",
        f"  span: {summary.duration_s:.1f} s",
    ]


_HANDLERS: Mapping[str, Callable[[argparse.Namespace], list[str]]] = MappingProxyType(
    {"aalto": _run_aalto, "synthetic": _run_synthetic, "building": _run_building}
)


def _add_common(parser: argparse.ArgumentParser, pose_rate_hz: float | None = None) -> None:
    """The storage, topics, pose rate (default ``pose_rate_hz``; None: one pose per reading)
    and ``--force``."""
    parser.add_argument(
        "--storage",
        choices=sorted(STORAGE_PLUGINS),
        default=None,
        help=f"rosbag2 storage (default: from an OUT_BAG ending in .mcap or .db3, "
        f"else {DEFAULT_STORAGE})",
    )
    parser.add_argument(
        "--mag-topic", default=DEFAULT_MAG_TOPIC, help="magnetometer topic (default: %(default)s)"
    )
    parser.add_argument(
        "--pose-topic", default=DEFAULT_POSE_TOPIC, help="pose topic (default: %(default)s)"
    )
    parser.add_argument(
        "--pose-rate",
        type=_positive_float,
        default=pose_rate_hz,
        help="pose rate in Hz (default: "
        + ("one pose per magnetometer sample)" if pose_rate_hz is None else "%(default)s)"),
    )
    parser.add_argument("--force", action="store_true", help="replace an existing OUT_BAG")


_OUT_BAG_HELP = "the bag to create: a .mcap or .db3 file, or a rosbag2 directory"


def _storage_for(out_bag: Path, storage: str | None) -> str:
    """The storage to write: ``--storage``, else the one OUT_BAG's suffix names.

    Raises:
        ValueError: ``--storage`` contradicts the suffix (``out.mcap --storage sqlite3``).
    """
    named = STORAGE_SUFFIXES.get(Path(out_bag).suffix)
    if storage is not None and named is not None and storage != named:
        raise ValueError(f"{out_bag} names a {named} file, but --storage is {storage}")
    return storage or named or DEFAULT_STORAGE


def write_as_named(
    write: Callable[..., Summary], out_bag: Path, force: bool, **kwargs: Any
) -> Summary:
    """Call ``write(out_bag=..., force=..., **kwargs)`` so that the bag is exactly ``out_bag``.

    A name with a storage suffix gets that one storage file: the writers always make a
    rosbag2 directory, so the bag is written into a temporary directory beside ``out_bag``
    and its storage file renamed into place (same file system: atomic).

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, or it is a directory that is
            not a bag; or the writer fails.
    """
    out_bag = Path(out_bag)
    suffix = out_bag.suffix
    if suffix not in STORAGE_SUFFIXES:
        return write(out_bag=out_bag, force=force, **kwargs)
    if out_bag.exists() or out_bag.is_symlink():
        if not force:
            raise BagError(f"{out_bag} exists already; not overwriting it (pass --force)")
        if out_bag.is_dir() and not (out_bag / "metadata.yaml").is_file():
            raise BagError(f"{out_bag} is a directory that is not a bag; refusing to replace it")
    parent = out_bag.parent if str(out_bag.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_bag.name}.", dir=parent))
    try:
        staged = staging / "bag"
        summary = write(out_bag=staged, force=False, **kwargs)
        (storage_file,) = staged.glob(f"*{suffix}")
        if out_bag.is_dir():  # an old directory bag of this name (under --force)
            out_bag.rename(staging / "old")
        os.replace(storage_file, out_bag)
    except OSError as err:
        raise BagError(f"{out_bag}: could not write the bag ({err})") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary._replace(out_bag=out_bag)  # type: ignore[attr-defined]


def _sequence_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 1,2,3; got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one sequence number")
    return values


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value
