"""The recorder writes the mapper's topics into a bag that rosbags reads back."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import OccupancyGrid
from rclpy.duration import Duration
from rclpy.serialization import deserialize_message
from rosbags.interfaces import QosDurability
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import MagneticField

from gp_mapper.commands.record import add_record_arguments, run_record
from gp_mapper.ros import diagnostic_messages, grid_messages, stamps
from gp_mapper.ros.errors import BagError
from gp_mapper.ros.qos import DIAGNOSTICS_QOS, MAP_QOS, SENSOR_QOS
from gp_mapper.ros.recorder import NODE_NAME, RecordResult, record_bag

from .helpers import Spinner, wait_for

pytestmark = pytest.mark.ros

N_MAG = 30


def _record_in_thread(out: Path, stop: threading.Event, **kwargs: object) -> dict:
    box: dict = {}

    def run() -> None:
        box["result"] = record_bag(out, stop=stop, **kwargs)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    box["thread"] = thread
    return box


def _recorder_subscribed(publisher: object) -> bool:
    return publisher.get_subscription_count() >= 1  # type: ignore[attr-defined]


def _recorder_on(node: object, topic: str) -> bool:
    """The recorder's own node subscribes to ``topic`` (other tests' probes may too)."""
    infos = node.get_subscriptions_info_by_topic(topic)  # type: ignore[attr-defined]
    return any(info.node_name == NODE_NAME for info in infos)


def _record_mag_and_diagnostics(node: object, mag_pub: object, diag_pub: object) -> None:
    wait_for(lambda: _recorder_subscribed(mag_pub), what="recorder on /rec_test/imu/mag")
    wait_for(lambda: _recorder_on(node, "/diagnostics"), what="recorder on /diagnostics")
    for k in range(N_MAG):
        msg = MagneticField()
        msg.header.stamp = stamps.ns_to_stamp(k)
        msg.magnetic_field.x = float(k)
        mag_pub.publish(msg)  # type: ignore[attr-defined]
    diag_pub.publish(  # type: ignore[attr-defined]
        diagnostic_messages.diagnostic_array(5, "gp_mapper: engine", "cpu", b"\x00", "ok", {})
    )
    # reliable: acknowledged means it reached the recorder, which writes it even when
    # stopped right after; the best-effort magnetometer is only required mostly
    assert diag_pub.wait_for_all_acked(Duration(seconds=10))  # type: ignore[attr-defined]


def test_recorder_writes_latched_maps_diagnostics_and_extra_topics(
    tmp_path: Path, spinner: Spinner
) -> None:
    node = spinner.node("fake_mapper", namespace="/rec_test")
    mean_pub = node.create_publisher(OccupancyGrid, "~/mean", MAP_QOS)
    diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)
    mag_pub = node.create_publisher(MagneticField, "/rec_test/imu/mag", SENSOR_QOS)
    grid = np.array([[1, 50, 98], [-1, 2, 3]], dtype=np.int8)
    # published before the recorder exists: only transient local brings it in
    mean_pub.publish(grid_messages.occupancy_grid(grid, (1.0, 2.0), 0.5, "map", 77))

    out = tmp_path / "out_bag"
    stop = threading.Event()
    box = _record_in_thread(
        out, stop, node_name="/rec_test/fake_mapper", topics=["/rec_test/imu/mag"]
    )
    try:
        _record_mag_and_diagnostics(node, mag_pub, diag_pub)
    finally:  # a failed wait must not leave the recorder's executor running at exit
        stop.set()
        box["thread"].join(timeout=30.0)
    result: RecordResult = box["result"]

    assert result.missing == []
    assert result.counts["/rec_test/fake_mapper/mean"] == 1
    assert result.counts["/diagnostics"] >= 1
    with Reader(out) as reader:
        assert out.joinpath("metadata.yaml").is_file()
        assert any(p.suffix == ".mcap" for p in out.iterdir())
        conns = {c.topic: c for c in reader.connections}
        assert conns["/rec_test/fake_mapper/mean"].msgtype == "nav_msgs/msg/OccupancyGrid"
        qos = conns["/rec_test/fake_mapper/mean"].ext.offered_qos_profiles[0]
        assert qos.durability == QosDurability.TRANSIENT_LOCAL
        assert conns["/rec_test/imu/mag"].msgtype == "sensor_msgs/msg/MagneticField"
        by_topic: dict[str, list] = {}
        for conn, _t, raw in reader.messages():
            by_topic.setdefault(conn.topic, []).append(raw)
    ts = get_typestore(Stores.ROS2_JAZZY)
    (raw_grid,) = by_topic["/rec_test/fake_mapper/mean"]
    grid_msg = ts.deserialize_cdr(raw_grid, "nav_msgs/msg/OccupancyGrid")
    assert grid_msg.header.frame_id == "map"
    np.testing.assert_array_equal(grid_msg.data.reshape(2, 3), grid)
    mags = [deserialize_message(raw, MagneticField) for raw in by_topic["/rec_test/imu/mag"]]
    assert len(mags) == result.counts["/rec_test/imu/mag"] >= N_MAG // 2
    xs = [m.magnetic_field.x for m in mags]
    assert xs == sorted(xs)


def test_recorder_finds_the_node_inputs(tmp_path: Path, spinner: Spinner) -> None:
    node = spinner.node("fake_mapper_in", namespace="/rec_in")
    node.create_subscription(MagneticField, "/rec_in/mag", lambda _m: None, SENSOR_QOS)
    out = tmp_path / "inputs_bag"
    result = record_bag(out, node_name="/rec_in/fake_mapper_in", inputs=True, duration_s=2.0)
    # the node subscribes but nobody publishes: the topic is found from the node's graph
    # entry, yet has no publisher to take a type and QoS from, so it stays pending
    assert "/rec_in/fake_mapper_in/mean" in result.counts
    assert result.missing == ["/rec_in/mag"]


def test_recorder_picks_up_an_input_that_appears_late(tmp_path: Path, spinner: Spinner) -> None:
    node = spinner.node("fake_mapper_late", namespace="/rec_late")
    node.create_subscription(MagneticField, "/rec_late/mag", lambda _m: None, SENSOR_QOS)
    out = tmp_path / "late_bag"
    stop = threading.Event()
    box = _record_in_thread(out, stop, node_name="/rec_late/fake_mapper_late", inputs=True)
    # wait until the recorder is up (its subscription to the node's outputs), then start
    # the input's publisher: the recorder must find it while already recording
    probe = node.create_publisher(OccupancyGrid, "/rec_late/fake_mapper_late/mean", MAP_QOS)
    wait_for(lambda: _recorder_subscribed(probe), what="the recorder")
    publisher = node.create_publisher(MagneticField, "/rec_late/mag", 10)
    # two subscribers: the fake mapper itself and the recorder
    wait_for(lambda: publisher.get_subscription_count() >= 2, what="the recorder on the late input")
    for k in range(5):
        msg = MagneticField()
        msg.header.stamp = stamps.ns_to_stamp(k + 1)
        publisher.publish(msg)
    assert publisher.wait_for_all_acked(Duration(seconds=10))
    stop.set()
    box["thread"].join(timeout=30.0)
    result: RecordResult = box["result"]
    assert result.missing == []
    assert result.counts["/rec_late/mag"] == 5


def test_recorder_refuses_an_existing_output(tmp_path: Path) -> None:
    out = tmp_path / "exists"
    out.mkdir()
    with pytest.raises(BagError, match="already exists"):
        record_bag(out, duration_s=0.1)
    with pytest.raises(BagError, match="unknown storage"):
        record_bag(tmp_path / "new", storage="zip", duration_s=0.1)


def test_run_record_with_duration(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_record_arguments(parser)
    out = tmp_path / "timed"
    assert run_record(parser.parse_args([str(out), "--duration", "0.5"])) == 0
    with Reader(out) as reader:
        topics = {c.topic for c in reader.connections}
    assert {"/gp_mapper/mean", "/gp_mapper/variance", "/gp_mapper/field"} <= topics
    assert {"/gp_mapper/inducing_points", "/diagnostics"} <= topics
    assert run_record(parser.parse_args([str(out), "--duration", "0.5"])) == 1
    assert run_record(parser.parse_args([str(tmp_path / "x"), "--duration", "0"])) == 2


def test_recorder_process_closes_the_bag_on_sigint(tmp_path: Path) -> None:
    out = tmp_path / "sigint_bag"
    code = "import sys; from gp_mapper.commands.record import main; sys.exit(main())"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the stop handler is installed before the writer creates the bag directory
        wait_for(out.exists, what="the bag directory")
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30.0)
    assert proc.returncode == 0, err
    with Reader(out) as reader:  # a complete bag: metadata written, MCAP closed
        assert "/gp_mapper/mean" in {c.topic for c in reader.connections}


def test_run_record_writes_the_file_it_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_record_arguments(parser)
    out = tmp_path / "maps.mcap"
    assert run_record(parser.parse_args([str(out), "--duration", "0.5"])) == 0
    # one MCAP file named as asked, not a folder maps.mcap/ holding maps.mcap.mcap
    assert out.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps.mcap"]
    with Reader(out) as reader:
        assert "/gp_mapper/mean" in {c.topic for c in reader.connections}
    assert run_record(parser.parse_args([str(out), "--duration", "0.5"])) == 1
    assert "already exists" in capsys.readouterr().err
    bad = [str(tmp_path / "maps.db3"), "--duration", "0.5", "--storage", "mcap"]
    assert run_record(parser.parse_args(bad)) == 2
    assert "names a sqlite3 file" in capsys.readouterr().err
