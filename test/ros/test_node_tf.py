"""The node on a robot: a separate process publishes /tf, /tf_static (tf2_msgs/TFMessage) and
the magnetometer in its own frame, and the node maps, its readings posed through the chain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not installed")
pytest.importorskip("tf2_msgs", reason="tf2_msgs is not built (make venv builds it)")

from gp_mapper.commands.demo import map_live
from gp_mapper.io import make_synthetic_world
from gp_mapper.io.robot_bag import simulate_robot_run, write_robot_bag
from gp_mapper.mapping import MapperConfig, MappingPipeline

pytestmark = pytest.mark.ros

FAST = {"fit_iterations": 10, "batch_size": 200, "vips.delta": 0.095}


def test_the_node_maps_a_robot_bag_through_tf_with_the_sensor_mounting(tmp_path: Path) -> None:
    world = make_synthetic_world(3)
    run = simulate_robot_run(world, 30.0, rate_hz=50.0, seed=3, hard_iron_ut=(0.0, 0.0, 0.0))
    bag = tmp_path / "robot.mcap"
    write_robot_bag(bag, run)
    state = map_live(bag, tmp_path, rate=2.0, params=FAST)
    with MappingPipeline(MapperConfig(), background=False) as pipeline:
        pipeline.load(state)
        snapshot = pipeline.latest()
    assert snapshot is not None
    assert snapshot.num_samples > 0.95 * len(run.time_s)
    # The path the map holds is the sensor's (the base's plus the lever arm, turned with the
    # base), within the localizer's corrections: not the base's.
    path = snapshot.trajectory_m
    sensor = run.sensor_position_m[:, :2]
    base = run.base_xy_m
    to_sensor = np.min(np.linalg.norm(path[:, None, :] - sensor[None, ::5, :], axis=2), axis=1)
    assert np.median(to_sensor) < 0.05
    offsets = np.linalg.norm(sensor - base, axis=1)
    assert np.allclose(offsets, 0.3, atol=1e-9)  # the mounting's lever arm
    # The map is the world's field near the path.
    pts = snapshot.grid.cell_points()
    near = np.min(np.linalg.norm(pts[:, None, :] - sensor[None, ::25, :], axis=2), axis=1) < 0.3
    error = snapshot.mean.reshape(-1)[near] - world.norm_at(pts[near])
    assert float(np.sqrt(np.mean(error**2))) < 2.0
