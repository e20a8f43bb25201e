"""``gp-mapper localize``: a bag with odometry and ground truth, localized against a map file;
a robot's bag localized through its TF."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from gp_mapper.cli import main as cli_main
from gp_mapper.io.bag_source import read_bag
from gp_mapper.io.bag_writer import (
    BASE_EPOCH_NS,
    ODOM_FRAME_ID,
    TESLA_PER_MICROTESLA,
    FieldStream,
    PoseStream,
    new_bag,
    write_field_pose_bag,
)
from gp_mapper.io.heading import yaw_to_quaternion
from gp_mapper.io.odometry import OdometryErrors, align_to_start, simulate_odometry
from gp_mapper.io.robot_bag import simulate_robot_run, write_robot_bag
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
    err = capsys.readouterr().err
    assert "/nope" in err and "/tf" in err  # neither odometry: both named
    assert cli_main(["localize", bag, "--map", str(root / "map.npz"), "--out", out,
                     "--odom-source", "tf"]) == 1  # fmt: skip
    assert "no /tf" in capsys.readouterr().err


ROBOT_RATE_HZ = 20.0


@pytest.fixture(scope="module")
def robot(scene):
    """A robot's bag of 60 s in the same world (/tf, /tf_static, the magnetometer in imu_link
    0.3 m ahead of base_link, turned a quarter turn; no hard iron, which a map of ‖B‖ cannot
    tell from the field) and no ground-truth topic; the run, for its true base poses."""
    root, _ = scene
    run = simulate_robot_run(WORLD, 60.0, rate_hz=ROBOT_RATE_HZ, seed=1, hard_iron_ut=(0, 0, 0))
    write_robot_bag(root / "robot.mcap", run)
    return root, run


def test_a_robot_bag_is_localized_through_tf_and_the_base_poses_written(robot, tmp_path, capsys):
    root, run = robot
    out = tmp_path / "robot"
    start = (run.base_xy_m[0, 0], run.base_xy_m[0, 1], run.base_yaw_rad[0])  # the BASE's pose
    code = cli_main(["localize", str(root / "robot.mcap"), "--map", str(root / "map.npz"),
                     "--out", str(out), "--initial-pose", ",".join(map(str, start))])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "odometry from /tf" in printed and "nothing scored" in printed
    stats = json.loads((out / "localization.json").read_text())
    assert stats["odom_source"] == "tf" and stats["drops"] == {} and not stats["truth"]
    rows = list(csv.DictReader((out / "trajectory.csv").open()))
    assert len(rows) == stats["updates"] > 100 and "truth_x" not in rows[0]
    stamps = np.array([int(r["stamp_ns"]) for r in rows])
    est = np.array([[float(r["x"]), float(r["y"])] for r in rows])
    k = np.rint((stamps - BASE_EPOCH_NS) * ROBOT_RATE_HZ / NS).astype(int)
    error = np.linalg.norm(est - run.base_xy_m[k], axis=1)
    # The base's true path within 0.3 m RMS (0.15-0.2 m over seeds), 0.2 m at the end; and
    # the base's, not the sensor's 0.3 m ahead of it.
    assert np.sqrt(np.mean(error**2)) < 0.3 and error[-1] < 0.2 and error.max() < 0.8
    to_sensor = np.linalg.norm(est - run.sensor_position_m[k, :2], axis=1)
    assert np.median(error) < 0.2 < np.median(to_sensor)
    # Dead reckoning alone, from the same start, strays further.
    dead = align_to_start(run.odom_pose, np.array(start))
    j = np.rint(run.odom_time_s * ROBOT_RATE_HZ).astype(int).clip(0, run.time_s.size - 1)
    assert np.linalg.norm(dead[:, :2] - run.base_xy_m[j], axis=1).max() > error.max()
    assert (out / "localization.png").stat().st_size > 10_000


def merge_bags(out, *parts):
    """A bag of the given (bag, topics) parts' messages, in bag-time order."""
    typestore = get_typestore(Stores.ROS2_JAZZY)
    messages = []
    with new_bag(out) as writer:
        for bag, topics in parts:
            with Reader(bag) as reader:
                for connection in (c for c in reader.connections if c.topic in topics):
                    added = writer.add_connection(connection.topic, connection.msgtype,
                                                  typestore=typestore)  # fmt: skip
                    for _, time_ns, raw in reader.messages(connections=[connection]):
                        messages.append((time_ns, added, raw))
        for time_ns, connection, raw in sorted(messages, key=lambda m: m[0]):
            writer.write(connection, time_ns, raw)
    return out


def test_auto_takes_the_odometry_topic_where_the_bag_has_both_and_tf_is_chosen_by_name(
    robot, tmp_path
):
    root, _ = robot
    both = merge_bags(tmp_path / "both.mcap", (root / "walk.mcap", {"/imu/mag", "/odom", "/pose"}),
                      (root / "robot.mcap", {"/tf", "/tf_static"}))  # fmt: skip
    common = ["--map", str(root / "map.npz"), "--set", "max_particles=2000"]
    assert cli_main(["localize", str(both), "--out", str(tmp_path / "auto"), *common]) == 0
    stats = json.loads((tmp_path / "auto" / "localization.json").read_text())
    assert stats["odom_source"] == "topic" and stats["drops"] == {}
    assert cli_main(["localize", str(both), "--out", str(tmp_path / "tf"), *common,
                     "--odom-source", "tf"]) == 0  # fmt: skip
    stats = json.loads((tmp_path / "tf" / "localization.json").read_text())
    # The robot's TF ends 30 s before the walk's readings: those time out, counted as the
    # node counts them, and the last second's are still waiting when the bag ends.
    assert stats["odom_source"] == "tf"
    assert stats["drops"]["odometry_timeout"] > 500 and stats["drops"]["waiting_at_end_of_bag"]
