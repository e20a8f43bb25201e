"""Readings posed from the TF tree: the lever arm and mounting, waiting, and every bad input
counted with its reason while the readings that can be posed still are."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from gp_mapper.mapping import DropCounts, FieldReading, MapperConfig, Pairer
from gp_mapper.mapping.inputs import collect_samples
from gp_mapper.mapping.records import StaticTransform, Transform
from gp_mapper.mapping.transforms import TransformBuffer

MS = 1_000_000
T0 = 1_700_000_000_000 * MS
B_SENSOR_T = np.array([20e-6, -5e-6, -40e-6])


def tf(t_ms: int, parent: str, child: str, xyz, yaw_deg: float = 0.0) -> Transform:
    q = Rotation.from_euler("z", yaw_deg, degrees=True).as_quat()
    return Transform(T0 + t_ms * MS, parent, child, np.asarray(xyz, dtype=float), q)


MOUNT = tf(0, "base_link", "imu_link", [0.3, 0.0, 0.0], yaw_deg=90.0)


def make_pairer(**kwargs) -> tuple[Pairer, DropCounts]:
    drops = DropCounts()
    buffer = TransformBuffer(max_gap_ns=kwargs.pop("max_gap_ns", 1000 * MS))
    kwargs.setdefault("pose_wait_ns", 1000 * MS)
    return Pairer(buffer, drops, **kwargs), drops


def reading(t_ms: int, frame: str = "imu_link") -> FieldReading:
    return FieldReading(T0 + t_ms * MS, B_SENSOR_T, frame)


def test_a_reading_is_posed_at_the_sensor_with_its_mounting() -> None:
    pairer, drops = make_pairer()
    pairer.add_transform(MOUNT, static=True)
    pairer.add_transform(tf(0, "map", "odom", [10.0, 0.0, 0.0]), static=False)
    pairer.add_transform(tf(1000, "map", "odom", [10.0, 0.0, 0.0]), static=False)
    pairer.add_transform(tf(0, "odom", "base_link", [0.0, 0.0, 0.0], yaw_deg=0.0), static=False)
    assert pairer.add_reading(reading(500)) == []  # odom -> base_link not yet at 0.5 s
    samples = pairer.add_transform(tf(1000, "odom", "base_link", [1.0, 0.0, 0.0]), static=False)
    assert len(samples) == 1 and drops.total() == 0
    # Base at (10.5, 0); the sensor 0.3 m ahead of it; its x axis along the map's y.
    np.testing.assert_allclose(samples[0].position_m, [10.8, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(samples[0].field_ut, [5.0, 20.0, -40.0], atol=1e-9)
    yaw = Rotation.from_quat(samples[0].orientation_xyzw).as_euler("xyz", degrees=True)[2]
    assert yaw == pytest.approx(90.0)


def test_a_post_dated_map_to_odom_does_not_time_readings_out() -> None:
    # A localizer stamps map -> odom transform_tolerance ahead (AMCL: 1 s); the readings'
    # own clock decides how long they wait, not the newest transform's stamp.
    pairer, drops = make_pairer(pose_wait_ns=200 * MS, max_gap_ns=5000 * MS)
    pairer.add_transform(MOUNT, static=True)
    pairer.add_transform(tf(-1000, "map", "odom", [0, 0, 0]), static=False)
    pairer.add_transform(tf(2000, "map", "odom", [0, 0, 0]), static=False)  # post-dated
    pairer.add_transform(tf(0, "odom", "base_link", [0, 0, 0]), static=False)
    assert pairer.add_reading(reading(10)) == []
    samples = pairer.add_transform(tf(20, "odom", "base_link", [0.01, 0, 0]), static=False)
    assert len(samples) == 1 and drops.total() == 0


def test_a_missing_edge_drops_readings_after_the_timeout_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pairer, drops = make_pairer(pose_wait_ns=100 * MS)
    pairer.add_transform(tf(0, "map", "odom", [0, 0, 0]), static=False)
    pairer.add_transform(tf(0, "odom", "base_link", [0, 0, 0]), static=False)  # no mount yet
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pairing"):
        for t in range(0, 300, 10):
            pairer.add_reading(reading(t))
    assert drops.no_transform == 19  # 0..180 ms waited 100 ms of readings; the rest wait on
    assert pairer.pending == 11
    assert "no transform 'map' -> 'imu_link'" in caplog.text and "base_link" in caplog.text
    # The edge arrives: the waiting readings are posed, once transforms cover their stamps.
    pairer.add_transform(MOUNT, static=True)
    pairer.add_transform(tf(400, "map", "odom", [0, 0, 0]), static=False)
    samples = pairer.add_transform(tf(400, "odom", "base_link", [0.4, 0, 0]), static=False)
    assert len(samples) == 11 and drops.no_transform == 19


def test_a_frame_renamed_mid_stream_is_counted_and_the_rest_is_mapped() -> None:
    pairer, drops = make_pairer(pose_wait_ns=200 * MS)  # transforms every 100 ms
    pairer.add_transform(MOUNT, static=True)
    samples = []
    for t in range(0, 2000, 10):
        if t % 100 == 0:
            pairer.add_transform(tf(t, "map", "odom", [0, 0, 0]), static=False)
            samples += pairer.add_transform(
                tf(t, "odom", "base_link", [t / 1000, 0, 0]), static=False
            )
        samples += pairer.add_reading(reading(t, "imu_link" if t < 1000 else "mag_link"))
    pairer.flush()
    assert drops.no_transform == 100  # every mag_link reading, none of imu_link
    assert len(samples) == 100 and drops.total() == 100


def test_a_sensor_frame_set_by_parameter_overrides_the_header() -> None:
    pairer, drops = make_pairer(sensor_frame="imu_link")
    pairer.add_transform(MOUNT, static=True)
    pairer.add_transform(tf(0, "map", "base_link", [0, 0, 0]), static=False)
    pairer.add_reading(reading(5, "some_driver_frame"))
    samples = pairer.add_transform(tf(10, "map", "base_link", [0, 0, 0]), static=False)
    assert len(samples) == 1 and drops.total() == 0


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Transform(T0, "odom", "base_link", np.zeros(3), np.array([0.0, 0.0, 0.5, 0.5])),
         "bad_quaternion"),
        (Transform(T0, "odom", "base_link", np.full(3, np.inf), np.array([0, 0, 0, 1.0])),
         "bad_transform"),
        (tf(0, "imu_link", "map", [0, 0, 0]), "transform_loop"),
        (tf(3_600_000, "odom", "base_link", [5, 5, 0]), "future_transform"),
        (tf(-60_000, "odom", "base_link", [0, 0, 0]), "late_transform"),
    ],
)  # fmt: skip
def test_a_bad_transform_is_counted_by_reason_and_the_map_goes_on(
    bad: Transform, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    pairer, drops = make_pairer()
    pairer.add_transform(MOUNT, static=True)
    samples = []
    with caplog.at_level(logging.WARNING, logger="gp_mapper.mapping.pairing"):
        for t in range(0, 1000, 10):
            if t % 20 == 0:
                pairer.add_transform(tf(t, "map", "odom", [0, 0, 0]), static=False)
                samples += pairer.add_transform(
                    tf(t, "odom", "base_link", [t / 1000, 0, 0]), static=False
                )
            if t == 500:
                samples += pairer.add_transform(bad, static=False)
            samples += pairer.add_reading(reading(t))
    assert getattr(drops, reason) == 1
    assert drops.total() == 1
    assert len(samples) == 99  # the last reading waits for the next transforms
    assert "dropping a transform" in caplog.text


def test_collect_samples_under_tf_poses_each_reading_as_the_composed_chain() -> None:
    config = MapperConfig(transform_timeout=0.5)
    records: list = [StaticTransform(MOUNT)]
    for t in range(0, 3000, 10):
        if t % 20 == 0:
            records.append(tf(t, "odom", "base_link", [t / 1000, 0.0, 0.0], yaw_deg=t / 100))
        if t % 500 == 0:
            records.append(tf(t, "map", "odom", [1.0, 2.0, 0.0]))
        records.append(reading(t))
    samples = collect_samples(records, config)
    assert samples.drops["no_transform"] == 0
    assert len(samples.y) > 200
    # The first reading sits at the base (1, 2) plus the lever arm along the base's heading.
    np.testing.assert_allclose(samples.X[0], [1.3, 2.0], atol=1e-9)
