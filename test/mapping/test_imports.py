from __future__ import annotations

import subprocess
import sys

import gp_mapper.mapping as mapping


def test_mapping_imports_without_ros() -> None:
    code = (
        "import sys, gp_mapper.mapping; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'rclpy', 'rcl_interfaces', 'sensor_msgs', 'geometry_msgs', 'nav_msgs'}); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_public_name_is_exported() -> None:
    for name in mapping.__all__:
        assert hasattr(mapping, name), name
    for name in ("MappingPipeline", "MapperConfig", "PARAMETERS", "MapSnapshot", "GridSpec",
                 "scale_to_occupancy", "occupancy_to_values", "save_map", "load_map",
                 "DropCounts", "Pose", "FieldReading", "Sample", "Window"):  # fmt: skip
        assert name in mapping.__all__, name
