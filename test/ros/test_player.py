"""The bag player publishes a recorded bag onto a live graph, in full and in order."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.context import Context
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import MagneticField

from gp_mapper.commands.play import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    add_play_arguments,
    parse_remaps,
    run_play,
)
from gp_mapper.ros.errors import BagError
from gp_mapper.ros.player import play_bag
from gp_mapper.ros.recorder import record_bag
from gp_mapper.ros.stamps import stamp_to_ns

from .helpers import Collector, Spinner, wait_for
from .mapper_harness import READING_PERIOD_NS, harness, mag_msg, path, pose_msg, stamp, true_field

pytestmark = pytest.mark.ros

N_MAG = 200  # 100 Hz for 2 s
N_POSE = 50  # 25 Hz for 2 s
T0_NS = 1_000_000_000_000
RATE = 4.0  # play the 2 s bag in 0.5 s
RELIABLE_DEEP = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def write_bag(path: Path, storage: StoragePlugin = StoragePlugin.MCAP) -> None:
    """A bag like bag_convert's: /imu/mag (T, imu_link) at 100 Hz, /pose (map) at 25 Hz."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    mf = ts.types["sensor_msgs/msg/MagneticField"]
    ps = ts.types["geometry_msgs/msg/PoseStamped"]
    header = ts.types["std_msgs/msg/Header"]
    time_t = ts.types["builtin_interfaces/msg/Time"]
    vec = ts.types["geometry_msgs/msg/Vector3"]
    pose_t = ts.types["geometry_msgs/msg/Pose"]
    point = ts.types["geometry_msgs/msg/Point"]
    quat = ts.types["geometry_msgs/msg/Quaternion"]
    events = [(T0_NS + k * 10_000_000, "mag", k) for k in range(N_MAG)]
    events += [(T0_NS + k * 40_000_000, "pose", k) for k in range(N_POSE)]
    events.sort(key=lambda e: (e[0], e[1]))
    with Writer(path, version=9, storage_plugin=storage) as writer:
        c_mag = writer.add_connection("/imu/mag", mf.__msgtype__, typestore=ts)
        c_pose = writer.add_connection("/pose", ps.__msgtype__, typestore=ts)
        for t_ns, kind, k in events:
            stamp = time_t(sec=t_ns // 10**9, nanosec=t_ns % 10**9)
            if kind == "mag":
                msg = mf(
                    header=header(stamp=stamp, frame_id="imu_link"),
                    magnetic_field=vec(x=1e-6 * k, y=2e-5, z=-4e-5),
                    magnetic_field_covariance=np.zeros(9),
                )
                writer.write(c_mag, t_ns, ts.serialize_cdr(msg, mf.__msgtype__))
            else:
                msg = ps(
                    header=header(stamp=stamp, frame_id="map"),
                    pose=pose_t(
                        position=point(x=0.1 * k, y=0.0, z=0.0),
                        orientation=quat(x=0.0, y=0.0, z=0.0, w=1.0),
                    ),
                )
                writer.write(c_pose, t_ns, ts.serialize_cdr(msg, ps.__msgtype__))


@pytest.fixture
def bag(tmp_path: Path) -> Path:
    path = tmp_path / "input_bag"
    write_bag(path)
    return path


def test_player_publishes_every_message_in_order_with_clock(bag: Path, spinner: Spinner) -> None:
    node = spinner.node("player_probe")
    sink = Collector(node)
    # topics of this test only: a subscriber left from another test cannot satisfy the
    # player's wait for subscribers
    sink.listen(MagneticField, "/play1/mag", RELIABLE_DEEP)
    sink.listen(PoseStamped, "/play1/pose", RELIABLE_DEEP)
    sink.listen(Clock, "/clock", RELIABLE_DEEP)

    remaps = {"/imu/mag": "/play1/mag", "/pose": "/play1/pose"}
    result = play_bag(bag, rate=RATE, remaps=remaps, wait_subscribers_s=20.0)

    assert result.published == {"/play1/mag": N_MAG, "/play1/pose": N_POSE}
    assert not result.interrupted
    # paced: 1.99 s of bag time at x4 takes ~0.5 s, not an instant and not real time
    assert 1.99 / RATE <= result.duration_s < 1.99
    wait_for(
        lambda: sink.count("/play1/mag") == N_MAG and sink.count("/play1/pose") == N_POSE,
        what="the whole bag",
    )
    mags = sink.messages("/play1/mag")
    assert [stamp_to_ns(m.header.stamp) for m in mags] == [
        T0_NS + k * 10_000_000 for k in range(N_MAG)
    ]
    assert mags[7].header.frame_id == "imu_link"
    assert mags[7].magnetic_field.x == pytest.approx(7e-6)
    assert sink.messages("/play1/pose")[3].pose.position.x == pytest.approx(0.3)
    clocks = [stamp_to_ns(c.clock) for c in sink.messages("/clock")]
    assert clocks == sorted(clocks) and clocks[0] == T0_NS and clocks[-1] == T0_NS + 1_990_000_000


def test_player_plays_only_selected_topics_and_sqlite(tmp_path: Path, spinner: Spinner) -> None:
    path = tmp_path / "sqlite_bag"
    write_bag(path, StoragePlugin.SQLITE3)
    node = spinner.node("player_probe_sql")
    sink = Collector(node)
    sink.listen(PoseStamped, "/play2/pose", RELIABLE_DEEP, raw=True)
    result = play_bag(
        path,
        rate=50.0,
        topics=["/pose"],
        remaps={"/pose": "/play2/pose"},
        publish_clock=False,
        wait_subscribers_s=20.0,
    )
    assert result.published == {"/play2/pose": N_POSE}
    wait_for(lambda: sink.count("/play2/pose") == N_POSE, what="poses")
    first = deserialize_message(sink.messages("/play2/pose")[0], PoseStamped)
    assert stamp_to_ns(first.header.stamp) == T0_NS


def test_player_errors_name_the_bag_and_the_fault(tmp_path: Path, bag: Path) -> None:
    with pytest.raises(BagError, match="no such bag"):
        play_bag(tmp_path / "missing", wait_subscribers_s=0.0)
    with pytest.raises(BagError, match="no topic /nope"):
        play_bag(bag, topics=["/nope"], wait_subscribers_s=0.0)
    with pytest.raises(ValueError, match="rate"):
        play_bag(bag, rate=0.0)
    with pytest.raises(ValueError, match="FROM:=TO"):
        parse_remaps(["/a=/b"])


def test_play_stops_when_asked(bag: Path) -> None:
    stop = threading.Event()
    stop.set()
    result = play_bag(bag, rate=1.0, wait_subscribers_s=0.0, stop=stop)
    assert result.interrupted
    assert sum(result.published.values()) == 0


def test_run_play_exit_codes(tmp_path: Path, bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_play_arguments(parser)
    missing = tmp_path / "missing"
    # a missing bag is a bad input: exit 2 and one line, as convert and replay answer
    assert run_play(parser.parse_args([str(missing)])) == EXIT_BAD_INPUT == 2
    assert capsys.readouterr().err == f"gp-mapper play: error: {missing}: no such bag\n"
    assert run_play(parser.parse_args([str(bag), "--rate", "-1"])) == 2
    assert run_play(parser.parse_args([str(bag), "--topics", "/nope"])) == 2
    assert "no topic /nope" in capsys.readouterr().err
    args = parser.parse_args(
        [str(bag), "--rate", "50", "--wait-subscribers", "0", "--remap", "/imu/mag:=/m2"]
    )
    assert args.remap == ["/imu/mag:=/m2"] and args.rate == 50.0
    assert run_play(args) == 0
    assert EXIT_INTERRUPTED == 130


def test_played_bag_builds_a_map_that_the_recorder_captures(
    tmp_path: Path, ros_context: Context, spinner: Spinner
) -> None:
    """Bag -> player (with /clock) -> node under use_sim_time -> recorder -> bag."""
    n = 300
    ts = get_typestore(Stores.ROS2_JAZZY)
    in_bag = tmp_path / "walk"
    with Writer(in_bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        c_mag = writer.add_connection("/imu/mag", "sensor_msgs/msg/MagneticField", typestore=ts)
        c_pose = writer.add_connection("/pose", "geometry_msgs/msg/PoseStamped", typestore=ts)
        for k in range(n + 2):
            x, y = path(k)
            writer.write(c_pose, stamp(k), serialize_message(pose_msg(stamp(k), x, y)))
            if k < n:
                x, y = path(k + 0.5)
                t = stamp(k) + READING_PERIOD_NS // 2
                writer.write(c_mag, t, serialize_message(mag_msg(t, true_field(x, y))))

    # a deep input queue absorbs the replay's bursts on a loaded machine (best effort)
    with harness(ros_context, spinner, {"use_sim_time": True, "qos_depth": 1000}) as mapper:
        ns = mapper.topics["mean"].rsplit("/", 2)[0]
        out_bag = tmp_path / "maps"
        stop = threading.Event()
        recorder = threading.Thread(
            target=record_bag,
            args=(out_bag,),
            kwargs={"node_name": f"{ns}/gp_mapper", "stop": stop, "use_sim_time": True},
            daemon=True,
        )
        recorder.start()
        result = play_bag(
            in_bag,
            rate=5.0,
            remaps={"/imu/mag": f"{ns}/mag", "/pose": f"{ns}/pose"},
            wait_subscribers_s=20.0,
        )
        assert result.published == {f"{ns}/mag": n, f"{ns}/pose": n + 2}
        mapper.wait_samples(n)
        assert mapper.rmse(mapper.cloud()) < 2.0
        clock_ns = mapper.node.get_clock().now().nanoseconds
        assert stamp(0) <= clock_ns <= stamp(n + 1)  # the node runs on the bag's time
        wait_for(lambda: out_bag.joinpath("metadata.yaml").exists() or recorder.is_alive())
        stop.set()
        recorder.join(timeout=30.0)

    with Reader(out_bag) as reader:
        grids = [
            deserialize_message(raw, OccupancyGrid)
            for conn, _t, raw in reader.messages()
            if conn.topic == f"{ns}/gp_mapper/mean"
        ]
    assert grids and grids[-1].header.frame_id == "map"
    assert grids[-1].info.width * grids[-1].info.height > 0
