"""launch/gp_mapper.launch.py brings up a working mapper (launch_testing).

launch, launch_ros and launch_testing come with a ROS 2 Jazzy install (apt or a colcon
workspace); they are not on PyPI, so this test skips where they are missing, and where
gp_mapper itself is not installed in an ament prefix (``colcon build``), because
launch_ros finds ``gp_mapper_node`` through the ament index. Run it from a sourced
workspace: ``colcon test --packages-select gp_mapper`` or ``pytest test/ros/test_launch.py``.
"""

from __future__ import annotations

import tempfile
import time
import unittest
from pathlib import Path

import pytest

pytest.importorskip(
    "launch_testing",
    reason="launch_testing is not installable from PyPI; it needs a ROS 2 Jazzy install",
)
pytest.importorskip("launch_ros", reason="launch_ros is not installable from PyPI")

import launch
import launch_testing
import launch_testing.actions
import launch_testing.asserts
import launch_testing.markers
import rclpy
import yaml
from ament_index_python.packages import (
    PackageNotFoundError,
    get_package_share_directory,
)
from geometry_msgs.msg import PoseStamped
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from nav_msgs.msg import OccupancyGrid
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import MagneticField

from gp_mapper.ros.qos import MAP_QOS
from gp_mapper.ros.stamps import ns_to_stamp

try:
    get_package_share_directory("gp_mapper")
except PackageNotFoundError:
    pytest.skip(
        "gp_mapper is not installed in an ament prefix (colcon build); launch_ros cannot "
        "find gp_mapper_node",
        allow_module_level=True,
    )

pytestmark = pytest.mark.ros

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "gp_mapper.launch.py"
MAG_TOPIC = "/launch_test/imu/mag"
POSE_TOPIC = "/launch_test/pose"
BATCH = 100
# Discovery, torch import and one engine update on a slow machine.
TIMEOUT_S = 90.0


def _params_file() -> str:
    """The shipped YAML with a small batch, so one window arrives quickly."""
    shipped = yaml.safe_load(
        Path(get_package_share_directory("gp_mapper"), "config", "gp_mapper.yaml").read_text()
    )
    shipped["/**"]["ros__parameters"].update(batch_size=BATCH, fit_iterations=0)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(shipped, handle)
    return handle.name


@pytest.mark.launch_test
@launch_testing.markers.keep_alive
def generate_test_description() -> launch.LaunchDescription:
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={
            "params_file": _params_file(),
            "mag_topic": MAG_TOPIC,
            "pose_topic": POSE_TOPIC,
            "use_sim_time": "False",  # as users type it: ROS accepts any case
        }.items(),
    )
    return launch.LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestMapperPublishesTheMean(unittest.TestCase):
    """Probe: feed one window on the remapped inputs and wait for ~/mean."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.context = Context()
        rclpy.init(context=cls.context)
        cls.node = rclpy.create_node("launch_probe", context=cls.context)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.destroy_node()
        rclpy.try_shutdown(context=cls.context)

    def test_mean_arrives_in_the_map_frame(self) -> None:
        grids: list[OccupancyGrid] = []
        self.node.create_subscription(OccupancyGrid, "/gp_mapper/mean", grids.append, MAP_QOS)
        mag = self.node.create_publisher(MagneticField, MAG_TOPIC, 100)
        pose = self.node.create_publisher(PoseStamped, POSE_TOPIC, 100)
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)

        deadline = time.monotonic() + TIMEOUT_S
        while mag.get_subscription_count() < 1 or pose.get_subscription_count() < 1:
            self.assertLess(time.monotonic(), deadline, "the node never subscribed")
            executor.spin_once(timeout_sec=0.1)

        for k in range(BATCH + 3):
            stamp = 10**9 + k * 20_000_000
            p = PoseStamped()
            p.header.stamp = ns_to_stamp(stamp)
            p.header.frame_id = "map"
            p.pose.position.x, p.pose.position.y = 0.02 * k, 0.01 * k
            p.pose.orientation.w = 1.0
            pose.publish(p)
            m = MagneticField()
            m.header.stamp = ns_to_stamp(stamp + 10_000_000)
            m.header.frame_id = "imu_link"
            m.magnetic_field.z = (48.0 + 0.1 * k) * 1e-6
            mag.publish(m)
            executor.spin_once(timeout_sec=0.005)

        while not grids:
            self.assertLess(time.monotonic(), deadline, "no ~/mean from the launched node")
            executor.spin_once(timeout_sec=0.1)
        grid = grids[-1]
        self.assertEqual(grid.header.frame_id, "map")
        self.assertGreater(grid.info.width * grid.info.height, 0)
        self.assertEqual(len(grid.data), grid.info.width * grid.info.height)
        executor.shutdown()


@launch_testing.post_shutdown_test()
class TestMapperShutsDownCleanly(unittest.TestCase):
    def test_exit_codes(self, proc_info: launch_testing.ProcInfoHandler) -> None:
        # SIGINT from launch: main() returns normally, so the exit code is 0
        launch_testing.asserts.assertExitCodes(proc_info)
