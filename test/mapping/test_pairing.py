from __future__ import annotations

import logging

import numpy as np
import pytest

from gp_mapper.mapping import DropCounts, FieldReading, Pairer, Pose, PoseBuffer, Sample

from .synthetic import yaw_quaternion

MS = 1_000_000  # ns per ms
IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])


def make_pairer(**kwargs) -> tuple[Pairer, DropCounts]:
    drops = DropCounts()
    poses = PoseBuffer(
        kwargs.pop("capacity", 100),
        kwargs.pop("max_gap_ns", 200 * MS),
        kwargs.pop("max_speed", 10.0),
    )
    kwargs.setdefault("pose_wait_ns", 500 * MS)
    return Pairer(poses, drops, **kwargs), drops


def pose(t_ms: int, x: float = 0.0, q: np.ndarray = IDENTITY) -> Pose:
    return Pose(t_ms * MS, np.array([x, 0.0, 0.0]), q)


def reading(t_ms: int, field_t=(30e-6, 40e-6, 0.0), frame: str = "imu") -> FieldReading:
    return FieldReading(t_ms * MS, np.asarray(field_t, dtype=float), frame)


def test_reading_between_poses_becomes_a_sample_in_microtesla() -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(0, 0.0))
    pairer.add_pose(pose(100, 1.0))
    samples = pairer.add_reading(reading(25))
    assert len(samples) == 1
    sample = samples[0]
    assert isinstance(sample, Sample) and sample.stamp_ns == 25 * MS
    np.testing.assert_allclose(sample.position_m, [0.25, 0.0, 0.0])
    np.testing.assert_allclose(sample.field_ut, [30.0, 40.0, 0.0])
    assert np.linalg.norm(sample.field_ut) == pytest.approx(50.0)
    assert drops.total() == 0


def test_field_is_rotated_into_the_map_frame() -> None:
    pairer, _ = make_pairer()
    # Sensor yawed +90 degrees: its x axis points along map +y.
    pairer.add_pose(pose(0, q=yaw_quaternion(np.pi / 2)))
    pairer.add_pose(pose(100, q=yaw_quaternion(np.pi / 2)))
    (sample,) = pairer.add_reading(reading(50, (20e-6, 0.0, -40e-6)))
    np.testing.assert_allclose(sample.field_ut, [0.0, 20.0, -40.0], atol=1e-12)


def test_reading_waits_for_a_later_pose() -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(0))
    assert pairer.add_reading(reading(10)) == []
    assert pairer.add_reading(reading(20)) == []
    assert pairer.pending == 2
    samples = pairer.add_pose(pose(30, 0.03))
    assert [s.stamp_ns for s in samples] == [10 * MS, 20 * MS]
    np.testing.assert_allclose([s.position_m[0] for s in samples], [0.01, 0.02])
    assert pairer.pending == 0 and drops.total() == 0


def test_reading_that_waited_longer_than_pose_wait_is_dropped() -> None:
    pairer, drops = make_pairer(pose_wait_ns=100 * MS)
    pairer.add_pose(pose(0))
    pairer.add_reading(reading(10))
    pairer.add_reading(reading(60))
    pairer.add_reading(reading(111))  # 101 ms after the first reading: it has waited too long
    assert drops.no_pose == 1 and pairer.pending == 2
    # A pose stream that is 150 ms late does not bring back what expired.
    samples = pairer.add_pose(pose(150, 0.15))
    assert [s.stamp_ns for s in samples] == [60 * MS, 111 * MS]


def test_reading_older_than_every_pose_is_dropped() -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(100))
    pairer.add_pose(pose(200))
    assert pairer.add_reading(reading(50)) == []
    assert drops.no_pose == 1 and pairer.pending == 0


def test_gap_and_jump_are_counted() -> None:
    pairer, drops = make_pairer(max_gap_ns=200 * MS, max_speed=10.0)
    pairer.add_pose(pose(0, 0.0))
    pairer.add_pose(pose(500, 0.1))  # 500 ms apart: a gap
    pairer.add_pose(pose(600, 50.0))  # 500 m/s: a jump
    assert pairer.add_reading(reading(250)) == []
    assert pairer.add_reading(reading(550)) == []
    assert drops.pose_gap == 1 and drops.pose_jump == 1


