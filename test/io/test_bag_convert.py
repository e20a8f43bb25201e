"""Aalto -> rosbag2 conversion, read back with read_bag (MCAP and sqlite3)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.io import (
    BASE_EPOCH_NS,
    SEQUENCE_GAP_S,
    BagError,
    DatasetError,
    bag_info,
    convert_aalto,
    load_aalto_sequence,
    read_bag,
    rotate_z,
    yaw_from_quaternion,
)
from gp_mapper.mapping.records import FieldReading, Pose

from .helpers import write_tiny_aalto

NS = 1_000_000_000
RATE_HZ = 50  # the invensense sampling rate (shared data README)


def _split(records: list[Pose | FieldReading]) -> tuple[list[Pose], list[FieldReading]]:
    poses = [r for r in records if isinstance(r, Pose)]
    fields = [r for r in records if isinstance(r, FieldReading)]
    assert len(poses) + len(fields) == len(records)
    return poses, fields


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_real_slice_round_trips(magnetic_dir: Path, tmp_path: Path, storage: str) -> None:
    seconds = 20.0
    out = tmp_path / f"seq3_{storage}"
    summary = convert_aalto(
        magnetic_dir, out, sequences=(3,), storage=storage, max_seconds=seconds,
        rotate_field_to_body=False,
    )  # fmt: skip
    csv = load_aalto_sequence(magnetic_dir, "invensense", 3)
    n = int(seconds * RATE_HZ)
    assert (summary.num_field, summary.num_pose) == (n, n)
    assert summary.storage == storage
    assert summary.start_ns == BASE_EPOCH_NS

    info = bag_info(out)
    assert info.storage == storage
    assert info.topics["/imu/mag"] == ("sensor_msgs/msg/MagneticField", n)
    assert info.topics["/pose"] == ("geometry_msgs/msg/PoseStamped", n)

    records = list(read_bag(out))
    poses, fields = _split(records)
    assert (len(fields), len(poses)) == (n, n)
    stamps = [r.stamp_ns for r in records]
    assert stamps == sorted(stamps)
    field_stamps = np.array([f.stamp_ns for f in fields])
    assert np.all(np.diff(field_stamps) > 0)
    # stamps keep the recorded 20 ms spacing exactly
    expected_ns = BASE_EPOCH_NS + np.rint((csv.time_s[:n] - csv.time_s[0]) * NS).astype(np.int64)
    np.testing.assert_array_equal(field_stamps, expected_ns)
    np.testing.assert_array_equal([p.stamp_ns for p in poses], expected_ns)

    assert {f.frame_id for f in fields} == {"imu_link"}
    field_t = np.array([f.field_t for f in fields])
    np.testing.assert_allclose(field_t, csv.mag_ut[:n] * 1e-6, rtol=1e-15)  # tesla
    assert np.all(np.linalg.norm(field_t, axis=1) < 2e-4)  # ~50 µT, never µT-as-tesla

    position = np.array([p.position_m for p in poses])
    np.testing.assert_array_equal(position[:, :2], csv.loc_m[:n])
    np.testing.assert_array_equal(position[:, 2], 0.0)
    quats = np.array([p.orientation_xyzw for p in poses])
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(quats[:, :2], 0.0)  # a yaw-only orientation


def test_real_heading_follows_the_direction_of_travel(magnetic_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "seq1"
    convert_aalto(magnetic_dir, out, sequences=(1,), max_seconds=60.0)
    poses, _ = _split(list(read_bag(out)))
    xy = np.array([p.position_m[:2] for p in poses])
    yaw = yaw_from_quaternion(np.array([p.orientation_xyzw for p in poses]))
    # displacement over 1 s versus the heading at the middle of that second
    step = RATE_HZ
    move = xy[2 * step :] - xy[: -2 * step]
    moving = np.linalg.norm(move, axis=1) > 0.1  # m over 2 s: clearly driving
    direction = np.arctan2(move[:, 1], move[:, 0])
    error = np.angle(np.exp(1j * (yaw[step:-step] - direction)))
    assert moving.mean() > 0.5
    assert np.median(np.abs(error[moving])) < np.deg2rad(10.0)


def test_sequences_share_one_rising_time_line(tmp_path: Path) -> None:
    written = write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "two"
    summary = convert_aalto(
        tmp_path / "data", out, sequences=(2, 1), storage="sqlite3", rotate_field_to_body=False
    )
    assert summary.sequences == (2, 1)
    assert summary.nan_rows_dropped == 1
    poses, fields = _split(list(read_bag(out)))
    n2, n1 = written[2].time_s.size - 1, written[1].time_s.size
    assert (len(fields), len(poses)) == (n2 + n1, n2 + n1)
    stamps = np.array([f.stamp_ns for f in fields])
    assert np.all(np.diff(stamps) > 0)
    gap = stamps[n2] - stamps[n2 - 1]
    assert gap == round(SEQUENCE_GAP_S * NS)
    assert summary.sequence_starts_ns == (BASE_EPOCH_NS, int(stamps[n2]))
    # sequence 2 first (NaN row 3 dropped), then sequence 1, values as written
    keep = np.ones(n2 + 1, bool)
    keep[3] = False
    expected = np.vstack([written[2].mag_ut[keep], written[1].mag_ut]) * 1e-6
    np.testing.assert_allclose([f.field_t for f in fields], expected, rtol=1e-15)
    # sequence 2 drives along +y, sequence 1 along +x
    yaw = yaw_from_quaternion(np.array([p.orientation_xyzw for p in poses]))
    np.testing.assert_allclose(yaw[:n2], np.pi / 2, atol=1e-9)
    np.testing.assert_allclose(yaw[n2:], 0.0, atol=1e-9)


def test_pose_rate_and_max_seconds(tmp_path: Path) -> None:
    write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "thin"
    summary = convert_aalto(
        tmp_path / "data", out, sequences=(1,), max_seconds=0.5, pose_rate_hz=10.0
    )
    assert summary.num_field == 25  # 0.00 .. 0.48 s at 50 Hz
    assert summary.num_pose == 5  # 0.0, 0.1, 0.2, 0.3, 0.4 s
    poses, fields = _split(list(read_bag(out)))
    pose_offsets = [(p.stamp_ns - BASE_EPOCH_NS) / NS for p in poses]
    np.testing.assert_allclose(pose_offsets, [0.0, 0.1, 0.2, 0.3, 0.4], atol=1e-9)
    assert {p.stamp_ns for p in poses} <= {f.stamp_ns for f in fields}


def test_the_field_is_written_in_the_body_frame_the_pose_undoes(tmp_path: Path) -> None:
    """By default: a node rotating the reading by the pose (target: vector, x, y, z) gets the
    recorded room-frame vector back, not the heading applied twice."""
    written = write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "body"
    convert_aalto(tmp_path / "data", out, sequences=(2,))
    poses, fields = _split(list(read_bag(out)))
    body = np.array([f.field_t for f in fields])
    yaw = yaw_from_quaternion(np.array([p.orientation_xyzw for p in poses]))
    room = np.delete(written[2].mag_ut, 3, axis=0) * 1e-6
    np.testing.assert_allclose(rotate_z(body, yaw), room, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(np.linalg.norm(body, axis=1), np.linalg.norm(room, axis=1))
    assert not np.allclose(body, room)  # heading pi/2: the body frame really differs


def test_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    write_tiny_aalto(tmp_path / "data")
    out = tmp_path / "bag"
    convert_aalto(tmp_path / "data", out, sequences=(1,))
    with pytest.raises(BagError, match=re.escape(f"{out} exists already")):
        convert_aalto(tmp_path / "data", out, sequences=(2,))
    assert bag_info(out).topics["/imu/mag"].count == 30  # untouched
    summary = convert_aalto(tmp_path / "data", out, sequences=(2,), force=True)
    assert bag_info(out).topics["/imu/mag"].count == summary.num_field == 29
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag", "data"]  # no staging left


def test_bad_inputs_are_dataset_errors(tmp_path: Path) -> None:
    write_tiny_aalto(tmp_path / "data", sensor="trivisio")
    with pytest.raises(DatasetError, match="'trivisio' is not logged in µT"):
        convert_aalto(tmp_path / "data", tmp_path / "out", sensor="trivisio")
    with pytest.raises(DatasetError, match=re.escape(f"{tmp_path / 'none'} does not exist")):
        convert_aalto(tmp_path / "none", tmp_path / "out")
    with pytest.raises(DatasetError, match="no sequences"):
        convert_aalto(tmp_path / "data", tmp_path / "out", sequences=())
    assert not (tmp_path / "out").exists()
