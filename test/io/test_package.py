"""The IO layer's public surface and its boundary: no ROS client library."""

from __future__ import annotations

import subprocess
import sys

import gp_mapper.io


def test_io_imports_without_rclpy() -> None:
    code = (
        "import sys, gp_mapper.io; "
        "bad = sorted(m for m in sys.modules if m == 'rclpy' or m.endswith('_msgs')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_public_name_resolves() -> None:
    for name in gp_mapper.io.__all__:
        assert getattr(gp_mapper.io, name) is not None, name
    assert len(set(gp_mapper.io.__all__)) == len(gp_mapper.io.__all__)
