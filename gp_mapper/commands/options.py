"""The options the bag commands share (``replay``, ``fit``, ``localize``), each declared once:
the bag, the output folder, the node's parameter file, ``--set`` overrides and the topics."""

from __future__ import annotations

import argparse
from pathlib import Path

from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC

BAG_HELP = "rosbag2 directory (MCAP or sqlite3) or .mcap file"


def add_bag(parser: argparse.ArgumentParser) -> None:
    """The one bag a command reads (positional ``bag``)."""
    parser.add_argument("bag", type=Path, help=BAG_HELP)


def add_out(parser: argparse.ArgumentParser) -> None:
    """``--out``: the folder the command writes (required)."""
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def add_params(parser: argparse.ArgumentParser) -> None:
    """``--params``: the node's parameter YAML the command maps with."""
    parser.add_argument("--params", type=Path, help="node parameters YAML (config/gp_mapper.yaml)")


def add_set(parser: argparse.ArgumentParser, what: str, example: str) -> None:
    """``--set NAME=VALUE`` (repeatable): ``what`` it overrides, with an ``example``."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"override {what}, e.g. --set {example} (repeatable)",
    )


def add_mag_topic(parser: argparse.ArgumentParser) -> None:
    """``--mag-topic``: the magnetometer's ``sensor_msgs/MagneticField`` topic."""
    parser.add_argument("--mag-topic", default=DEFAULT_MAG_TOPIC, help="magnetometer topic")


def add_pose_topic(parser: argparse.ArgumentParser) -> None:
    """``--pose-topic``: the sensor's pose, for a bag mapped with ``pose_source: topic``."""
    parser.add_argument(
        "--pose-topic",
        default=DEFAULT_POSE_TOPIC,
        help="pose topic of the sensor (pose_source topic; a bag without /tf is read so)",
    )
