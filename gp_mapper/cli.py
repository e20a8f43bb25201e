"""``gp-mapper``: the command line of gp_mapper.

Each sub-command lives in ``gp_mapper.commands.<name>`` as an ``add_<name>_arguments`` /
``run_<name>`` pair; only the chosen one is imported (play and record need rclpy, the
others must run without it).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

Adder = Callable[[argparse.ArgumentParser], None]
Runner = Callable[[argparse.Namespace], int]

DESCRIPTION = "Continual magnetic-field maps from a magnetometer and poses, on and off ROS 2."

EXAMPLES = """\
commands:
  gp-mapper convert aalto DATA_DIR OUT_BAG     Aalto recordings -> rosbag2
  gp-mapper replay BAG --out DIR               map a bag offline (no ROS runtime)
  gp-mapper fit BAG --model acgp --out DIR     fit a model on a whole bag, write theta.yaml
  gp-mapper localize BAG --map MAP --out DIR   localize a bag's odometry against a map
  gp-mapper play BAG [--rate R]                publish a bag with /clock, like ros2 bag play
  gp-mapper record OUT_BAG                     record the node's outputs to MCAP
  gp-mapper demo [--data DIR]                  synthetic world -> live node -> PNG

examples:
  gp-mapper convert synthetic walk.mcap --duration 60
  gp-mapper replay walk.mcap --out out/walk
  gp-mapper demo

gp-mapper COMMAND --help shows each command's options and examples.
"""


def _convert() -> tuple[Adder, Runner]:
    from gp_mapper.commands.convert import add_convert_arguments, run_convert

    return add_convert_arguments, run_convert


def _replay() -> tuple[Adder, Runner]:
    from gp_mapper.commands.replay import add_replay_arguments, run_replay

    return add_replay_arguments, run_replay


def _play() -> tuple[Adder, Runner]:
    from gp_mapper.commands.play import add_play_arguments, run_play

    return add_play_arguments, run_play


def _record() -> tuple[Adder, Runner]:
    from gp_mapper.commands.record import add_record_arguments, run_record

    return add_record_arguments, run_record


def _fit() -> tuple[Adder, Runner]:
    from gp_mapper.commands.fit import add_fit_arguments, run_fit

    return add_fit_arguments, run_fit


def _localize() -> tuple[Adder, Runner]:
    from gp_mapper.commands.localize import add_localize_arguments, run_localize

    return add_localize_arguments, run_localize


def _demo() -> tuple[Adder, Runner]:
    from gp_mapper.commands.demo import add_demo_arguments, run_demo

    return add_demo_arguments, run_demo


# Examples of the commands whose module does not set its own ``parser.epilog``.
FALLBACK_EXAMPLES: dict[str, str] = {
    "replay": """\
examples:
  gp-mapper replay walk.mcap --out out/walk
  gp-mapper replay walk.mcap --out out/tuned --params config/gp_mapper.yaml --set vips.delta=0.095
  gp-mapper replay more.mcap --out out/more --resume out/walk/map_state.npz
""",
    "localize": """\
examples:
  gp-mapper localize run5.mcap --map out/map/map_state.npz --out out/loc
  gp-mapper localize run5.mcap --map out/map/map_state.npz --out out/loc --initial-pose 1.2,0.5,0
""",
}

# name -> (one-line help, loader of its argument adder and runner). A command's adder may
# set ``parser.epilog`` to its examples; every sub-parser keeps the epilog's line breaks.
COMMANDS: dict[str, tuple[str, Callable[[], tuple[Adder, Runner]]]] = {
    "convert": ("convert recordings to a rosbag2", _convert),
    "replay": ("map a bag offline through the node's pipeline", _replay),
    "fit": ("fit a model ({models}) on a whole bag; writes the map and theta.yaml", _fit),
    "localize": ("localize a bag's odometry and magnetometer against a map", _localize),
    "play": ("publish a bag on its topics with /clock", _play),
    "record": ("record the node's outputs to an MCAP bag", _record),
    "demo": ("map a synthetic world (or --data) through the live node", _demo),
}


def build_parser(wanted: str | None) -> tuple[argparse.ArgumentParser, dict[str, Runner]]:
    """The ``gp-mapper`` parser, with the arguments of the ``wanted`` sub-command only.

    Args:
        wanted: the sub-command named on the command line, or None.

    Returns:
        The parser and the runner of ``wanted`` (empty when None).
    """
    parser = argparse.ArgumentParser(
        prog="gp-mapper",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runners: dict[str, Runner] = {}
    # The model names come from the registry, which imports torch: only the list of commands
    # (no command chosen) pays for it.
    models = "see gp-mapper fit --help"
    if wanted is None:
        from gp_mapper.engine.registry import model_names

        models = ", ".join(model_names())
    for name, (help_text, load) in COMMANDS.items():
        help_text = help_text.format(models=models)
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # Only the chosen sub-command's module is imported (play/record need rclpy).
        if name == wanted:
            adder, runners[name] = load()
            adder(p)
            if p.epilog is None:
                p.epilog = FALLBACK_EXAMPLES.get(name)
    return parser, runners


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``gp-mapper``: parse, set up logging, run the sub-command."""
    args_in = list(argv if argv is not None else sys.argv[1:])
    wanted = next((a for a in args_in if a in COMMANDS), None)
    parser, runners = build_parser(wanted)
    args = parser.parse_args(args_in)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return runners[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
