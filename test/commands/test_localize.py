"""``gp-mapper localize``: a bag with odometry and ground truth, localized against a map file."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from gp_mapper.cli import main as cli_main
from gp_mapper.io.bag_source import read_bag
from gp_mapper.io.bag_writer import (
    BASE_EPOCH_NS,
    ODOM_FRAME_ID,
    TESLA_PER_MICROTESLA,
    FieldStream,
    PoseStream,
    write_field_pose_bag,
)
from gp_mapper.io.heading import yaw_to_quaternion
from gp_mapper.io.odometry import OdometryErrors, simulate_odometry
from gp_mapper.io.synthetic import simulate_run

from ..mapping.localization_scene import WORLD, write_world_map

NS = 1_000_000_000


def planar(xy: np.ndarray) -> np.ndarray:
    return np.column_stack([xy, np.zeros(xy.shape[0])])


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A map file of the world (50 m of its coverage path) and a bag of a second walk (36 m) with
    simulated odometry on /odom and the ground truth on /pose."""
    root = tmp_path_factory.mktemp("localize")
    write_world_map(root / "map.npz")
    walk = simulate_run(WORLD, 90.0, rate_hz=20.0, seed=2, speed_mps=0.4)
    stamps = BASE_EPOCH_NS + np.rint(walk.time_s * NS).astype(np.int64)
    odom = simulate_odometry(walk.time_s, walk.position_m, walk.heading_rad, OdometryErrors(), 4)
    write_field_pose_bag(
        root / "walk.mcap",
        FieldStream(stamps, walk.mag_ut * TESLA_PER_MICROTESLA),
        PoseStream(stamps, planar(walk.position_m), yaw_to_quaternion(walk.heading_rad)),
        odometry=PoseStream(
            stamps, planar(odom.pose[:, :2]), yaw_to_quaternion(odom.pose[:, 2]), ODOM_FRAME_ID
        ),
    )
    start = (walk.position_m[0, 0], walk.position_m[0, 1], walk.heading_rad[0])
    return root, start


def test_the_odometry_topic_is_written_and_read_back(scene):
    root, _ = scene
    poses = [r for r in read_bag(root / "walk.mcap", pose_topic="/odom", pose_type="auto")
             if not hasattr(r, "field_t")]  # fmt: skip
    assert len(poses) == 1801 and np.allclose(poses[0].position_m, 0.0)


def test_a_bag_is_localized_from_a_known_start_and_scored(scene, tmp_path, capsys):
    root, start = scene
    out = tmp_path / "loc"
    code = cli_main(["localize", str(root / "walk.mcap"), "--map", str(root / "map.npz"),
                     "--out", str(out), "--initial-pose", ",".join(map(str, start))])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "against the ground truth: RMSE" in printed and "dead reckoning alone" in printed
    stats = json.loads((out / "localization.json").read_text())
    assert stats["rmse_m"] < 0.4 and stats["dead_reckoning_max_m"] > stats["rmse_m"]
    assert stats["drops"] == {}
    rows = list(csv.DictReader((out / "trajectory.csv").open()))
    assert len(rows) == stats["updates"] > 100
    assert float(rows[-1]["error_m"]) < 0.5
    assert (out / "localization.png").stat().st_size > 10_000


def test_a_global_start_finds_the_robot(scene, tmp_path):
    root, _ = scene
    out = tmp_path / "global"
    assert cli_main(["localize", str(root / "walk.mcap"), "--map", str(root / "map.npz"),
                     "--out", str(out), "--seed", "1"]) == 0  # fmt: skip
    rows = list(csv.DictReader((out / "trajectory.csv").open()))
    assert max(float(r["error_m"]) for r in rows[-40:]) < 0.5


def test_bad_arguments_and_files_get_a_clear_error(scene, tmp_path, capsys):
    root, _ = scene
    bag, out = str(root / "walk.mcap"), str(tmp_path / "o")
    assert cli_main(["localize", bag, "--map", str(tmp_path / "none.npz"), "--out", out]) == 1
    assert "none.npz" in capsys.readouterr().err
    assert cli_main(["localize", bag, "--map", str(root / "map.npz"), "--out", out,
                     "--initial-pose", "1,2"]) == 2  # fmt: skip
    assert "X,Y,YAW" in capsys.readouterr().err
    assert cli_main(["localize", bag, "--map", str(root / "map.npz"), "--out", out,
                     "--set", "alpha1=-1"]) == 2  # fmt: skip
    assert cli_main(["localize", bag, "--map", str(root / "map.npz"), "--out", out,
                     "--odom-topic", "/nope"]) == 1  # fmt: skip
    assert "/nope" in capsys.readouterr().err
