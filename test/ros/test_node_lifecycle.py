"""The mapper as a lifecycle node: driven by ``change_state`` as a lifecycle manager drives it.

Inactive it maps nothing and publishes nothing; activated again it goes on with the map it
had; cleanup drops the map; ``autostart: false`` waits unconfigured for a manager.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.context import Context
from rclpy.lifecycle import TransitionCallbackReturn

from gp_mapper.ros.node import NODE_NAME, GpMapperNode

from .helpers import Spinner, wait_for
from .mapper_harness import BASE_PARAMETERS, MapperHarness, harness, overrides

pytestmark = pytest.mark.ros

WINDOW = 100  # = batch_size of the harness
QUIET_S = 1.0  # longer than several diagnostics periods (0.2 s) and map checks


@pytest.fixture
def mapper(ros_context: Context, spinner: Spinner, tmp_path: Path) -> Iterator[MapperHarness]:
    with harness(ros_context, spinner, {"map_path": str(tmp_path / "map.npz")}) as h:
        yield h


def change_state(mapper: MapperHarness, transition: int) -> bool:
    base = f"{mapper.node.get_namespace()}/{NODE_NAME}"
    client = mapper.probe.create_client(ChangeState, f"{base}/change_state")
    try:
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(ChangeState.Request(transition=Transition(id=transition)))
        wait_for(future.done, what=f"transition {transition}")
        return bool(future.result().success)
    finally:
        mapper.probe.destroy_client(client)


def state_of(mapper: MapperHarness) -> int:
    base = f"{mapper.node.get_namespace()}/{NODE_NAME}"
    client = mapper.probe.create_client(GetState, f"{base}/get_state")
    try:
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(GetState.Request())
        wait_for(future.done, what="get_state")
        return int(future.result().current_state.id)
    finally:
        mapper.probe.destroy_client(client)


def test_an_inactive_node_publishes_nothing_and_reactivation_keeps_the_map(
    mapper: MapperHarness,
) -> None:
    assert state_of(mapper) == State.PRIMARY_STATE_ACTIVE  # autostart, the default
    mapper.feed(WINDOW)
    samples = int(mapper.wait_samples(WINDOW)["samples"])
    assert change_state(mapper, Transition.TRANSITION_DEACTIVATE)
    assert state_of(mapper) == State.PRIMARY_STATE_INACTIVE
    time.sleep(QUIET_S)  # what was in flight has arrived
    counts = {topic: mapper.sink.count(topic) for topic in mapper.topics.values()}
    diagnostics = len(mapper.our_statuses())
    mapper.feed(WINDOW)  # ignored while inactive
    time.sleep(QUIET_S)
    assert {topic: mapper.sink.count(topic) for topic in mapper.topics.values()} == counts
    assert len(mapper.our_statuses()) == diagnostics
    assert mapper.node.pipeline.diagnostics()["samples"] == samples
    assert change_state(mapper, Transition.TRANSITION_ACTIVATE)
    fresh = mapper.fresh_diagnostics()
    assert int(fresh["samples"]) == samples  # the same map, published again
    wait_for(
        lambda: mapper.sink.count(mapper.topics["mean"]) > counts[mapper.topics["mean"]],
        what="the map republished on activation",
    )
    mapper.feed(WINDOW)
    assert int(mapper.wait_samples(samples + WINDOW)["samples"]) >= samples + WINDOW


def test_cleanup_drops_the_map_and_configure_makes_a_new_one(mapper: MapperHarness) -> None:
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    assert change_state(mapper, Transition.TRANSITION_DEACTIVATE)
    assert change_state(mapper, Transition.TRANSITION_CLEANUP)
    assert state_of(mapper) == State.PRIMARY_STATE_UNCONFIGURED
    with pytest.raises(RuntimeError, match="not configured"):
        _ = mapper.node.pipeline
    assert mapper.mag_pub.get_subscription_count() == 0
    assert change_state(mapper, Transition.TRANSITION_CONFIGURE)
    assert change_state(mapper, Transition.TRANSITION_ACTIVATE)
    assert mapper.node.pipeline.diagnostics()["samples"] == 0
    wait_for(lambda: mapper.mag_pub.get_subscription_count() == 1, what="the inputs again")


def test_without_autostart_the_node_waits_unconfigured(ros_context: Context) -> None:
    node = GpMapperNode(
        context=ros_context,
        namespace="/lifecycle_autostart",
        parameter_overrides=overrides({**BASE_PARAMETERS, "autostart": False}),
    )
    try:
        assert not node.active
        assert not node.get_subscriptions_info_by_topic("/lifecycle_autostart/mag")
        with pytest.raises(RuntimeError, match="not configured"):
            _ = node.pipeline
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.pipeline.diagnostics()["samples"] == 0 and not node.active
        assert node.get_subscriptions_info_by_topic("/lifecycle_autostart/mag")
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert node.active
    finally:
        node.destroy_node()
