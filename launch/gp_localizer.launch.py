"""Launch the gp_localizer node with its parameter file, a map and input remappings.

    ros2 launch gp_mapper gp_localizer.launch.py map_path:=/path/to/map_state.npz \
        mag_topic:=/imu/mag odom_topic:=/odom
    ros2 launch gp_mapper gp_localizer.launch.py params_file:=/path/to/mine.yaml use_sim_time:=True

Arguments:
    params_file: parameter YAML (default: config/gp_localizer.yaml of this package).
    map_path: the map file (map_state.npz written by gp_mapper); overrides the YAML's.
    mag_topic: sensor_msgs/MagneticField topic remapped onto the node's ``mag`` input.
    odom_topic: nav_msgs/Odometry topic remapped onto the node's ``odom`` input.
    use_sim_time: take the node clock from /clock (bag replay).
"""

from pathlib import Path

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gp_mapper.ros.launch_args import parse_bool

DEFAULT_PARAMS_FILE = Path(__file__).resolve().parents[1] / "config" / "gp_localizer.yaml"


def _localizer_node(context: LaunchContext) -> list[Node]:
    use_sim_time = parse_bool("use_sim_time", LaunchConfiguration("use_sim_time").perform(context))
    overrides: dict[str, object] = {"use_sim_time": use_sim_time}
    map_path = LaunchConfiguration("map_path").perform(context)
    if map_path:
        overrides["map_path"] = map_path
    return [
        Node(
            package="gp_mapper",
            executable="gp_localizer_node",
            name="gp_localizer",
            output="screen",
            emulate_tty=True,
            parameters=[LaunchConfiguration("params_file"), overrides],
            remappings=[
                ("mag", LaunchConfiguration("mag_topic")),
                ("odom", LaunchConfiguration("odom_topic")),
            ],
        )
    ]


def generate_launch_description() -> LaunchDescription:
    """The gp_localizer node, its parameter file, the map and the input remappings."""
    arguments = [
        DeclareLaunchArgument("params_file", default_value=str(DEFAULT_PARAMS_FILE),
                              description="Parameter YAML for the gp_localizer node."),
        DeclareLaunchArgument("map_path", default_value="",
                              description="Map file (map_state.npz); empty: the YAML's."),
        DeclareLaunchArgument("mag_topic", default_value="mag",
                              description="sensor_msgs/MagneticField input topic (tesla)."),
        DeclareLaunchArgument("odom_topic", default_value="odom",
                              description="nav_msgs/Odometry input topic."),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (bag replay) instead of the system clock."),
    ]  # fmt: skip
    return LaunchDescription([*arguments, OpaqueFunction(function=_localizer_node)])
