"""The localizer's messages, built in memory: the pose and its covariance, the particle cloud,
a planar transform and TF messages read back as records."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from gp_mapper.ros.input_messages import transforms_from_msg
from gp_mapper.ros.localizer_messages import (
    particle_cloud,
    planar_covariance,
    pose_with_covariance,
    yaw_of,
)
from gp_mapper.ros.stamps import stamp_to_ns
from gp_mapper.ros.tf_messages import planar_transform


def test_the_pose_carries_x_y_yaw_and_their_covariance_in_amcls_layout() -> None:
    covariance = np.array([[0.04, 0.01, 0.002], [0.01, 0.09, 0.003], [0.002, 0.003, 0.05]])
    msg = pose_with_covariance("map", 1_234_567_890_123, np.array([1.5, -2.0, 2.5]), covariance)
    assert msg.header.frame_id == "map" and stamp_to_ns(msg.header.stamp) == 1_234_567_890_123
    assert (msg.pose.pose.position.x, msg.pose.pose.position.y) == (1.5, -2.0)
    assert yaw_of(msg.pose.pose.orientation) == pytest.approx(2.5)
    full = np.array(msg.pose.covariance).reshape(6, 6)
    assert full[0, 0] == 0.04 and full[5, 5] == 0.05 and full[1, 5] == 0.003
    assert full[2, 2] == full[3, 3] == full[4, 4] == 0.0  # z, roll, pitch: not estimated
    np.testing.assert_array_equal(planar_covariance(msg), covariance)


def test_the_cloud_is_an_even_subsample_of_at_most_shown() -> None:
    poses = np.column_stack([np.arange(10.0), np.zeros(10), np.linspace(-3.0, 3.0, 10)])
    cloud = particle_cloud("map", 5, poses, shown=4)
    assert [p.position.x for p in cloud.poses] == [0.0, 3.0, 6.0, 9.0]
    assert yaw_of(cloud.poses[-1].orientation) == pytest.approx(3.0)
    assert len(particle_cloud("map", 5, poses, shown=100).poses) == 10


def test_a_planar_transform_reads_back_as_the_same_record() -> None:
    msg = planar_transform("/map", "odom", 42, 1.0, -2.0, math.pi / 3)
    (record,) = transforms_from_msg(SimpleNamespace(transforms=[msg]))  # a TFMessage's field
    assert (record.parent, record.child, record.stamp_ns) == ("/map", "odom", 42)
    np.testing.assert_allclose(record.translation_m, [1.0, -2.0, 0.0])
    np.testing.assert_allclose(
        record.rotation_xyzw, [0.0, 0.0, math.sin(math.pi / 6), math.cos(math.pi / 6)]
    )
