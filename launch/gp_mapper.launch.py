"""Launch the gp_mapper node with its parameter file and input remappings.

    ros2 launch gp_mapper gp_mapper.launch.py mag_topic:=/imu/mag pose_topic:=/pose
    ros2 launch gp_mapper gp_mapper.launch.py params_file:=/path/to/mine.yaml use_sim_time:=True

Arguments:
    params_file: parameter YAML (default: config/gp_mapper.yaml of this package).
    mag_topic: sensor_msgs/MagneticField topic remapped onto the node's ``mag`` input.
    pose_topic: pose topic remapped onto the node's ``pose`` input (its type is the
        ``pose_type`` parameter).
    use_sim_time: take the node clock from /clock (bag replay); true or false in any
        spelling ROS accepts (True, true, 1, 0, yes, no...).
"""

from pathlib import Path

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gp_mapper.ros.launch_args import parse_bool

# config/ sits beside launch/ both in the source tree and in share/gp_mapper once installed.
DEFAULT_PARAMS_FILE = Path(__file__).resolve().parents[1] / "config" / "gp_mapper.yaml"


def _mapper_node(context: LaunchContext) -> list[Node]:
    """The node, with use_sim_time read as ROS reads a boolean (not only 'true'/'false')."""
    use_sim_time = parse_bool("use_sim_time", LaunchConfiguration("use_sim_time").perform(context))
    return [
        Node(
            package="gp_mapper",
            executable="gp_mapper_node",
            name="gp_mapper",
            output="screen",
            emulate_tty=True,
            parameters=[LaunchConfiguration("params_file"), {"use_sim_time": use_sim_time}],
            remappings=[
                ("mag", LaunchConfiguration("mag_topic")),
                ("pose", LaunchConfiguration("pose_topic")),
            ],
        )
    ]


def generate_launch_description() -> LaunchDescription:
    """The gp_mapper node, its parameter file and the input remappings."""
    arguments = [
        DeclareLaunchArgument(
            "params_file",
            default_value=str(DEFAULT_PARAMS_FILE),
            description="Parameter YAML for the gp_mapper node.",
        ),
        DeclareLaunchArgument(
            "mag_topic",
            default_value="mag",
            description="sensor_msgs/MagneticField input topic (tesla).",
        ),
        DeclareLaunchArgument(
            "pose_topic",
            default_value="pose",
            description="Pose input topic; its type is the pose_type parameter.",
        ),
        DeclareLaunchArgument(
            "use_sim_time",
            default_value="false",
            description="Use /clock (bag replay) instead of the system clock: true or false "
            "(True, 1, 0, yes, no also work).",
        ),
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_mapper_node)])
