"""``gp-mapper convert``: argument parsing, summaries, exit codes, the bag it names."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from rosbags.interfaces import QosDurability
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from gp_mapper.commands.convert import add_convert_arguments, run_convert
from gp_mapper.io import bag_info, make_synthetic_world, read_bag, simulate_robot_run

from ..io.helpers import write_tiny_aalto


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gp-mapper convert")
    add_convert_arguments(parser)
    return run_convert(parser.parse_args(argv))


def test_missing_data_directory_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no_data"
    assert _run(["aalto", str(missing), str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err == f"gp-mapper convert: error: Aalto data directory {missing} does not exist\n"
    )
    assert not (tmp_path / "out").exists()


def test_aalto_conversion_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "bag"
    argv = ["aalto", str(tmp_path / "data"), str(out), "--sequences", "1,2", "--storage", "sqlite3"]
    assert _run(argv) == 0
    text = capsys.readouterr().out
    assert f"wrote {out} (sqlite3)" in text
    assert "/imu/mag: 59 sensor_msgs/msg/MagneticField (tesla)" in text
    assert "non-finite rows dropped: 1" in text
    assert bag_info(out).storage == "sqlite3"


def test_field_frame_room_writes_the_recorded_vector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = write_tiny_aalto(tmp_path / "data")
    fields = {}
    for frame in ("body", "room"):
        out = tmp_path / frame
        assert _run(["aalto", str(tmp_path / "data"), str(out), "--sequences", "2",
                     "--field-frame", frame]) == 0  # fmt: skip
        assert f"field frame: {frame}" in capsys.readouterr().out
        fields[frame] = np.array([r.field_t for r in read_bag(out) if hasattr(r, "field_t")])
    recorded = np.delete(written[2].mag_ut, 3, axis=0) * 1e-6  # the NaN row is dropped
    np.testing.assert_allclose(fields["room"], recorded, rtol=1e-15)
    assert not np.allclose(fields["body"], recorded)  # heading π/2: rotated
    np.testing.assert_allclose(
        np.linalg.norm(fields["body"], axis=1), np.linalg.norm(recorded, axis=1), rtol=1e-12
    )


def test_odometry_is_written_beside_the_poses_and_drifts_from_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "odom.mcap"
    assert _run(["aalto", str(tmp_path / "data"), str(out), "--sequences", "1",
                 "--odometry-seed", "3"]) == 0  # fmt: skip
    assert "/odom: " in capsys.readouterr().out
    info = bag_info(out)
    assert info.topics["/odom"][0] == "nav_msgs/msg/Odometry"
    odom = [r for r in read_bag(out, pose_topic="/odom", pose_type="auto")
            if hasattr(r, "position_m")]  # fmt: skip
    truth = [r for r in read_bag(out) if hasattr(r, "position_m")]
    assert len(odom) == len(truth) > 10
    np.testing.assert_allclose(odom[0].position_m, 0.0)  # the odom frame starts at its origin
    steps = np.linalg.norm(np.diff([p.position_m for p in odom], axis=0), axis=1)
    true_steps = np.linalg.norm(np.diff([p.position_m for p in truth], axis=0), axis=1)
    assert not np.allclose(steps, true_steps) and np.allclose(steps, true_steps, rtol=0.2)


def test_existing_output_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert _run(["synthetic", str(out), "--duration", "2", "--seed", "1"]) == 0
    assert "/pose: 101 geometry_msgs/msg/PoseStamped" in capsys.readouterr().out
    assert _run(["synthetic", str(out), "--duration", "4"]) == 1
    assert "exists already" in capsys.readouterr().err
    assert (
        _run(["synthetic", str(out), "--duration", "4", "--force", "--pose-type", "odometry"]) == 0
    )
    assert bag_info(out).topics["/pose"] == ("nav_msgs/msg/Odometry", 201)


@pytest.mark.parametrize(
    "argv",
    [
        ["aalto", "d", "o", "--sequences", "1,x"],
        ["aalto", "d", "o", "--storage", "rosbag1"],
        ["synthetic", "o", "--duration", "-3"],
        ["nonsense", "o"],
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _run(argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize(("name", "storage"), [("walk.mcap", "mcap"), ("walk.db3", "sqlite3")])
def test_a_bag_named_as_a_file_is_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, storage: str
) -> None:
    out = tmp_path / name
    assert _run(["synthetic", str(out), "--duration", "2"]) == 0
    assert f"wrote {out} ({storage})" in capsys.readouterr().out
    # the one storage file the user named, not a folder holding walk.mcap/walk.mcap.mcap
    assert out.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    info = bag_info(out)
    assert info.storage == storage
    readings = info.topics["/imu/mag"][1]
    assert readings > 0
    assert sum(1 for _ in read_bag(out)) > 0

    assert _run(["synthetic", str(out), "--duration", "2"]) == 1
    assert "exists already" in capsys.readouterr().err
    assert _run(["synthetic", str(out), "--duration", "4", "--force"]) == 0
    assert bag_info(out).topics["/imu/mag"][1] > readings  # the longer run replaced it


def test_a_bag_named_as_a_directory_stays_a_directory(tmp_path: Path) -> None:
    out = tmp_path / "walk_bag"
    assert _run(["synthetic", str(out), "--duration", "2", "--storage", "sqlite3"]) == 0
    assert (out / "metadata.yaml").is_file()
    assert bag_info(out).storage == "sqlite3"


def test_storage_contradicting_the_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "walk.mcap"
    assert _run(["synthetic", str(out), "--storage", "sqlite3"]) == 2
    assert "names a mcap file, but --storage is sqlite3" in capsys.readouterr().err
    assert not out.exists()


def test_the_office_floor_is_written_as_the_building_benchmark_walks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "floor.mcap"
    assert _run(["building", str(out), "--duration", "10"]) == 0
    assert "synthetic office floor, seed 0" in capsys.readouterr().out
    info = bag_info(out)
    assert info.topics["/imu/mag"] == ("sensor_msgs/msg/MagneticField", 1001)  # 100 Hz
    assert info.topics["/pose"] == ("geometry_msgs/msg/PoseStamped", 251)  # 25 Hz
    poses = [r.position_m for r in read_bag(out) if hasattr(r, "position_m")]
    walked = np.linalg.norm(np.diff(np.asarray(poses)[:, :2], axis=0), axis=1).sum()
    assert 10.0 < walked < 14.0  # ~1.2 m/s
    assert _run(["building", str(tmp_path / "f2.mcap"), "--pass-offset", "-1"]) == 2
    assert "--pass-offset must be non-negative" in capsys.readouterr().err


def test_robot_writes_tf_and_the_magnetometer_in_its_own_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "robot.mcap"
    argv = ["synthetic", str(out), "--robot", "--duration", "4", "--seed", "2",
            "--hard-iron", "1", "-2", "3"]  # fmt: skip
    assert _run(argv) == 0
    text = capsys.readouterr().out
    assert "hard iron (1 -2 3) µT" in text
    assert "/tf: 210 tf2_msgs/msg/TFMessage (201 odom -> base_link, 9 map -> odom)" in text
    assert "/tf_static: 1 tf2_msgs/msg/TFMessage" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["robot.mcap"]
    typestore = get_typestore(Stores.ROS2_JAZZY)
    with Reader(out) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        static = next(c for c in reader.connections if c.topic == "/tf_static")
        (static_qos,) = static.ext.offered_qos_profiles
        readings = [
            typestore.deserialize_cdr(raw, c.msgtype)
            for c, _, raw in reader.messages()
            if c.topic == "/imu/mag"
        ]
    assert topics == {
        "/tf_static": ("tf2_msgs/msg/TFMessage", 1),
        "/tf": ("tf2_msgs/msg/TFMessage", 210),
        "/imu/mag": ("sensor_msgs/msg/MagneticField", 201),  # --rate: 50 Hz
    }
    assert static_qos.durability == QosDurability.TRANSIENT_LOCAL
    assert {m.header.frame_id for m in readings} == {"imu_link"}
    field_ut = [[m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z] for m in readings]
    run = simulate_robot_run(make_synthetic_world(2), 4.0, 50.0, 2, hard_iron_ut=(1.0, -2.0, 3.0))
    np.testing.assert_allclose(np.array(field_ut) * 1e6, run.mag_ut, rtol=1e-12)


def test_help_explains_robot_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        _run(["synthetic", "--help"])
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    (at,) = [i for i, line in enumerate(lines) if line.startswith("--robot ")]
    assert "/tf, /tf_static" in lines[at]
    assert lines[at + 1].startswith("--hard-iron X Y Z")  # the next option: one line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--robot", "--pose-type", "odometry"], "--robot writes TF, not a pose topic: drop "
         "--pose-type"),
        (["--robot", "--heading-bias", "2"], "drop --heading-bias"),
        (["--hard-iron", "1", "2", "3"], "--hard-iron needs --robot"),
        (["--robot", "--hard-iron", "1", "inf", "3"], "hard_iron_ut must be a finite 3-vector"),
    ],
)  # fmt: skip
def test_robot_options_that_do_not_fit_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "robot.mcap"
    assert _run(["synthetic", str(out), "--duration", "2", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
