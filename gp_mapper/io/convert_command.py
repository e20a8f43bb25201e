"""The ``gp-mapper convert`` sub-command: build a replayable rosbag2 from a data set.

``gp-mapper convert aalto DATA_DIR OUT_BAG [--sensor S] [--sequences 1,2,3] [--storage mcap]
[--force]`` converts the Aalto recordings; ``gp-mapper convert synthetic OUT_BAG [--seed N]
[--duration S]`` writes a simulated run through the synthetic room. This module is a command
line front: it prints a short summary to stdout and one-line errors to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from .bag_convert import convert_aalto
from .bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC, STORAGE_PLUGINS
from .errors import BagError, DatasetError
from .pose_types import POSE_MSGTYPES
from .synthetic import write_synthetic_bag

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "add_convert_arguments", "run_convert"]

EXIT_OK = 0
EXIT_FAILED = 1  # the output could not be written (exists, disk, rosbags)
EXIT_BAD_INPUT = 2  # the input data is missing or malformed (argparse's usage-error code)
_PROG = "gp-mapper convert"


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``aalto`` and ``synthetic`` sources and their options to ``parser``.

    The chosen source is stored in ``args.convert_source``; call :func:`run_convert` with the
    parsed namespace.
    """
    sources = parser.add_subparsers(dest="convert_source", metavar="SOURCE", required=True)

    aalto = sources.add_parser(
        "aalto",
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
    aalto.add_argument("out_bag", type=Path, metavar="OUT_BAG", help="bag directory to create")
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
    _add_common(aalto)

    synthetic = sources.add_parser(
        "synthetic",
        help="a simulated run through the synthetic 8 m x 6 m room",
        description="Simulate a robot run through the synthetic magnetic world and write it "
        "in the same layout as the Aalto conversion.",
    )
    synthetic.add_argument("out_bag", type=Path, metavar="OUT_BAG", help="bag directory to create")
    synthetic.add_argument("--seed", type=int, default=0, help="world and noise seed (default: 0)")
    synthetic.add_argument(
        "--duration",
        type=_positive_float,
        default=180.0,
        help="run length in seconds (default: %(default)s)",
    )
    synthetic.add_argument(
        "--rate",
        type=_positive_float,
        default=50.0,
        help="magnetometer rate in Hz (default: %(default)s)",
    )
    synthetic.add_argument(
        "--pose-type",
        choices=sorted(POSE_MSGTYPES),
        default="pose_stamped",
        help="pose message type (default: %(default)s)",
    )
    _add_common(synthetic)


def run_convert(args: argparse.Namespace) -> int:
    """Run the conversion the parsed ``args`` describe; print a summary.

    Returns:
        0 on success, 2 when the input data is missing or malformed, 1 when the bag cannot be
        written (for example it exists and ``--force`` was not given).
    """
    handler = _HANDLERS[args.convert_source]
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
    summary = convert_aalto(
        args.data_dir,
        args.out_bag,
        sensor=args.sensor,
        sequences=args.sequences,
        storage=args.storage,
        mag_topic=args.mag_topic,
        pose_topic=args.pose_topic,
        max_seconds=args.max_seconds,
        pose_rate_hz=args.pose_rate,
        force=args.force,
    )
    return [
        f"wrote {summary.out_bag} ({summary.storage})",
        f"  source: Aalto {summary.sensor}, sequences {','.join(map(str, summary.sequences))}",
        f"  {args.mag_topic}: {summary.num_field} sensor_msgs/msg/MagneticField (tesla)",
        f"  {args.pose_topic}: {summary.num_pose} geometry_msgs/msg/PoseStamped (frame map)",
        f"  span: {summary.duration_s:.1f} s; non-finite rows dropped: {summary.nan_rows_dropped}",
    ]


def _run_synthetic(args: argparse.Namespace) -> list[str]:
    summary = write_synthetic_bag(
        args.out_bag,
        seed=args.seed,
        duration_s=args.duration,
        rate_hz=args.rate,
        storage=args.storage,
        mag_topic=args.mag_topic,
        pose_topic=args.pose_topic,
        pose_type=args.pose_type,
        pose_rate_hz=args.pose_rate,
        force=args.force,
    )
    return [
        f"wrote {summary.out_bag} ({summary.storage})",
        f"  source: synthetic world, seed {args.seed}",
        f"  {summary.mag_topic}: {summary.num_field} sensor_msgs/msg/MagneticField (tesla)",
        f"  {summary.pose_topic}: {summary.num_pose} {POSE_MSGTYPES[summary.pose_type]}",
        f"  span: {summary.duration_s:.1f} s",
    ]


_HANDLERS: Mapping[str, Callable[[argparse.Namespace], list[str]]] = MappingProxyType(
    {"aalto": _run_aalto, "synthetic": _run_synthetic}
)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        choices=sorted(STORAGE_PLUGINS),
        default="mcap",
        help="rosbag2 storage (default: %(default)s)",
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
        default=None,
        help="pose rate in Hz (default: one pose per magnetometer sample)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing OUT_BAG")


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
