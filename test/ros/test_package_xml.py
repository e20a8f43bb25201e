"""package.xml declares every run dependency of the node and the CLI (rosdep can install it).

Every module that ``gp_mapper`` imports from outside the standard library must map to an
``exec_depend`` key; a new import without a key here fails the test, so the manifest cannot
fall behind the code again.
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_XML = REPO / "package.xml"

# Python module -> rosdep key (ros/rosdistro rosdep/python.yaml). ROS packages import as
# themselves (rclpy, sensor_msgs...). apsw comes with rosbags (rosbags reads sqlite3 with it).
ROSDEP_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "matplotlib": "python3-matplotlib",
    "torch": "python3-torch",
    "yaml": "python3-yaml",
    "rosbags": "python3-rosbags-pip",
    "apsw": "python3-rosbags-pip",
}
# Modules of an optional feature outside the node, installed with pip (requirements.txt), with
# no rosdep key: they are imported only inside the functions that need them.
OPTIONAL_PIP = {
    "ray": "the offline tiled fit on Ray (gp-mapper fit --workers N)",
}
ROS_MODULES = {
    "rclpy",
    "builtin_interfaces",
    "std_msgs",
    "rcl_interfaces",
    "sensor_msgs",
    "geometry_msgs",
    "nav_msgs",
    "visualization_msgs",
    "std_srvs",
    "diagnostic_msgs",
    "rosgraph_msgs",
    "tf2_ros",  # the localizer's map -> odom on /tf (imported where installed)
}


def _third_party_imports(root: Path) -> set[str]:
    found: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "gp_mapper"}


def _exec_depends() -> set[str]:
    root = ET.parse(PACKAGE_XML).getroot()
    keys = {e.text or "" for tag in ("exec_depend", "depend") for e in root.iter(tag)}
    return {k.strip() for k in keys}


def test_every_import_of_the_package_is_a_declared_run_dependency() -> None:
    declared = _exec_depends()
    imports = _third_party_imports(REPO / "gp_mapper")
    unknown = sorted(imports - ROSDEP_KEYS.keys() - ROS_MODULES - OPTIONAL_PIP.keys())
    assert not unknown, (
        f"imports without a known rosdep key (add one here and to package.xml): {unknown}"
    )
    needed = {ROSDEP_KEYS.get(m, m) for m in imports - OPTIONAL_PIP.keys()}
    assert not needed - declared, f"package.xml lacks: {sorted(needed - declared)}"


def test_the_launch_file_dependencies_are_declared() -> None:
    assert {"launch", "launch_ros", "ros2launch"} <= _exec_depends()


def test_torch_and_rosbags_use_their_rosdep_names() -> None:
    declared = _exec_depends()
    assert "python3-torch" in declared and "python3-rosbags-pip" in declared
    assert "python3-yaml" in declared


def test_an_optional_module_is_imported_only_where_it_is_used() -> None:
    """The node and ``import gp_mapper`` never need Ray: no module imports it at the top."""
    for path in (REPO / "gp_mapper").rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            assert not set(names) & OPTIONAL_PIP.keys(), f"{path}: imports {names} at the top"
