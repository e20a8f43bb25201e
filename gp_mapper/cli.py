"""``gp-mapper``: the command line of gp_mapper.

    gp-mapper convert aalto DATA_DIR OUT_BAG     Aalto recordings -> rosbag2
    gp-mapper replay BAG --out DIR               map a bag offline (no ROS runtime)
    gp-mapper play BAG [--rate R]                publish a bag with /clock, like ros2 bag play
    gp-mapper record OUT_BAG                     record the node's outputs to MCAP
    gp-mapper demo [--data DIR]                  synthetic world -> live node -> PNG

Sub-commands that need rclpy import it only when they run.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

Adder = Callable[[argparse.ArgumentParser], None]
Runner = Callable[[argparse.Namespace], int]


def _convert() -> tuple[Adder, Runner]:
    from gp_mapper.io.convert_command import add_convert_arguments, run_convert

    return add_convert_arguments, run_convert


def _replay() -> tuple[Adder, Runner]:
    from gp_mapper.commands.replay import add_replay_arguments, run_replay

    return add_replay_arguments, run_replay


def _play() -> tuple[Adder, Runner]:
    from gp_mapper.ros.player import add_play_arguments, run_play

    return add_play_arguments, run_play


def _record() -> tuple[Adder, Runner]:
    from gp_mapper.ros.recorder import add_record_arguments, run_record

    return add_record_arguments, run_record


def _demo() -> tuple[Adder, Runner]:
    from gp_mapper.commands.demo import add_demo_arguments, run_demo

    return add_demo_arguments, run_demo


COMMANDS: dict[str, tuple[str, Callable[[], tuple[Adder, Runner]]]] = {
    "convert": ("convert recordings to a rosbag2", _convert),
    "replay": ("map a bag offline through the node's pipeline", _replay),
    "play": ("publish a bag on its topics with /clock", _play),
    "record": ("record the node's outputs to an MCAP bag", _record),
    "demo": ("map a synthetic world (or --data) through the live node", _demo),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gp-mapper", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    import sys

    wanted = next((a for a in (argv if argv is not None else sys.argv[1:]) if a in COMMANDS), None)
    runners: dict[str, Runner] = {}
    for name, (help_text, load) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        # Only the chosen sub-command's module is imported (play/record need rclpy).
        if name == wanted:
            adder, runners[name] = load()
            adder(p)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return runners[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
