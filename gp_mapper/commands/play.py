"""``gp-mapper play``: publish a rosbag2 bag onto a live ROS graph, like ``ros2 bag play``.

The argument parsing, exit codes and messages of the command; the playing itself is
``gp_mapper.ros.player.play_bag``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from gp_mapper.ros.errors import BagError
from gp_mapper.ros.player import CLOCK_TOPIC, DEFAULT_RATE, DEFAULT_WAIT_SUBSCRIBERS_S, play_bag

__all__ = [
    "EXAMPLES",
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "add_play_arguments",
    "main",
    "parse_remaps",
    "run_play",
]

logger = logging.getLogger(__name__)

EXIT_OK = 0
# A missing or unreadable bag, or bad arguments: argparse's usage-error code, as the other
# sub-commands answer a bad input.
EXIT_BAD_INPUT = 2
# A shell's exit status for a run stopped by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
_PROG = "gp-mapper play"

EXAMPLES = """\
examples:
  gp-mapper play walk.mcap
  gp-mapper play walk.mcap --rate 5 --remap /imu/mag:=/mag --remap /pose:=/robot/pose
  gp-mapper play walk.mcap --topics /imu/mag /pose --no-clock

Nodes that should follow the bag's time run with use_sim_time:=true.
"""


def add_play_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``gp-mapper play`` to ``parser`` (and its examples)."""
    parser.epilog = EXAMPLES
    parser.add_argument("bag", type=Path, help="rosbag2 directory (or .mcap/.db3 file) to play")
    parser.add_argument(
        "--rate",
        type=float,
        default=DEFAULT_RATE,
        help="playback speed factor (2 = twice as fast); default %(default)s",
    )
    parser.add_argument(
        "--topics",
        nargs="+",
        metavar="TOPIC",
        default=None,
        help="play only these recorded topics (default: all)",
    )
    parser.add_argument(
        "--remap",
        action="append",
        default=[],
        metavar="FROM:=TO",
        help="publish recorded topic FROM on TO (repeatable), e.g. /imu/mag:=/mag",
    )
    parser.add_argument(
        "--no-clock",
        action="store_true",
        help=f"do not publish the bag time on {CLOCK_TOPIC}",
    )
    parser.add_argument(
        "--wait-subscribers",
        type=float,
        default=DEFAULT_WAIT_SUBSCRIBERS_S,
        metavar="SECONDS",
        help="wait up to this long for every topic to have a subscriber (0: start at once); "
        "default %(default)s",
    )


def parse_remaps(items: Sequence[str]) -> dict[str, str]:
    """``["/a:=/b", ...]`` -> ``{"/a": "/b"}``.

    Raises:
        ValueError: an item is not ``FROM:=TO`` with both sides non-empty.
    """
    remaps: dict[str, str] = {}
    for item in items:
        source, sep, target = item.partition(":=")
        if not sep or not source or not target:
            raise ValueError(f"remap {item!r} is not FROM:=TO")
        remaps[source] = target
    return remaps


def _error(message: str) -> int:
    print(f"{_PROG}: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_play(args: argparse.Namespace) -> int:
    """Run ``gp-mapper play``.

    Returns:
        0 when the whole bag was played; 2 for a missing or unreadable bag, a topic it
        lacks, or bad arguments (one line on stderr); 130 when interrupted with Ctrl-C.
    """
    if not args.rate > 0.0:
        return _error(f"--rate must be > 0; got {args.rate}")
    try:
        remaps = parse_remaps(args.remap)
        result = play_bag(
            args.bag,
            rate=args.rate,
            topics=args.topics,
            remaps=remaps,
            publish_clock=not args.no_clock,
            wait_subscribers_s=args.wait_subscribers,
        )
    except (BagError, ValueError) as err:
        return _error(str(err))
    except KeyboardInterrupt:
        logger.info("play interrupted")
        return EXIT_INTERRUPTED
    total = sum(result.published.values())
    logger.info(
        "published %d messages on %d topics in %.2f s",
        total,
        len(result.published),
        result.duration_s,
    )
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gp_mapper.commands.play BAG [--rate R]``: ``gp-mapper play`` alone."""
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Publish a rosbag2 bag on its topics with /clock, like ros2 bag play.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_play_arguments(parser)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_play(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
