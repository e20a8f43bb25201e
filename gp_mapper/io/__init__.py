"""gp_mapper.io: rosbag2 reading and writing (rosbags), dataset readers, map exports.

No ROS client library here: bags are read and written with ``rosbags`` and its built-in Jazzy
type store, so this layer works (and is tested) without rclpy.
"""

from .aalto import AaltoSequence, load_aalto_sequence
from .bag_convert import SEQUENCE_GAP_S, ConvertSummary, convert_aalto
from .bag_source import BagInfo, TopicSummary, bag_info, bag_pose_source, read_bag
from .bag_writer import (
    BASE_EPOCH_NS,
    DEFAULT_MAG_TOPIC,
    DEFAULT_POSE_TOPIC,
    MAG_FRAME_ID,
    MAP_FRAME_ID,
    BagSummary,
    FieldStream,
    PoseStream,
    write_field_pose_bag,
)
from .building import (
    BuildingRun,
    BuildingWalk,
    BuildingWorld,
    building_walk,
    first_visit_times,
    make_building_world,
    path_cells,
    simulate_building_run,
    write_building_bag,
)
from .errors import BagError, DatasetError, ExportError, IoLayerError
from .exports import (
    Nav2MapFiles,
    write_grids_npz,
    write_grids_npz_arrays,
    write_nav2_map,
    write_nav2_map_arrays,
    write_png,
    write_png_arrays,
)
from .heading import heading_from_track, rotate_z, yaw_from_quaternion, yaw_to_quaternion
from .pose_types import POSE_MSGTYPES
from .robot_bag import (
    RobotBagSummary,
    RobotRun,
    simulate_robot_run,
    write_robot_bag,
    write_robot_pose_bag,
    write_synthetic_robot_bag,
)
from .synthetic import (
    SyntheticRun,
    SyntheticWorld,
    make_synthetic_world,
    simulate_run,
    write_synthetic_bag,
)

__all__ = [
    "BASE_EPOCH_NS",
    "DEFAULT_MAG_TOPIC",
    "DEFAULT_POSE_TOPIC",
    "MAG_FRAME_ID",
    "MAP_FRAME_ID",
    "POSE_MSGTYPES",
    "SEQUENCE_GAP_S",
    "AaltoSequence",
    "BagError",
    "BagInfo",
    "BagSummary",
    "BuildingRun",
    "BuildingWalk",
    "BuildingWorld",
    "ConvertSummary",
    "DatasetError",
    "ExportError",
    "FieldStream",
    "IoLayerError",
    "Nav2MapFiles",
    "PoseStream",
    "RobotBagSummary",
    "RobotRun",
    "SyntheticRun",
    "SyntheticWorld",
    "TopicSummary",
    "bag_info",
    "bag_pose_source",
    "building_walk",
    "convert_aalto",
    "first_visit_times",
    "heading_from_track",
    "load_aalto_sequence",
    "make_building_world",
    "make_synthetic_world",
    "path_cells",
    "read_bag",
    "rotate_z",
    "simulate_building_run",
    "simulate_robot_run",
    "simulate_run",
    "write_building_bag",
    "write_field_pose_bag",
    "write_grids_npz",
    "write_grids_npz_arrays",
    "write_nav2_map",
    "write_nav2_map_arrays",
    "write_png",
    "write_png_arrays",
    "write_robot_bag",
    "write_robot_pose_bag",
    "write_synthetic_bag",
    "write_synthetic_robot_bag",
    "yaw_from_quaternion",
    "yaw_to_quaternion",
]
