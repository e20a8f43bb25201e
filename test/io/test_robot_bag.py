"""The robot bag: TF and a magnetometer in its own frame, read back with rosbags alone.

The transforms are composed here with 4 x 4 matrices from the bag's quaternions, not with the
writer's planar helpers, so the chain is checked against an independent composition.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from rosbags.interfaces import QosDurability, QosHistory, QosReliability
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from gp_mapper.io import (
    BASE_EPOCH_NS,
    BagError,
    RobotRun,
    make_synthetic_world,
    simulate_robot_run,
    write_robot_bag,
    write_robot_pose_bag,
)
from gp_mapper.io.synthetic import SyntheticWorld

NS = 1_000_000_000
DURATION_S = 180.0
RATE_HZ = 100.0
NOISE_UT = 0.3
# A lever arm off all three axes, so that a reader that drops y or z of it is caught.
LEVER_ARM_M = (0.3, -0.1, 0.25)
TYPESTORE = get_typestore(Stores.ROS2_JAZZY)


class Edge(NamedTuple):
    """One TF edge as read: stamps [K] ns and the transform's translation [K, 3], quaternion
    [K, 4] (x, y, z, w)."""

    stamps: np.ndarray
    translation: np.ndarray
    rotation: np.ndarray


class BagContents(NamedTuple):
    topics: dict[str, tuple[str, int]]  # topic -> (type, count)
    qos: dict[str, list[Any]]
    edges: dict[tuple[str, str], Edge]  # (parent, child) -> /tf edge
    static: dict[tuple[str, str], Edge]  # (parent, child) -> /tf_static edge
    mag_stamps: np.ndarray  # [N] header stamps, ns
    mag_ut: np.ndarray  # [N, 3]
    mag_frames: set[str]
    covariance: np.ndarray  # [9] T², the first message's
    order: list[tuple[str, int]]  # (topic, bag time) of every message as stored
    header_equals_bag_time: bool
    transforms_per_message: set[int]


def _stamp(header: Any) -> int:
    return header.stamp.sec * NS + header.stamp.nanosec


def read_robot_bag(path: Path) -> BagContents:
    rows: dict[tuple[str, str, str], list[tuple[int, list[float], list[float]]]] = defaultdict(list)
    mag_stamps, mag, frames, covariance = [], [], set(), None
    order, header_ok, per_message = [], True, set()
    with Reader(path) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        qos = {c.topic: list(c.ext.offered_qos_profiles) for c in reader.connections}
        for connection, bag_time, raw in reader.messages():
            msg = TYPESTORE.deserialize_cdr(raw, connection.msgtype)
            order.append((connection.topic, bag_time))
            if connection.msgtype == "tf2_msgs/msg/TFMessage":
                per_message.add(len(msg.transforms))
                for tf in msg.transforms:
                    header_ok &= _stamp(tf.header) == bag_time
                    t, q = tf.transform.translation, tf.transform.rotation
                    key = (connection.topic, tf.header.frame_id, tf.child_frame_id)
                    rows[key].append((bag_time, [t.x, t.y, t.z], [q.x, q.y, q.z, q.w]))
            else:
                header_ok &= _stamp(msg.header) == bag_time
                mag_stamps.append(bag_time)
                field = msg.magnetic_field
                mag.append([field.x, field.y, field.z])
                frames.add(msg.header.frame_id)
                if covariance is None:
                    covariance = np.array(msg.magnetic_field_covariance)
    edges: dict[str, dict[tuple[str, str], Edge]] = {"/tf": {}, "/tf_static": {}}
    for (topic, parent, child), values in rows.items():
        stamps, translation, rotation = zip(*values, strict=True)
        edges[topic][(parent, child)] = Edge(
            np.array(stamps), np.array(translation), np.array(rotation)
        )
    return BagContents(
        topics=topics,
        qos=qos,
        edges=edges["/tf"],
        static=edges["/tf_static"],
        mag_stamps=np.array(mag_stamps),
        mag_ut=np.array(mag) * 1e6,
        mag_frames=frames,
        covariance=covariance,
        order=order,
        header_equals_bag_time=header_ok,
        transforms_per_message=per_message,
    )


def matrix(translation: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[4, 4] homogeneous transforms [..., 4, 4] from translations [..., 3] and unit
    quaternions [..., 4] (x, y, z, w)."""
    x, y, z, w = np.moveaxis(np.asarray(q, dtype=np.float64), -1, 0)
    rotation = np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )
    out = np.zeros((*rotation.shape[:-2], 4, 4))
    out[..., :3, :3] = rotation
    out[..., :3, 3] = translation
    out[..., 3, 3] = 1.0
    return out


