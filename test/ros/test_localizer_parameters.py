"""The localizer's parameters and names: changes checked and applied while it runs, Nav2's
names, and the previous release's names read or served with a warning."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs is not importable (make venv builds it)")

from geometry_msgs.msg import PoseWithCovarianceStamped
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.context import Context
from rclpy.parameter import Parameter
from std_srvs.srv import Empty

from gp_mapper.ros.localizer_node import GpLocalizerNode

from .helpers import Spinner, wait_for
from .localizer_harness import (
    MOUNTING,
    OLD_POSE,
    POSE,
    PROBE_QOS,
    LocalizerHarness,
    start_parameters,
)

pytestmark = pytest.mark.ros


def refusal(node: GpLocalizerNode, **values: object) -> str:
    """The reason a change is refused ("" if it is accepted)."""
    result = node.set_parameters_atomically([Parameter(k, value=v) for k, v in values.items()])
    return "" if result.successful else result.reason


def test_changes_are_checked_and_refused_with_the_reason(
    ros_context: Context,
    localizer_map: Path,
) -> None:
    node = GpLocalizerNode(context=ros_context, parameter_overrides=[
        Parameter("map_path", value=str(localizer_map)), Parameter("odom_source", value="topic")
    ])  # fmt: skip
    try:
        wait_for(lambda: node.localizer is not None, what="the map")
        assert refusal(node, min_particles=50_000) == (
            "need min_particles <= max_particles; got 50000, 20000"
        )
        assert "min_particles <= max_particles" in refusal(node, max_particles=100)
        assert refusal(node, global_frame_id="world") == (
            "Trying to set a read-only parameter: global_frame_id."
        )
        assert refusal(node, initial_pose_x=1.0).startswith("Trying to set a read-only")
        assert "Max: 60" in refusal(node, diagnostics_period=100.0)  # rclpy's range check
        assert node.config.min_particles == 500  # nothing refused was applied
        # Accepted: the running filter takes it (one change, atomically, both bounds).
        assert refusal(node, alpha1=0.1, min_particles=100, max_particles=1000) == ""
        assert node.localizer.config.alpha1 == 0.1 and node.localizer.config.max_particles == 1000
    finally:
        node.destroy_node()


def test_a_change_by_the_parameter_service_is_checked_too(
    ros_context: Context, spinner: Spinner
) -> None:
    harness = LocalizerHarness(ros_context, spinner, {"odom_source": "topic"})
    try:
        client = harness.probe.create_client(SetParameters, "/gp_localizer/set_parameters")
        assert client.wait_for_service(timeout_sec=10.0)
        value = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=90_000)
        future = client.call_async(
            SetParameters.Request(parameters=[ParameterMsg(name="min_particles", value=value)])
        )
        response = wait_for(lambda: future.done() and future.result(), what="set_parameters")
        (result,) = response.results
        assert not result.successful and "min_particles <= max_particles" in result.reason
    finally:
        harness.close()


def test_diagnostics_period_and_transform_publish_period_remake_their_timers(
    ros_context: Context,
    spinner: Spinner,
    localizer_map: Path,
    localizer_walk,
) -> None:
    w, odom = localizer_walk
    harness = LocalizerHarness(ros_context, spinner, start_parameters(
        w, MOUNTING, map_path=str(localizer_map), diagnostics_period=30.0))  # fmt: skip
    try:
        wait_for(lambda: harness.node.localizer is not None, what="the map")
        harness.feed(w, odom, stop=20, mounting=MOUNTING)
        wait_for(harness.map_to_odom_on_tf, what="map -> odom on /tf")
        time.sleep(0.5)
        assert harness.collector.count("/diagnostics") == 0  # every 30 s
        assert refusal(harness.node, diagnostics_period=0.1) == ""
        wait_for(lambda: harness.collector.count("/diagnostics") >= 5, timeout=3.0,
                 what="/diagnostics at 10 Hz")  # fmt: skip
        assert refusal(harness.node, transform_publish_period=0.0) == ""  # re-sends off
        time.sleep(0.2)
        count = len(harness.map_to_odom_on_tf())
        time.sleep(0.6)
        assert len(harness.map_to_odom_on_tf()) == count
        assert refusal(harness.node, transform_publish_period=0.05) == ""
        wait_for(lambda: len(harness.map_to_odom_on_tf()) >= count + 5, timeout=3.0,
                 what="re-sends at 20 Hz")  # fmt: skip
    finally:
        harness.close()


def test_the_previous_names_of_the_initial_pose_are_read_with_a_warning(
    ros_context: Context,
    localizer_map: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    old = {"initial_pose_x": 2.0, "initial_pose_y": 3.0, "initial_pose_a": 0.5}
    node = GpLocalizerNode(context=ros_context, parameter_overrides=[
        Parameter("map_path", value=str(localizer_map)), Parameter("odom_source", value="topic"),
        Parameter("set_initial_pose", value=True),
        *(Parameter(k, value=v) for k, v in old.items()),
    ])  # fmt: skip
    try:
        # The map is read, then the start applied to it: wait for both.
        wait_for(lambda: node.localizer is not None and node.localizer.particles is not None,
                 what="the map and the start")  # fmt: skip
        mean = node.localizer.particles.poses.mean(axis=0)
        np.testing.assert_allclose(mean, [2.0, 3.0, 0.5], atol=0.05)  # started there
    finally:
        node.destroy_node()
    err = capfd.readouterr().err
    for name, new in (("initial_pose_x", "initial_pose.x"), ("initial_pose_a", "initial_pose.yaw")):
        assert err.count(f"parameter {name} is deprecated") == 1
        assert f"use {new}" in err


def test_a_previous_name_set_with_its_new_one_is_ignored_with_a_warning(
    ros_context: Context, capfd: pytest.CaptureFixture[str]
) -> None:
    node = GpLocalizerNode(context=ros_context, parameter_overrides=[
        Parameter("initial_pose_x", value=2.0), Parameter("initial_pose.x", value=1.0),
    ])  # fmt: skip
    try:
        assert node._values["initial_pose.x"] == 1.0
    finally:
        node.destroy_node()
    assert "initial_pose_x is deprecated and ignored: initial_pose.x is set" in (
        capfd.readouterr().err
    )


def test_nav2_names_serve_and_the_old_ones_still_do_with_one_warning(
    ros_context: Context, spinner: Spinner, localizer_map: Path, localizer_walk,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    w, odom = localizer_walk
    parameters = start_parameters(w, MOUNTING, map_path=str(localizer_map))
    harness = LocalizerHarness(ros_context, spinner, parameters)
    try:
        harness.collector.listen(PoseWithCovarianceStamped, OLD_POSE, PROBE_QOS)
        wait_for(lambda: harness.node.localizer is not None, what="the map")
        harness.feed(w, odom, stop=100, mounting=MOUNTING)
        wait_for(lambda: harness.reached(w, 80), what="poses on amcl_pose")
        wait_for(lambda: harness.collector.count(OLD_POSE) >= 2, what="poses on the old topic")
        new = {m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
               for m in harness.collector.messages(POSE)}  # fmt: skip
        old = harness.collector.messages(OLD_POSE)[-1]
        assert old.header.stamp.sec * 10**9 + old.header.stamp.nanosec in new
        for name in ("/reinitialize_global_localization", "/gp_localizer/global_localization",
                     "/gp_localizer/global_localization", "/request_nomotion_update",
                     "/gp_localizer/nomotion_update"):  # fmt: skip
            client = harness.probe.create_client(Empty, name)
            assert client.wait_for_service(timeout_sec=10.0), name
            future = client.call_async(Empty.Request())
            wait_for(future.done, what=name)
        assert harness.node.localizer.particles.poses[:, :2].std(axis=0).min() > 1.0
    finally:
        harness.close()
    err = capfd.readouterr().err
    assert err.count("topic /gp_localizer/pose is deprecated") == 1
    assert "subscribe to amcl_pose" in err
    assert err.count("service ~/global_localization is deprecated") == 1  # called twice
    assert err.count("service ~/nomotion_update is deprecated") == 1
    assert "reinitialize_global_localization is deprecated" not in err
    assert "topic /gp_localizer/particles" not in err  # nobody subscribed to it
