"""InputWatch: silent inputs are reported once per period, naming the resolved topic."""

from __future__ import annotations

import math

from gp_mapper.ros.input_watch import InputWatch, Silence

TOPICS = {"magnetometer": "/robot/imu/mag", "pose": "/robot/pose"}


def _watch() -> InputWatch:
    return InputWatch(TOPICS, silence_s=5.0, repeat_s=5.0, start_s=100.0)


def test_nothing_is_reported_before_the_silence_period() -> None:
    watch = _watch()
    assert watch.silent(104.9) == []
    assert watch.warning(104.9, lambda _topic: 0) is None


def test_inputs_never_heard_are_named_with_their_topics_and_publishers() -> None:
    watch = _watch()
    watch.heard("pose", 101.0)
    assert watch.silent(105.5) == [Silence("magnetometer", "/robot/imu/mag", 5.5, False)]
    text = watch.warning(105.5, {"/robot/imu/mag": 0, "/robot/pose": 1}.__getitem__)
    assert text is not None
    assert "no magnetometer message on /robot/imu/mag since start (no publisher)" in text
    assert "remapping" in text and "/robot/pose" not in text


def test_an_input_that_stops_is_reported_with_its_silence() -> None:
    watch = _watch()
    watch.heard("magnetometer", 101.0)
    watch.heard("pose", 110.0)
    text = watch.warning(112.0, lambda _topic: 2)
    assert text is not None
    assert "no magnetometer message on /robot/imu/mag for 11 s (2 publishers)" in text
    assert "QoS" in text  # publishers exist: the remapping is not the suspect


def test_warnings_are_rate_limited() -> None:
    watch = _watch()
    assert watch.warning(106.0, lambda _topic: 0) is not None
    assert watch.warning(107.0, lambda _topic: 0) is None
    assert watch.warning(110.9, lambda _topic: 0) is None
    assert watch.warning(111.0, lambda _topic: 0) is not None


def test_ages() -> None:
    watch = _watch()
    assert math.isnan(watch.age_s("pose", 103.0))
    watch.heard("pose", 103.0)
    assert watch.age_s("pose", 104.5) == 1.5


def test_messages_heard_are_counted_per_input() -> None:
    watch = _watch()
    for t in (101.0, 102.0, 103.0):
        watch.heard("magnetometer", t)
    watch.heard("pose", 101.5)
    assert watch.received("magnetometer") == 3
    assert watch.received("pose") == 1