@pytest.mark.parametrize(
    ("field_t", "reason"),
    [
        ((np.nan, 0.0, 1e-6), "nan"),
        ((np.inf, 0.0, 1e-6), "nan"),
        ((0.0, -np.inf, 1e-6), "nan"),
        ((1e-6, 2e-6), "nan"),
        ((0.0, 0.0, 0.0), "zero_field"),
    ],
)
def test_bad_field_is_counted(field_t, reason: str) -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(0))
    pairer.add_pose(pose(100))
    assert pairer.add_reading(reading(50, field_t)) == []
    assert getattr(drops, reason) == 1 and drops.total() == 1


def test_out_of_order_and_repeated_reading_stamps_are_counted() -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(0))
    pairer.add_pose(pose(100))
    assert len(pairer.add_reading(reading(50))) == 1
    assert pairer.add_reading(reading(50)) == []
    assert pairer.add_reading(reading(40)) == []
    assert drops.out_of_order == 2
    assert len(pairer.add_reading(reading(60))) == 1


def test_wrong_frame_is_counted_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    pairer, drops = make_pairer(expected_frame="imu_link")
    pairer.add_pose(pose(0))
    pairer.add_pose(pose(100))
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pairing"):
        for t in (10, 20, 30):
            assert pairer.add_reading(reading(t, frame="base_link")) == []
    assert drops.frame == 3
    assert len([r for r in caplog.records if "base_link" in r.getMessage()]) == 1
    assert len(pairer.add_reading(reading(40, frame="imu_link"))) == 1


def test_late_and_bad_poses_are_counted() -> None:
    pairer, drops = make_pairer(capacity=3)
    for t in (100, 200, 300):
        pairer.add_pose(pose(t))
    pairer.add_pose(pose(50))  # older than the whole buffer
    pairer.add_pose(Pose(400 * MS, np.array([np.nan, 0, 0]), IDENTITY))
    assert drops.late_pose == 1 and drops.bad_pose == 1


def test_pending_queue_is_capped() -> None:
    pairer, drops = make_pairer(max_pending=4, pose_wait_ns=10_000 * MS)
    pairer.add_pose(pose(0))
    for t in range(1, 11):
        pairer.add_reading(reading(t))
    assert pairer.pending == 4 and drops.no_pose == 6
    samples = pairer.add_pose(pose(20))
    assert [s.stamp_ns // MS for s in samples] == [7, 8, 9, 10]


def test_flush_gives_up_on_waiting_readings() -> None:
    pairer, drops = make_pairer()
    pairer.add_pose(pose(0))
    pairer.add_reading(reading(10))
    pairer.flush()
    assert pairer.pending == 0 and drops.no_pose == 1


def test_random_garbage_never_crashes_and_every_reading_is_accounted_for() -> None:
    rng = np.random.default_rng(20240611)
    pairer, drops = make_pairer(expected_frame="imu", pose_wait_ns=300 * MS, max_gap_ns=100 * MS)
    made = 0
    readings = 0
    for step in range(3000):
        t = step * 10 + int(rng.integers(-40, 40))  # jittered, often out of order
        if rng.uniform() < 0.4:
            xyz = rng.normal(size=3) * (100.0 if rng.uniform() < 0.05 else 1.0)
            if rng.uniform() < 0.05:
                xyz[0] = np.nan
            q = rng.normal(size=4) if rng.uniform() < 0.95 else np.zeros(4)
            stamp = t if rng.uniform() < 0.98 else t - 10_000  # now and then a stale pose
            made += len(pairer.add_pose(Pose(stamp * MS, xyz, q)))
        else:
            field = rng.normal(size=3) * 5e-5
            roll = rng.uniform()
            if roll < 0.05:
                field[1] = np.nan
            elif roll < 0.08:
                field[:] = 0.0
            elif roll < 0.1:
                field[2] = -np.inf
            frame = "imu" if rng.uniform() < 0.95 else "other"
            made += len(pairer.add_reading(FieldReading(t * MS, field, frame)))
            readings += 1
    pairer.flush()
    reading_drops = drops.total() - drops.late_pose - drops.bad_pose
    assert made > 0 and made + reading_drops == readings
    for reason in ("nan", "zero_field", "out_of_order", "frame", "late_pose", "bad_pose"):
        assert getattr(drops, reason) > 0, reason
