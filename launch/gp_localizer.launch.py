"""Launch the gp_localizer node with its parameter file, a map and, optionally, RViz2.

    ros2 launch gp_mapper gp_localizer.launch.py map_path:=/path/to/map_state.npz \
        mag_topic:=/imu/mag
    ros2 launch gp_mapper gp_localizer.launch.py namespace:=robot1 use_rviz:=true
    ros2 launch gp_mapper gp_localizer.launch.py params_file:=/path/to/mine.yaml use_sim_time:=True

Arguments:
    namespace: the node's namespace (default: none). Its relative topics (``mag``,
        ``amcl_pose``, ``particle_cloud``, ``initialpose``, ``~/map``...) and services move
        under it; config/gp_localizer.yaml still applies, its parameters being under ``/**``.
    use_sim_time: take the node clock from /clock (bag replay); true or false in any spelling
        ROS accepts (True, true, 1, 0, yes, no...).
    params_file: parameter YAML (default: config/gp_localizer.yaml of this package).
    log_level: the node's log level (debug, info, warn, error, fatal; default info).
    autostart: the lifecycle node configures and activates itself at start (its ``autostart``
        parameter, default true); false leaves it unconfigured for a lifecycle manager or
        ``ros2 lifecycle set``.
    use_rviz: also start RViz2 with config/gp_localizer.rviz (default false), in the same
        namespace, its topics rewritten to the namespaced node's. Where rviz2 is not installed
        (no ``rviz2`` package in the ament index) the launch logs it and starts the localizer
        alone.
    map_path: the map file (map_state.npz written by gp_mapper); overrides the YAML's.
    mag_topic: sensor_msgs/MagneticField topic remapped onto the node's ``mag`` input.
    odom_topic: nav_msgs/Odometry topic remapped onto the node's ``odom`` input (used with
        ``odom_source: topic``; the default reads odometry from TF).

TF: the node reads ``/tf`` and ``/tf_static`` and broadcasts map -> odom on ``/tf``. Both are
remapped to the relative ``tf`` and ``tf_static``, as nav2_bringup does: without a namespace
they are ``/tf`` and ``/tf_static``; with ``namespace:=robot1`` the robot's own
``/robot1/tf`` and ``/robot1/tf_static``. RViz2 gets the same remappings.
"""

import tempfile
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gp_mapper.ros.launch_args import namespaced_rviz_config, normalize_namespace, parse_bool

NODE_NAME = "gp_localizer"
# config/ sits beside launch/ both in the source tree and in share/gp_mapper once installed.
CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
DEFAULT_PARAMS_FILE = CONFIG_DIR / "gp_localizer.yaml"
RVIZ_CONFIG = CONFIG_DIR / "gp_localizer.rviz"
# The TF topics into the namespace (nav2_bringup's remapping): a no-op without one.
TF_REMAPPINGS = [("/tf", "tf"), ("/tf_static", "tf_static")]
# The node's topics at its namespace's root (Nav2's names), as the RViz config spells them.
ROOT_TOPICS = ("/amcl_pose", "/particle_cloud", "/initialpose")


def _flag(context: LaunchContext, name: str) -> bool:
    """A boolean argument read as ROS reads a boolean (not only 'true'/'false')."""
    return parse_bool(name, LaunchConfiguration(name).perform(context))


def _rviz_installed() -> bool:
    try:
        get_package_prefix("rviz2")
    except PackageNotFoundError:
        return False
    return True


def namespaced_view(namespace: str) -> str:
    """The RViz config with every topic of the node moved under ``namespace``."""
    text = namespaced_rviz_config(RVIZ_CONFIG.read_text(), namespace, NODE_NAME)
    namespace = normalize_namespace(namespace)
    if namespace:
        for topic in ROOT_TOPICS:
            text = text.replace(f"Value: {topic}\n", f"Value: {namespace}{topic}\n")
    return text


def _rviz(namespace: str, use_sim_time: bool) -> list[object]:
    """RViz2 on the node's topics, or a line in the log where rviz2 is not installed."""
    if not _rviz_installed():
        message = "use_rviz: rviz2 is not installed (no rviz2 package in the ament index)"
        return [LogInfo(msg=f"{message}; starting {NODE_NAME} without it")]
    config = RVIZ_CONFIG
    if namespace:
        with tempfile.NamedTemporaryFile(
            "w", prefix="gp_localizer_", suffix=".rviz", delete=False
        ) as handle:
            handle.write(namespaced_view(namespace))
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


def _localizer(context: LaunchContext) -> list[object]:
    """The node (and RViz2 with use_rviz), the arguments read as ROS reads them."""
    namespace = normalize_namespace(LaunchConfiguration("namespace").perform(context))
    use_sim_time = _flag(context, "use_sim_time")
    overrides: dict[str, object] = {
        "use_sim_time": use_sim_time,
        "autostart": _flag(context, "autostart"),
    }
    map_path = LaunchConfiguration("map_path").perform(context)
    if map_path:
        overrides["map_path"] = map_path
    log_level = LaunchConfiguration("log_level").perform(context)
    localizer = Node(
        package="gp_mapper",
        executable="gp_localizer_node",
        name=NODE_NAME,
        namespace=namespace,
        output="screen",
        emulate_tty=True,
        parameters=[LaunchConfiguration("params_file"), overrides],
        arguments=["--ros-args", "--log-level", log_level],
        remappings=[
            ("mag", LaunchConfiguration("mag_topic")),
            ("odom", LaunchConfiguration("odom_topic")),
            *TF_REMAPPINGS,
        ],
    )
    rviz = _rviz(namespace, use_sim_time) if _flag(context, "use_rviz") else []
    return [localizer, *rviz]


def generate_launch_description() -> LaunchDescription:
    """The gp_localizer node, its parameter file, the map, the remappings and optionally RViz2."""
    arguments = [
        DeclareLaunchArgument("namespace", default_value="",
                              description="Namespace of the node (and of /tf, /tf_static)."),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (bag replay) instead of the system clock: "
                                          "true or false (True, 1, 0, yes, no also work)."),
        DeclareLaunchArgument("params_file", default_value=str(DEFAULT_PARAMS_FILE),
                              description="Parameter YAML for the gp_localizer node."),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="Log level: debug, info, warn, error or fatal."),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="Configure and activate the lifecycle node at start."),
        DeclareLaunchArgument("use_rviz", default_value="false",
                              description="Also start RViz2 with config/gp_localizer.rviz "
                                          "(skipped, with a line in the log, where rviz2 is "
                                          "missing)."),
        DeclareLaunchArgument("map_path", default_value="",
                              description="Map file (map_state.npz); empty: the YAML's."),
        DeclareLaunchArgument("mag_topic", default_value="mag",
                              description="sensor_msgs/MagneticField input topic (tesla)."),
        DeclareLaunchArgument("odom_topic", default_value="odom",
                              description="nav_msgs/Odometry input topic (odom_source topic)."),
    ]  # fmt: skip
    return LaunchDescription([*arguments, OpaqueFunction(function=_localizer)])
