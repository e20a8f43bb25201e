"""The shared bag writer: stream merging, every pose type, overwrite rules, pose thinning."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from gp_mapper.io import BagError, FieldStream, PoseStream, read_bag, write_field_pose_bag
from gp_mapper.io.bag_writer import pose_sample_mask
from gp_mapper.mapping.records import FieldReading, Pose

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def _streams(n_field: int = 10, n_pose: int = 4) -> tuple[FieldStream, PoseStream]:
    rng = np.random.default_rng(11)
    field = FieldStream(
        stamps_ns=T0 + np.arange(n_field) * (NS // 50),
        field_t=rng.normal(0.0, 3e-5, (n_field, 3)),
    )
    yaw = rng.uniform(-np.pi, np.pi, n_pose)
    pose = PoseStream(
        stamps_ns=T0 + np.arange(n_pose) * (NS // 50) * 2,  # every other reading's stamp
        position_m=rng.uniform(-5.0, 5.0, (n_pose, 3)),
        orientation_xyzw=np.column_stack(
            [np.zeros(n_pose), np.zeros(n_pose), np.sin(yaw / 2), np.cos(yaw / 2)]
        ),
    )
    return field, pose


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
@pytest.mark.parametrize("pose_type", ["pose_stamped", "pose_with_covariance_stamped", "odometry"])
def test_round_trip_every_pose_type(tmp_path: Path, storage: str, pose_type: str) -> None:
    field, pose = _streams()
    out = tmp_path / "bag"
    summary = write_field_pose_bag(
        out, field, pose, storage=storage, pose_type=pose_type, custom_data={"k": "v"}
    )
    assert (summary.num_field, summary.num_pose) == (10, 4)
    assert (summary.start_ns, summary.end_ns) == (T0, T0 + 9 * NS // 50)
    records = list(read_bag(out, pose_type=pose_type))
    poses = [r for r in records if isinstance(r, Pose)]
    fields = [r for r in records if isinstance(r, FieldReading)]
    np.testing.assert_array_equal([p.position_m for p in poses], pose.position_m)
    np.testing.assert_array_equal([p.orientation_xyzw for p in poses], pose.orientation_xyzw)
    np.testing.assert_array_equal([f.field_t for f in fields], field.field_t)
    assert {f.frame_id for f in fields} == {"imu_link"}
    # at a shared stamp the pose comes first, so a reader never waits for it
    kinds = [(r.stamp_ns, isinstance(r, Pose)) for r in records]
    for stamp in pose.stamps_ns:
        at = [is_pose for s, is_pose in kinds if s == stamp]
        assert at == [True, False]
    with Reader(out) as reader:
        # log time equals header stamp for every message
        log_times = [t for _, t, _ in reader.messages()]
        assert log_times == sorted(r.stamp_ns for r in records)
        frames = {c.topic: c.msgtype for c in reader.connections}
    assert frames["/imu/mag"] == "sensor_msgs/msg/MagneticField"


def test_overwrite_rules(tmp_path: Path) -> None:
    field, pose = _streams()
    out = tmp_path / "bag"
    write_field_pose_bag(out, field, pose)
    with pytest.raises(BagError, match=re.escape(f"{out} exists already; not overwriting")):
        write_field_pose_bag(out, field, pose)
    short_field = FieldStream(field.stamps_ns[:3], field.field_t[:3])
    summary = write_field_pose_bag(out, short_field, pose, storage="sqlite3", force=True)
    assert summary.num_field == 3
    assert sorted(p.suffix for p in out.iterdir()) == [".db3", ".yaml"]  # the old MCAP is gone

    not_a_bag = tmp_path / "photos"
    not_a_bag.mkdir()
    (not_a_bag / "holiday.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(BagError, match="not a bag; refusing to replace it even with force"):
        write_field_pose_bag(not_a_bag, field, pose, force=True)
    assert (not_a_bag / "holiday.jpg").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag", "photos"]  # no staging left


def test_bad_streams_fail_before_anything_is_written(tmp_path: Path) -> None:
    field, pose = _streams()
    out = tmp_path / "bag"
    bad_field = FieldStream(field.stamps_ns, field.field_t.copy())
    bad_field.field_t[2, 1] = np.nan
    with pytest.raises(BagError, match="field_t holds NaN"):
        write_field_pose_bag(out, bad_field, pose)
    backwards = PoseStream(pose.stamps_ns[::-1], pose.position_m, pose.orientation_xyzw)
    with pytest.raises(BagError, match="pose stream: stamps do not increase at index 1"):
        write_field_pose_bag(out, field, backwards)
    with pytest.raises(BagError, match=r"unknown storage 'rosbag1'; expected one of \['mcap'"):
        write_field_pose_bag(out, field, pose, storage="rosbag1")
    with pytest.raises(BagError, match="unknown pose type 'tf'"):
        write_field_pose_bag(out, field, pose, pose_type="tf")
    assert list(tmp_path.iterdir()) == []


def test_pose_sample_mask_keeps_the_first_sample_of_each_slot() -> None:
    time_s = 20.89 + np.arange(26) * 0.02  # 50 Hz, float times as in the Aalto files
    np.testing.assert_array_equal(
        np.flatnonzero(pose_sample_mask(time_s, 10.0)), [0, 5, 10, 15, 20, 25]
    )
    np.testing.assert_array_equal(pose_sample_mask(time_s, None), True)
    assert pose_sample_mask(time_s, 1000.0).all()  # faster than the samples: keep all
    with pytest.raises(ValueError, match="positive"):
        pose_sample_mask(time_s, 0.0)
