"""package.xml declares every run dependency of the node and the CLI (rosdep can install it).

Every module that ``gp_mapper`` or a launch file imports from outside the standard library
must map to an ``exec_depend`` key; a new import without a key here fails the test, so the
manifest cannot fall behind the code again. Every key must resolve on a Jazzy install: a
Jazzy package, or a rosdep key with a rule for Ubuntu Noble (Jazzy's platform), checked
against excerpts of ros/rosdistro in test/ros/data (README.md there names the commit).
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PACKAGE_XML = REPO / "package.xml"
DATA = Path(__file__).resolve().parent / "data"
DISTRIBUTION = DATA / "rosdistro_jazzy_distribution.yaml"
ROSDEP_RULES = DATA / "rosdistro_rosdep_python.yaml"
PLATFORM = ("ubuntu", "noble")
# rosdep's installers for Ubuntu: apt by default, pip where a rule names it.
INSTALLERS = ("apt", "pip")

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
# Modules used where installed and not declared: imported only inside the functions that need
# them, which work on without them.
OPTIONAL = {
    "ray": "the offline tiled fit on Ray (gp-mapper fit --workers N), installed with pip",
    "tf2_ros": "the localizer's TransformBroadcaster (package tf2_ros_py); else TFMessage on /tf",
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
    "lifecycle_msgs",
    "tf2_msgs",
    "launch",
    "launch_ros",
    "ament_index_python",
}


def _third_party_imports(*paths: Path) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "gp_mapper"}


def _depends(*tags: str) -> set[str]:
    root = ET.parse(PACKAGE_XML).getroot()
    return {(e.text or "").strip() for tag in tags for e in root.iter(tag)}


def _exec_depends() -> set[str]:
    return _depends("exec_depend", "depend")


def _all_depends() -> set[str]:
    return _depends(
        "depend", "build_depend", "build_export_depend", "buildtool_depend", "exec_depend",
        "test_depend", "doc_depend",
    )  # fmt: skip


def _jazzy_packages() -> set[str]:
    """Package names of the excerpt: a repository's list, or its own name (REP 143)."""
    repositories = yaml.safe_load(DISTRIBUTION.read_text())["repositories"]
    names: set[str] = set()
    for repo, entry in repositories.items():
        names.update(entry["release"].get("packages", [repo]))
    return names


def _rosdep_rules() -> dict[str, Any]:
    return yaml.safe_load(ROSDEP_RULES.read_text())


def noble_resolution(rule: dict[str, Any]) -> tuple[str, list[str]] | None:
    """How rosdep installs a key on Ubuntu Noble: (installer, packages), or None.

    A rule maps an OS to a package list (the default installer, apt), to ``{installer:
    {packages: [...]}}``, or to either of those per codename, ``'*'`` for the rest; ``null``
    means not available there.
    """
    os_name, codename = PLATFORM
    entry = rule.get(os_name)
    if isinstance(entry, dict) and not set(entry) & set(INSTALLERS):
        entry = entry[codename] if codename in entry else entry.get("*")
    if entry is None:
        return None
    if isinstance(entry, list):
        return ("apt", entry) if entry else None
    for installer in INSTALLERS:
        if installer in entry:
            spec = entry[installer]
            packages = spec.get("packages", []) if isinstance(spec, dict) else spec
            return (installer, packages) if packages else None
    return None


def test_every_import_of_the_package_is_a_declared_run_dependency() -> None:
    declared = _exec_depends()
    imports = _third_party_imports(
        *(REPO / "gp_mapper").rglob("*.py"), *(REPO / "launch").glob("*.launch.py")
    )
    unknown = sorted(imports - ROSDEP_KEYS.keys() - ROS_MODULES - OPTIONAL.keys())
    assert not unknown, (
        f"imports without a known rosdep key (add one here and to package.xml): {unknown}"
    )
    needed = {ROSDEP_KEYS.get(m, m) for m in imports - OPTIONAL.keys()}
    assert not needed - declared, f"package.xml lacks: {sorted(needed - declared)}"


