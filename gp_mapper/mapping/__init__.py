"""The ROS-free mapping pipeline: poses and magnetometer readings in, map snapshots out.

Imports numpy, scipy and (through the grid prediction) torch; never rclpy.
"""

from gp_mapper.mapping.config import (
    ENGINE_PARAMETER_NAMES,
    PARAMETER_BY_NAME,
    PARAMETERS,
    MapperConfig,
    parameters_markdown,
)
from gp_mapper.mapping.errors import ConfigError, MapFileError, MappingError
from gp_mapper.mapping.grid import GridSpec, extend_box, grid_for, predict_grid
from gp_mapper.mapping.map_file import MAP_FORMAT_VERSION, MapData, load_map, save_map
from gp_mapper.mapping.occupancy import (
    OCCUPANCY_MAX,
    OCCUPANCY_MIN,
    OCCUPANCY_UNKNOWN,
    occupancy_to_values,
    scale_to_occupancy,
    unknown_mask,
)
from gp_mapper.mapping.pairing import TESLA_TO_MICROTESLA, Pairer
from gp_mapper.mapping.pipeline import MappingPipeline
from gp_mapper.mapping.pose_buffer import (
    AddResult,
    LookupStatus,
    PoseBuffer,
    PoseLookup,
    rotate,
    slerp,
)
from gp_mapper.mapping.records import DropCounts, FieldReading, Pose, Sample, Window
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.mapping.trajectory import Trajectory
from gp_mapper.mapping.windowing import Windower, merge_windows, target_value
from gp_mapper.mapping.worker import SingleFlightWorker, WindowJob

__all__ = [
    "ENGINE_PARAMETER_NAMES",
    "MAP_FORMAT_VERSION",
    "OCCUPANCY_MAX",
    "OCCUPANCY_MIN",
    "OCCUPANCY_UNKNOWN",
    "PARAMETERS",
    "PARAMETER_BY_NAME",
    "TESLA_TO_MICROTESLA",
    "AddResult",
    "ConfigError",
    "DropCounts",
    "FieldReading",
    "GridSpec",
    "LookupStatus",
    "MapData",
    "MapFileError",
    "MapSnapshot",
    "MapperConfig",
    "MappingError",
    "MappingPipeline",
    "Pairer",
    "Pose",
    "PoseBuffer",
    "PoseLookup",
    "Sample",
    "SingleFlightWorker",
    "Trajectory",
    "Window",
    "WindowJob",
    "Windower",
    "extend_box",
    "grid_for",
    "load_map",
    "merge_windows",
    "occupancy_to_values",
    "parameters_markdown",
    "predict_grid",
    "rotate",
    "save_map",
    "scale_to_occupancy",
    "slerp",
    "target_value",
    "unknown_mask",
]
