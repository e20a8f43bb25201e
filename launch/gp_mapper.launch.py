"""Launch the gp_mapper node with its parameter file, input remappings and, optionally, RViz2.

    ros2 launch gp_mapper gp_mapper.launch.py mag_topic:=/imu/mag
    ros2 launch gp_mapper gp_mapper.launch.py namespace:=robot1 use_rviz:=true
    ros2 launch gp_mapper gp_mapper.launch.py params_file:=/path/to/mine.yaml use_sim_time:=True

Arguments:
    namespace: the node's namespace (default: none). Its relative topics (``mag``, ``pose``,
        ``~/mean``...) and services move under it; config/gp_mapper.yaml still applies, its
        parameters being under ``/**`` (any node name, any namespace).
    use_sim_time: take the node clock from /clock (bag replay); true or false in any
        spelling ROS accepts (True, true, 1, 0, yes, no...).
    params_file: parameter YAML (default: config/gp_mapper.yaml of this package).
    log_level: the node's log level (debug, info, warn, error, fatal; default info).
    autostart: the lifecycle node configures and activates itself at start (its ``autostart``
        parameter, default true); false leaves it unconfigured for a lifecycle manager or
        ``ros2 lifecycle set``.
    use_rviz: also start RViz2 with config/gp_mapper.rviz (default false), in the same
        namespace, its topics rewritten to the namespaced node's. Where rviz2 is not
        installed (no ``rviz2`` package in the ament index) the launch logs a warning and
        starts the mapper alone.
    mag_topic: sensor_msgs/MagneticField topic remapped onto the node's ``mag`` input.
    pose_topic: pose topic remapped onto the node's ``pose`` input (its type is the
        ``pose_type`` parameter).

TF: the node subscribes to ``/tf`` and ``/tf_static`` (absolute names, so a namespace alone
does not move them). Both are remapped to the relative ``tf`` and ``tf_static``, as
nav2_bringup does: without a namespace they resolve to ``/tf`` and ``/tf_static`` as before;
with ``namespace:=robot1`` the node reads ``/robot1/tf`` and ``/robot1/tf_static``, the TF
tree of a robot whose stack runs namespaced. RViz2 gets the same remappings.
"""

import tempfile
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gp_mapper.ros.launch_args import namespaced_rviz_config, normalize_namespace, parse_bool

NODE_NAME = "gp_mapper"
# config/ sits beside launch/ both in the source tree and in share/gp_mapper once installed.
CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
DEFAULT_PARAMS_FILE = CONFIG_DIR / "gp_mapper.yaml"
RVIZ_CONFIG = CONFIG_DIR / "gp_mapper.rviz"
# The TF topics into the namespace (nav2_bringup's remapping): a no-op without one.
TF_REMAPPINGS = [("/tf", "tf"), ("/tf_static", "tf_static")]


def _flag(context: LaunchContext, name: str) -> bool:
    """A boolean argument read as ROS reads a boolean (not only 'true'/'false')."""
    return parse_bool(name, LaunchConfiguration(name).perform(context))


def _rviz_installed() -> bool:
    try:
        get_package_prefix("rviz2")
    except PackageNotFoundError:
        return False
    return True


def _rviz(namespace: str, use_sim_time: bool) -> list[object]:
    """RViz2 on the node's topics, or a warning where rviz2 is not installed."""
    if not _rviz_installed():
        message = "use_rviz: rviz2 is not installed (no rviz2 package in the ament index)"
        return [LogInfo(msg=f"{message}; starting {NODE_NAME} without it")]
    config = RVIZ_CONFIG
    if namespace:
        text = namespaced_rviz_config(RVIZ_CONFIG.read_text(), namespace, NODE_NAME)
        with tempfile.NamedTemporaryFile(
            "w", prefix="gp_mapper_", suffix=".rviz", delete=False
        ) as handle:
            handle.write(text)
        config = Path(handle.name)
    return [
        Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            namespace=namespace,
            output="screen",
            arguments=["-d", str(config)],
            parameters=[{"use_sim_time": use_sim_time}],
            remappings=TF_REMAPPINGS,
        )
    ]


def _mapper(context: LaunchContext) -> list[object]:
    """The node (and RViz2 with use_rviz), the arguments read as ROS reads them."""
    namespace = normalize_namespace(LaunchConfiguration("namespace").perform(context))
    use_sim_time = _flag(context, "use_sim_time")
    overrides = {"use_sim_time": use_sim_time, "autostart": _flag(context, "autostart")}
    log_level = LaunchConfiguration("log_level").perform(context)
    mapper = Node(
        package="gp_mapper",
        executable="gp_mapper_node",
        name=NODE_NAME,
        namespace=namespace,
        output="screen",
        emulate_tty=True,
        parameters=[LaunchConfiguration("params_file"), overrides],
        arguments=["--ros-args", "--log-level", log_level],
        remappings=[
            ("mag", LaunchConfiguration("mag_topic")),
            ("pose", LaunchConfiguration("pose_topic")),
            *TF_REMAPPINGS,
        ],
    )
    rviz = _rviz(namespace, use_sim_time) if _flag(context, "use_rviz") else []
    return [mapper, *rviz]


def generate_launch_description() -> LaunchDescription:
    """The gp_mapper node, its parameter file, the remappings and optionally RViz2."""
    arguments = [
        DeclareLaunchArgument("namespace", default_value="",
                              description="Namespace of the node (and of /tf, /tf_static)."),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (bag replay) instead of the system clock: "
                                          "true or false (True, 1, 0, yes, no also work)."),
        DeclareLaunchArgument("params_file", default_value=str(DEFAULT_PARAMS_FILE),
                              description="Parameter YAML for the gp_mapper node."),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="Log level: debug, info, warn, error or fatal."),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="Configure and activate the lifecycle node at start."),
        DeclareLaunchArgument("use_rviz", default_value="false",
                              description="Also start RViz2 with config/gp_mapper.rviz "
                                          "(skipped, with a warning, where rviz2 is missing)."),
        DeclareLaunchArgument("mag_topic", default_value="mag",
                              description="sensor_msgs/MagneticField input topic (tesla)."),
        DeclareLaunchArgument("pose_topic", default_value="pose",
                              description="Pose input topic; its type is the pose_type "
                                          "parameter."),
    ]  # fmt: skip
    return LaunchDescription([*arguments, OpaqueFunction(function=_mapper)])