def test_the_launch_file_dependencies_are_declared() -> None:
    # ros2launch: the `ros2 launch` verb the docs tell users to run
    assert {"launch", "launch_ros", "ros2launch", "ament_index_python"} <= _exec_depends()


def test_optional_modules_are_not_declared() -> None:
    assert not {"tf2_ros", "tf2_ros_py", "ray"} & _all_depends()


def test_every_key_is_a_jazzy_package_or_a_rosdep_key_that_resolves_on_noble() -> None:
    platforms = yaml.safe_load(DISTRIBUTION.read_text())["release_platforms"]
    assert PLATFORM[1] in platforms[PLATFORM[0]]  # Jazzy is released for Noble
    packages, rules = _jazzy_packages(), _rosdep_rules()
    unresolved = []
    for key in sorted(_all_depends()):
        if key in packages:
            assert key not in rules, f"{key}: both a package and a rosdep key"
        elif key not in rules or noble_resolution(rules[key]) is None:
            unresolved.append(key)
    assert not unresolved, (
        f"not a Jazzy package nor a rosdep key with a rule for Ubuntu Noble: {unresolved} "
        "(check ros/rosdistro and add its entry to test/ros/data, see README.md there)"
    )


def test_the_excerpts_hold_only_what_package_xml_names() -> None:
    keys = _all_depends()
    assert set(_rosdep_rules()) <= keys
    repositories = yaml.safe_load(DISTRIBUTION.read_text())["repositories"]
    for repo, entry in repositories.items():
        assert set(entry["release"].get("packages", [repo])) & keys, repo


def test_the_python_libraries_resolve_as_expected_on_noble() -> None:
    """apt packages, except rosbags, which only pip has (PEP 668: see the README)."""
    rules = _rosdep_rules()
    assert noble_resolution(rules["python3-torch"]) == ("apt", ["python3-torch"])
    assert noble_resolution(rules["python3-numpy"]) == ("apt", ["python3-numpy"])
    assert noble_resolution(rules["python3-rosbags-pip"]) == ("pip", ["rosbags"])
    pip_keys = sorted(k for k in _all_depends() & set(rules) if k.endswith("-pip"))
    assert pip_keys == ["python3-rosbags-pip"]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"ubuntu": ["a"]}, ("apt", ["a"])),
        ({"ubuntu": {"*": ["a"], "focal": None}}, ("apt", ["a"])),
        ({"ubuntu": {"*": ["a"], "noble": None}}, None),
        ({"ubuntu": {"noble": ["b"], "*": ["a"]}}, ("apt", ["b"])),
        ({"ubuntu": {"jammy": ["a"]}}, None),
        ({"ubuntu": {"pip": {"packages": ["p"]}}}, ("pip", ["p"])),
        ({"ubuntu": {"noble": {"pip": {"packages": ["p"]}}}}, ("pip", ["p"])),
        ({"ubuntu": {"apt": {"packages": ["a"]}}}, ("apt", ["a"])),
        ({"debian": ["a"]}, None),
        ({"ubuntu": []}, None),
    ],
)
def test_noble_resolution_reads_rosdep_rules_as_rosdep_does(
    rule: dict[str, Any], expected: tuple[str, list[str]] | None
) -> None:
    assert noble_resolution(rule) == expected


def test_catkin_pkg_reads_the_manifest_without_a_warning() -> None:
    """What rosdep and colcon parse package.xml with (comes with requirements-build.txt)."""
    package = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg is not installed")
    warnings: list[str] = []
    manifest = package.parse_package(str(PACKAGE_XML), warnings=warnings)
    manifest.validate(warnings=warnings)
    assert not warnings
    assert manifest.get_build_type() == "ament_python"


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
            assert not set(names) & OPTIONAL.keys(), f"{path}: imports {names} at the top"
