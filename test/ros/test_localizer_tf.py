"""map -> odom on /tf as AMCL broadcasts it, read back by a separate node; odometry and the
magnetometer's mounting read from /tf and /tf_static."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs is not importable (make venv builds it)")

from rclpy.context import Context
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

from gp_mapper.ros.qos import TF_STATIC_QOS
from gp_mapper.ros.stamps import stamp_to_ns
from gp_mapper.ros.tf_messages import planar_transform

from .helpers import Spinner, wait_for
from .localizer_harness import (
    MOUNTING,
    SENSOR_FRAME,
    LocalizerHarness,
    Mounting,
    start_parameters,
)

pytestmark = pytest.mark.ros

TOLERANCE_S = 0.5
PERIOD_S = 0.1
NS = 1_000_000_000
TOLERANCE_NS = NS // 2
# How late a loaded machine may deliver a transform already sent [ns].
DELIVERY_NS = NS // 2
# The walk's part fed here: 10 s, some 20 updates.
READINGS = 200


@pytest.fixture
def harness(ros_context: Context, spinner: Spinner, localizer_map: Path,
            localizer_walk: tuple[Any, np.ndarray]) -> Iterator[LocalizerHarness]:  # fmt: skip
    w, _ = localizer_walk
    h = LocalizerHarness(ros_context, spinner, start_parameters(
        w, MOUNTING, map_path=str(localizer_map), transform_tolerance=TOLERANCE_S,
        transform_publish_period=PERIOD_S))  # fmt: skip
    try:
        wait_for(lambda: h.node.localizer is not None, what="the map")
        yield h
    finally:
        h.close()


def planar(t: Any) -> tuple[float, float, float]:
    r = t.transform.rotation
    return t.transform.translation.x, t.transform.translation.y, 2 * math.atan2(r.z, r.w)


def test_map_to_odom_is_post_dated_by_the_tolerance_and_re_sent_while_no_reading_comes(
    harness: LocalizerHarness,
    localizer_walk,
) -> None:
    w, odom = localizer_walk
    harness.feed(w, odom, stop=READINGS, mounting=MOUNTING)
    wait_for(lambda: harness.node.tf_odometry.pending == 0
             and harness.reached(w, READINGS - 20), what="the fed readings' updates")  # fmt: skip
    time.sleep(0.3)  # the last update's transform on its way
    last_reading_ns = harness.reading_stamps[-1]
    sent = harness.map_to_odom_on_tf()
    from_readings = [t for t in sent if stamp_to_ns(t.header.stamp) <= last_reading_ns + NS]
    updates = harness.node.localizer.updates
    assert updates >= 10
    # One at the start (before any update) and one per update, each stamped a reading's
    # stamp + tolerance: the update's last reading.
    assert len(from_readings) == updates + 1
    readings = set(harness.reading_stamps)
    for t in from_readings:
        assert stamp_to_ns(t.header.stamp) - TOLERANCE_NS in readings
    step = harness.node.localizer.steps[-1]
    assert stamp_to_ns(from_readings[-1].header.stamp) == step.last_stamp_ns + TOLERANCE_NS
    pose = harness.collector.latest("/amcl_pose")
    assert stamp_to_ns(from_readings[-1].header.stamp) >= (
        stamp_to_ns(pose.header.stamp) + TOLERANCE_NS
    )

    # No reading now (a standing robot): the last correction is re-sent, stamped now + tolerance.
    # At least five re-sends, waited for (a loaded machine stretches the timer's period), and
    # no more than the period allows over the time they took.
    before = len(harness.map_to_odom_on_tf())
    start_ns = time.time_ns()
    wait_for(lambda: len(harness.map_to_odom_on_tf()) - before >= 5, what="re-sends")
    end_ns = time.time_ns()
    resent = harness.map_to_odom_on_tf()[before:]
    assert 5 <= len(resent) <= 1.5 * max((end_ns - start_ns) / NS, 1.0) / PERIOD_S
    stamps = [stamp_to_ns(t.header.stamp) for t in resent]
    assert stamps == sorted(set(stamps))
    # Each re-send is stamped when it is sent: later than the last update's correction, and no
    # earlier than a period before the wait began, less what a loaded machine takes to deliver
    # one already on its way then.
    assert stamps[0] > stamp_to_ns(from_readings[-1].header.stamp)
    assert start_ns + TOLERANCE_NS - PERIOD_S * NS - DELIVERY_NS <= stamps[0]
    assert stamps[-1] <= end_ns + TOLERANCE_NS
    for t in resent:
        assert planar(t) == pytest.approx(planar(from_readings[-1]))


def test_the_broadcast_has_tf2_ros_qos_and_stops_with_tf_broadcast_false(
    harness: LocalizerHarness,
    localizer_walk,
) -> None:
    w, odom = localizer_walk
    harness.feed(w, odom, stop=20, mounting=MOUNTING)
    wait_for(harness.map_to_odom_on_tf, what="map -> odom on /tf")
    (info,) = [i for i in harness.probe.get_publishers_info_by_topic("/tf")
               if i.node_name == "gp_localizer"]  # fmt: skip
    assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE
    assert info.qos_profile.durability == DurabilityPolicy.VOLATILE
    assert harness.node.set_parameters([Parameter("tf_broadcast", value=False)])[0].successful
    time.sleep(0.3)
    count = len(harness.map_to_odom_on_tf())
    time.sleep(0.5)
    assert len(harness.map_to_odom_on_tf()) == count


def test_a_standing_robot_with_a_known_start_gets_map_to_odom_before_any_update(
    harness: LocalizerHarness,
    localizer_walk,
) -> None:
    w, odom = localizer_walk
    standing = np.repeat(odom[:1], 5, axis=0)  # five readings, no travel: no update
    harness.feed(w, standing, stop=5, mounting=MOUNTING)
    first = wait_for(harness.map_to_odom_on_tf, what="map -> odom on /tf")[0]
    assert harness.node.localizer.updates == 0
    assert stamp_to_ns(first.header.stamp) == harness.reading_stamps[0] + TOLERANCE_NS
    # map -> odom composed with the base's odometry there is the initial pose.
    x, y, yaw = planar(first)
    base = MOUNTING.base_of(odom[0])
    c, s = math.cos(yaw), math.sin(yaw)
    start = harness.node.get_parameter
    assert x + c * base[0] - s * base[1] == pytest.approx(start("initial_pose.x").value)
    assert y + s * base[0] + c * base[1] == pytest.approx(start("initial_pose.y").value)
    assert math.remainder(yaw + base[2] - start("initial_pose.yaw").value, 2 * math.pi) == (
        pytest.approx(0.0, abs=1e-9)
    )
    wait_for(lambda: len(harness.map_to_odom_on_tf()) >= 3, what="re-sends of the start")


def test_a_mounting_sent_before_the_node_started_still_arrives(
    ros_context: Context,
    spinner: Spinner,
    localizer_map: Path,
    localizer_walk,
) -> None:
    w, odom = localizer_walk
    static = spinner.node("static_broadcaster")
    publisher = static.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
    mounting = Mounting(0.3, 0.0, math.pi)
    publisher.publish(TFMessage(transforms=[
        planar_transform("base_link", SENSOR_FRAME, 0, *mounting.lever, mounting.yaw)
    ]))  # fmt: skip
    h = LocalizerHarness(ros_context, spinner, start_parameters(
        w, mounting, map_path=str(localizer_map)))  # fmt: skip
    try:
        wait_for(lambda: h.node.localizer is not None, what="the map")
        h._mounted = True  # the probe sends no mounting of its own
        h.feed(w, odom, stop=100, mounting=mounting)
        wait_for(lambda: h.node.localizer.updates >= 5, what="updates")
        assert h.node.tf_odometry.buffer.parent_of(SENSOR_FRAME) == "base_link"
        assert not any(k.startswith("mounting") for k in h.node.tf_odometry.drops)
    finally:
        h.close()
