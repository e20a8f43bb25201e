"""Session-wide test settings: an isolated ROS graph and the shared data directory."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

# Every test run gets its own DDS domain on loopback, so parallel runs and other ROS
# graphs on the machine never see our messages. Set before rclpy is imported anywhere.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 101)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.pop("ROS_LOCALHOST_ONLY", None)

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The shared data directory: $GP_MAPPER_DATA, else ../shared/data beside the repo."""
    return Path(os.environ.get("GP_MAPPER_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def magnetic_dir() -> Path:
    path = data_dir() / "magnetic" / "aalto-magnetic-data" / "data"
    if not (path / "invensense" / "3-loc.csv").is_file():
        pytest.skip(f"no Aalto magnetometer data under {path}")
    return path


@pytest.fixture(scope="session")
def uci_dir() -> Path:
    path = data_dir() / "uci"
    if not path.is_dir():
        pytest.skip(f"no UCI data under {path}")
    return path