def planar_yaw(q: np.ndarray) -> np.ndarray:
    """Yaw [...] of quaternions [..., 4] about z (their x and y are zero here)."""
    return 2.0 * np.arctan2(q[..., 2], q[..., 3])


def yaw_quaternion(yaw: np.ndarray) -> np.ndarray:
    half = 0.5 * np.asarray(yaw)
    return np.stack([0 * half, 0 * half, np.sin(half), np.cos(half)], -1)


def interpolate(edge: Edge, stamps: np.ndarray) -> np.ndarray:
    """The edge at ``stamps`` [N]: translation linear and yaw linear (unwrapped) between the two
    bracketing stamps, as tf2 does for a planar edge; [N, 4, 4]. Refuses to extrapolate."""
    assert edge.stamps[0] <= stamps.min() and stamps.max() <= edge.stamps[-1]
    t = np.column_stack([np.interp(stamps, edge.stamps, edge.translation[:, j]) for j in range(3)])
    yaw = np.interp(stamps, edge.stamps, np.unwrap(planar_yaw(edge.rotation)))
    return matrix(t, yaw_quaternion(yaw))


def hold(edge: Edge, stamps: np.ndarray) -> np.ndarray:
    """The edge's latest transform at or before each of ``stamps`` [N]; [N, 4, 4]."""
    k = np.searchsorted(edge.stamps, stamps, side="right") - 1
    assert (k >= 0).all()
    return matrix(edge.translation[k], edge.rotation[k])


