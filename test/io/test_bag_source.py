"""read_bag and bag_info against bags hand-written with rosbags (MCAP and sqlite3)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.io import BagError, bag_info, read_bag
from gp_mapper.mapping.records import FieldReading, Pose

from .helpers import NS, HandField, HandPose, storage_file, write_hand_bag

T0 = 1_650_000_000 * NS
POSE_MSGTYPES = {
    "pose_stamped": "geometry_msgs/msg/PoseStamped",
    "pose_with_covariance_stamped": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "odometry": "nav_msgs/msg/Odometry",
}
STORAGES = ["mcap", "sqlite3"]


def _fields(count: int = 5, start: int = T0, step: int = NS // 50) -> list[HandField]:
    return [
        HandField(start + k * step, (1e-5 * (k + 1), -2e-5, -4.5e-5 + 1e-7 * k))
        for k in range(count)
    ]


def _poses(count: int = 3, start: int = T0, step: int = NS // 10) -> list[HandPose]:
    half = np.sqrt(0.5)
    return [
        HandPose(start + k * step, (0.5 * k, -1.0, 0.25), (0.0, 0.0, half, half))
        for k in range(count)
    ]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("pose_type", sorted(POSE_MSGTYPES))
def test_every_pose_type_reads(tmp_path: Path, storage: str, pose_type: str) -> None:
    fields, poses = _fields(), _poses()
    bag = write_hand_bag(
        tmp_path / "bag",
        storage=storage,
        fields=fields,
        poses=poses,
        pose_msgtype=POSE_MSGTYPES[pose_type],
    )
    for requested in (pose_type, "auto"):
        records = list(read_bag(bag, pose_type=requested))
        got_poses = [r for r in records if isinstance(r, Pose)]
        got_fields = [r for r in records if isinstance(r, FieldReading)]
        assert len(got_poses) == len(poses) and len(got_fields) == len(fields)
        for got, want in zip(got_poses, poses, strict=True):
            assert got.stamp_ns == want.stamp_ns
            np.testing.assert_array_equal(got.position_m, want.position)
            np.testing.assert_array_equal(got.orientation_xyzw, want.quaternion)
        for got, want in zip(got_fields, fields, strict=True):
            assert (got.stamp_ns, got.frame_id) == (want.stamp_ns, want.frame_id)
            np.testing.assert_array_equal(got.field_t, want.field_t)
        stamps = [r.stamp_ns for r in records]
        assert stamps == sorted(stamps)


def test_wrong_pose_type_says_which_to_pass(tmp_path: Path) -> None:
    bag = write_hand_bag(
        tmp_path / "bag", fields=_fields(), poses=_poses(), pose_msgtype="nav_msgs/msg/Odometry"
    )
    with pytest.raises(BagError, match=r"/pose is nav_msgs/msg/Odometry.*pose_type='odometry'"):
        read_bag(bag, pose_type="pose_stamped")
    with pytest.raises(BagError, match="unknown pose type 'tf'"):
        read_bag(bag, pose_type="tf")


def test_header_stamps_not_log_times_order_the_records(tmp_path: Path) -> None:
    # The pose stamped T0 + 10 ms arrives (is logged) 50 ms late, after two readings.
    fields = _fields(3, start=T0, step=NS // 50)  # 0, 20, 40 ms
    poses = [HandPose(T0 + NS // 100, (1.0, 2.0, 0.0), (0.0, 0.0, 0.0, 1.0))]
    logs = [T0, T0 + NS // 50, T0 + 2 * NS // 50, T0 + 6 * NS // 100]
    bag = write_hand_bag(tmp_path / "bag", fields=fields, poses=poses, log_times=logs)
    ordered = [r.stamp_ns - T0 for r in read_bag(bag)]
    assert ordered == [0, 10_000_000, 20_000_000, 40_000_000]
    as_logged = [r.stamp_ns - T0 for r in read_bag(bag, reorder_window_s=0.0)]
    assert as_logged == [0, 20_000_000, 40_000_000, 10_000_000]


@pytest.mark.parametrize("storage", STORAGES)
def test_missing_mag_topic_is_named_with_the_topics_present(tmp_path: Path, storage: str) -> None:
    bag = write_hand_bag(
        tmp_path / "bag", storage=storage, poses=_poses(), mag_topic=None, extra_topic="/chatter"
    )
    expected = (
        f"{bag}: no topic /imu/mag; the bag holds /chatter [std_msgs/msg/String], "
        "/pose [geometry_msgs/msg/PoseStamped]"
    )
    with pytest.raises(BagError, match=re.escape(expected)):
        read_bag(bag)
    with pytest.raises(BagError, match="no topic /odom;"):
        read_bag(bag, mag_topic="/pose", pose_topic="/odom")


def test_mag_topic_of_the_wrong_type(tmp_path: Path) -> None:
    bag = write_hand_bag(tmp_path / "bag", fields=_fields(), poses=_poses())
    with pytest.raises(
        BagError,
        match="topic /pose is geometry_msgs/msg/PoseStamped, expected "
        "sensor_msgs/msg/MagneticField",
    ):
        read_bag(bag, mag_topic="/pose")


def test_missing_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_bag"
    with pytest.raises(BagError, match=re.escape(f"no bag at {missing}")):
        read_bag(missing)
    with pytest.raises(BagError, match=re.escape(f"no bag at {missing}")):
        bag_info(missing)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(BagError, match=re.escape(f"{empty_dir} is not a rosbag2 bag")):
        read_bag(empty_dir)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_bag_is_a_bag_error(tmp_path: Path, storage: str, keep: float) -> None:
    bag = write_hand_bag(tmp_path / "bag", storage=storage, fields=_fields(400), poses=_poses(40))
    data_file = storage_file(bag)
    data = data_file.read_bytes()
    data_file.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(BagError, match=re.escape(str(bag))):
        list(read_bag(bag))  # fails when opening or while reading, never with a raw error


def test_missing_storage_file_is_a_bag_error(tmp_path: Path) -> None:
    bag = write_hand_bag(tmp_path / "bag", fields=_fields(), poses=_poses())
    storage_file(bag).unlink()
    with pytest.raises(BagError, match="database files are missing"):
        bag_info(bag)


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_info_lists_topics_counts_and_span(tmp_path: Path, storage: str) -> None:
    bag = write_hand_bag(tmp_path / "bag", storage=storage, fields=_fields(51), poses=_poses(11))
    info = bag_info(bag)
    assert info.storage == storage
    assert info.topics == {
        "/imu/mag": ("sensor_msgs/msg/MagneticField", 51),
        "/pose": ("geometry_msgs/msg/PoseStamped", 11),
    }
    assert info.message_count == 62
    assert (info.start_ns, info.end_ns) == (T0, T0 + NS)
    assert info.duration_s == pytest.approx(1.0)


def test_a_single_mcap_file_reads_too(tmp_path: Path) -> None:
    bag = write_hand_bag(tmp_path / "bag", fields=_fields(), poses=_poses())
    records = list(read_bag(storage_file(bag)))
    assert len(records) == 8
    assert bag_info(storage_file(bag)).storage == "mcap"