def planar_error(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position [N] m and yaw [N] rad differences of poses a, b [N, 4, 4]."""
    position = np.linalg.norm(a[:, :3, 3] - b[:, :3, 3], axis=1)
    yaw_a = np.arctan2(a[:, 1, 0], a[:, 0, 0])
    yaw_b = np.arctan2(b[:, 1, 0], b[:, 0, 0])
    return position, np.abs(np.angle(np.exp(1j * (yaw_a - yaw_b))))


def true_sensor(run: RobotRun) -> np.ndarray:
    return matrix(run.sensor_position_m, run.sensor_orientation_xyzw)


def run_stamps(time_s: np.ndarray) -> np.ndarray:
    return BASE_EPOCH_NS + np.rint(time_s * NS).astype(np.int64)


@pytest.fixture(scope="module")
def world() -> SyntheticWorld:
    return make_synthetic_world(seed=0)


@pytest.fixture(scope="module")
def run(world: SyntheticWorld) -> RobotRun:
    return simulate_robot_run(world, DURATION_S, RATE_HZ, seed=0, lever_arm_m=LEVER_ARM_M)


@pytest.fixture(scope="module")
def bag(run: RobotRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("robot") / "robot"
    write_robot_bag(path, run)
    return path


@pytest.fixture(scope="module")
def contents(bag: Path) -> BagContents:
    return read_robot_bag(bag)


def test_topics_types_counts_and_frames(run: RobotRun, contents: BagContents) -> None:
    n = int(DURATION_S * RATE_HZ) + 1
    odom = int(DURATION_S * 50.0) + 1  # 50 Hz from 0 to the last reading, both ends included
    map_odom = int(DURATION_S * 2.0) + 1
    assert contents.topics == {
        "/tf_static": ("tf2_msgs/msg/TFMessage", 1),
        "/tf": ("tf2_msgs/msg/TFMessage", odom + map_odom),
        "/imu/mag": ("sensor_msgs/msg/MagneticField", n),
    }
    assert contents.transforms_per_message == {1}
    assert set(contents.edges) == {("map", "odom"), ("odom", "base_link")}
    assert set(contents.static) == {("base_link", "imu_link")}
    assert contents.edges[("odom", "base_link")].stamps.size == odom
    assert contents.edges[("map", "odom")].stamps.size == map_odom
    assert contents.mag_frames == {"imu_link"}
    assert contents.header_equals_bag_time
    np.testing.assert_array_equal(contents.mag_stamps, run_stamps(run.time_s))
    np.testing.assert_array_equal(
        contents.covariance, np.diag(np.full(3, (NOISE_UT * 1e-6) ** 2)).ravel()
    )
    # The static transform is the mounting, and is the first message, at the first stamp.
    static = contents.static[("base_link", "imu_link")]
    assert contents.order[0] == ("/tf_static", BASE_EPOCH_NS)
    np.testing.assert_allclose(static.translation[0], LEVER_ARM_M, atol=1e-15)
    assert planar_yaw(static.rotation[0]) == pytest.approx(math.pi / 2.0, abs=1e-12)


def test_transforms_come_before_the_reading_of_their_stamp(contents: BagContents) -> None:
    times = np.array([t for _, t in contents.order])
    assert (np.diff(times) >= 0).all()
    is_mag = np.array([topic == "/imu/mag" for topic, _ in contents.order])
    # At a stamp with both, the last transform comes before the first reading.
    for stamp in np.intersect1d(times[is_mag], times[~is_mag])[:200]:
        at = np.flatnonzero(times == stamp)
        assert np.flatnonzero(~is_mag[at]).max() < np.flatnonzero(is_mag[at]).min()


@pytest.mark.parametrize("map_odom", ["held", "interpolated"])
def test_the_tf_chain_gives_the_true_sensor_pose(
    run: RobotRun, contents: BagContents, map_odom: str
) -> None:
    """map -> odom held at the latest correction (what a localizer last said) or interpolated
    between corrections (tf2's lookup); odom -> base_link interpolated; the static mounting."""
    stamps = contents.mag_stamps
    look = hold if map_odom == "held" else interpolate
    static = contents.static[("base_link", "imu_link")]
    odom_base = interpolate(contents.edges[("odom", "base_link")], stamps)
    chain = look(contents.edges[("map", "odom")], stamps) @ odom_base
    chain = chain @ matrix(static.translation[0], static.rotation[0])
    position, yaw = planar_error(chain, true_sensor(run))
    # The bound: the localizer's noise (4 σ, both axes, turned through the lever arm) plus
    # 5 % odometry drift over the half second between corrections at walking speed.
    bound_m = 4.0 * (0.02 * math.sqrt(2.0) + 0.005 * np.linalg.norm(LEVER_ARM_M[:2]))
    bound_m += 0.05 * 0.5 * 0.5
    assert position.max() < bound_m
    assert np.sqrt(np.mean(position**2)) < 0.04
    assert yaw.max() < 4.0 * 0.005 + math.radians(0.25) * 0.5  # noise + gyro bias, 0.5 s
    np.testing.assert_allclose(chain[:, 2, 3], LEVER_ARM_M[2], atol=1e-12)
    # Odometry alone (map -> odom dropped after the start) is metres off: the chain matters.
    first = hold(contents.edges[("map", "odom")], stamps[:1])
    alone = first @ odom_base @ matrix(static.translation[0], static.rotation[0])
    assert planar_error(alone, true_sensor(run))[0].max() > 1.0


def test_readings_are_the_field_at_the_sensor_in_its_axes(
    world: SyntheticWorld, run: RobotRun, contents: BagContents
) -> None:
    turn = true_sensor(run)[:, :3, :3]
    corrected = np.einsum("nij,nj->ni", turn, contents.mag_ut - run.hard_iron_ut)
    residual = corrected - world.field_at(run.sensor_position_m)
    assert np.abs(residual.mean(axis=0)).max() < 0.02  # no bias left: 4 σ/√N
    assert residual.std(axis=0) == pytest.approx([NOISE_UT] * 3, rel=0.03)
    assert np.abs(residual).max() < 6.0 * NOISE_UT
    # The hard iron is in the readings, and the lever arm matters: the base's own position
    # (z = 0) reads a field off by more than the noise.
    assert np.linalg.norm(run.hard_iron_ut) > 10.0
    at_base = corrected - world.field_at(run.base_xy_m)
    assert np.sqrt(np.mean(at_base**2)) > 3.0 * NOISE_UT


def test_odometry_drifts_two_to_five_percent_of_the_distance(
    run: RobotRun, contents: BagContents
) -> None:
    edge = contents.edges[("odom", "base_link")]
    inside = edge.stamps <= contents.mag_stamps[-1]
    at = np.searchsorted(contents.mag_stamps, edge.stamps[inside])
    np.testing.assert_array_equal(contents.mag_stamps[at], edge.stamps[inside])
    truth = matrix(
        np.column_stack([run.base_xy_m[at], np.zeros(at.size)]),
        yaw_quaternion(run.base_yaw_rad[at]),
    )
    # Dead reckoning from the true start: odom is the base's start pose.
    odom = matrix(edge.translation[inside], edge.rotation[inside])
    dead_reckoned = truth[0] @ odom
    error = planar_error(dead_reckoned, truth)[0]
    steps = np.linalg.norm(np.diff(truth[:, :2, 3], axis=0), axis=1)
    distance = steps.sum()
    assert distance == pytest.approx(0.5 * DURATION_S, rel=0.01)
    assert 0.02 < error.max() / distance < 0.05
    odom_steps = np.linalg.norm(np.diff(odom[:, :2, 3], axis=0), axis=1)
    assert abs(odom_steps.sum() / distance - 1.0) == pytest.approx(0.03, abs=0.002)
    # map -> odom jumps at each correction, by about the localizer's noise.
    jumps = np.linalg.norm(np.diff(contents.edges[("map", "odom")].translation, axis=0), axis=1)
    assert 0.01 < np.median(jumps) < 0.1


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_tf_static_is_offered_transient_local(
    world: SyntheticWorld, tmp_path: Path, storage: str
) -> None:
    path = tmp_path / "bag"
    write_robot_bag(path, simulate_robot_run(world, 2.0), storage=storage)
    with Reader(path) as reader:
        qos = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    (static,) = qos["/tf_static"]
    assert static.durability == QosDurability.TRANSIENT_LOCAL
    assert static.reliability == QosReliability.RELIABLE
    assert (static.history, static.depth) == (QosHistory.KEEP_LAST, 1)
    assert qos["/tf"] == [] and qos["/imu/mag"] == []
    text = (path / "metadata.yaml").read_text()
    assert "durability: transient_local" in text


def _raw_messages(path: Path) -> list[tuple[str, int, bytes]]:
    with Reader(path) as reader:
        return [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]


def test_same_seed_same_messages(world: SyntheticWorld, tmp_path: Path) -> None:
    bags = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        bags[name] = tmp_path / name
        write_robot_bag(bags[name], simulate_robot_run(world, 5.0, seed=seed))
    a, b, c = (_raw_messages(bags[k]) for k in "abc")
    assert a == b
    assert [m[:2] for m in a] == [m[:2] for m in c]  # same stamps and topics...
    assert a != c  # ...other noise, odometry and corrections


def test_the_pose_bag_is_the_same_walk_with_the_exact_sensor_pose(
    world: SyntheticWorld, tmp_path: Path
) -> None:
    run = simulate_robot_run(world, 5.0, lever_arm_m=LEVER_ARM_M)
    write_robot_bag(tmp_path / "robot", run)
    write_robot_pose_bag(tmp_path / "pose", run)
    robot = [m for m in _raw_messages(tmp_path / "robot") if m[0] == "/imu/mag"]
    pose_bag = _raw_messages(tmp_path / "pose")
    assert [m for m in pose_bag if m[0] == "/imu/mag"] == robot
    poses = [
        (t, TYPESTORE.deserialize_cdr(raw, "geometry_msgs/msg/PoseStamped"))
        for topic, t, raw in pose_bag
        if topic == "/pose"
    ]
    assert [t for t, _ in poses] == [t for _, t, _ in robot]
    position = [[m.pose.position.x, m.pose.position.y, m.pose.position.z] for _, m in poses]
    q = [[m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z,
          m.pose.orientation.w] for _, m in poses]  # fmt: skip
    np.testing.assert_array_equal(position, run.sensor_position_m)
    np.testing.assert_array_equal(q, run.sensor_orientation_xyzw)
    assert {m.header.frame_id for _, m in poses} == {"map"}


def test_every_reading_lies_between_two_transforms_of_each_edge(world: SyntheticWorld) -> None:
    run = simulate_robot_run(world, 7.37, 30.0, odom_rate_hz=7.0, map_odom_rate_hz=0.9)
    assert run.odom_time_s[-1] >= run.time_s[-1] > run.odom_time_s[-2]
    assert run.map_odom_time_s[-1] >= run.time_s[-1] > run.map_odom_time_s[-2]
    assert run.odom_time_s[0] == run.map_odom_time_s[0] == run.time_s[0] == 0.0


def test_bad_arguments_and_existing_bags(world: SyntheticWorld, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lever_arm_m"):
        simulate_robot_run(world, 2.0, lever_arm_m=(0.3, 0.0))
    with pytest.raises(ValueError, match="hard_iron_ut"):
        simulate_robot_run(world, 2.0, hard_iron_ut=(np.nan, 0.0, 0.0))
    with pytest.raises(ValueError, match="odom_rate_hz"):
        simulate_robot_run(world, 2.0, odom_rate_hz=0.0)
    with pytest.raises(ValueError, match="gyro_bias_dps"):
        simulate_robot_run(world, 2.0, gyro_bias_dps=-1.0)
    run = simulate_robot_run(world, 2.0)
    write_robot_bag(tmp_path / "bag", run)
    with pytest.raises(BagError, match="exists already"):
        write_robot_bag(tmp_path / "bag", run)
    write_robot_bag(tmp_path / "bag", run, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["bag"]
