"""The mapper's launch arguments: booleans read as ROS reads them, namespace, TF, RViz2.

The launch file is run here against stand-ins for ``launch``, ``launch_ros`` (neither is
installable from PyPI) and the ament index, so its argument handling is tested everywhere;
test_launch.py runs it for real where a ROS 2 install provides them.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gp_mapper.ros.launch_args import (
    LaunchArgumentError,
    namespaced_rviz_config,
    normalize_namespace,
    parse_bool,
)

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "gp_mapper.launch.py"
RVIZ_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gp_mapper.rviz"
TF_REMAPPINGS = [("/tf", "tf"), ("/tf_static", "tf_static")]


@pytest.mark.parametrize("text", ["true", "True", "TRUE", "1", "yes", "on", " true "])
def test_true_in_every_spelling_ros_accepts(text: str) -> None:
    assert parse_bool("use_sim_time", text) is True


@pytest.mark.parametrize("text", ["false", "False", "FALSE", "0", "no", "off"])
def test_false_in_every_spelling_ros_accepts(text: str) -> None:
    assert parse_bool("use_sim_time", text) is False


@pytest.mark.parametrize("text", ["maybe", "", "2", "truee"])
def test_other_values_are_refused_naming_the_argument(text: str) -> None:
    with pytest.raises(LaunchArgumentError, match=r"use_sim_time:=.* is not a boolean"):
        parse_bool("use_sim_time", text)


class _Recorded:
    """Stands in for a launch action: keeps its arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


class _LaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: dict[str, str]) -> str:
        return context[self.name]


class _PackageNotFoundError(KeyError):
    pass


# The packages the stand-in ament index holds (rviz2 or not).
INSTALLED: set[str] = {"gp_mapper"}


def _get_package_prefix(name: str) -> str:
    if name not in INSTALLED:
        raise _PackageNotFoundError(name)
    return f"/opt/ros/jazzy/{name}"


def _stub_modules() -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    launch.LaunchDescription = _Recorded  # type: ignore[attr-defined]
    launch.LaunchContext = dict  # type: ignore[attr-defined]
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = _Recorded  # type: ignore[attr-defined]
    actions.OpaqueFunction = _Recorded  # type: ignore[attr-defined]
    actions.LogInfo = _Recorded  # type: ignore[attr-defined]
    ament_index = types.ModuleType("ament_index_python")
    packages = types.ModuleType("ament_index_python.packages")
    packages.PackageNotFoundError = _PackageNotFoundError  # type: ignore[attr-defined]
    packages.get_package_prefix = _get_package_prefix  # type: ignore[attr-defined]
    substitutions = types.ModuleType("launch.substitutions")
    substitutions.LaunchConfiguration = _LaunchConfiguration  # type: ignore[attr-defined]
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = _Recorded  # type: ignore[attr-defined]
    return {
        "launch": launch,
        "launch.actions": actions,
        "launch.substitutions": substitutions,
        "launch_ros": launch_ros,
        "launch_ros.actions": ros_actions,
        "ament_index_python": ament_index,
        "ament_index_python.packages": packages,
    }


def launch_description(monkeypatch: pytest.MonkeyPatch, path: Path) -> _Recorded:
    """A launch file's LaunchDescription, built against the stand-ins."""
    for name, module in _stub_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location(f"{path.stem}_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


@pytest.fixture
def description(monkeypatch: pytest.MonkeyPatch) -> _Recorded:
    """The mapper's launch file's LaunchDescription, built against the stand-ins."""
    return launch_description(monkeypatch, LAUNCH_FILE)


def _actions_for(description: _Recorded, **arguments: str) -> list[_Recorded]:
    """What the launch file's OpaqueFunction starts for these arguments (defaults for the rest)."""
    (actions,) = description.args
    values = {
        a.args[0]: a.kwargs["default_value"]
        for a in actions
        if a.args and "default_value" in a.kwargs
    }
    values.update(arguments)
    (opaque,) = [a for a in actions if "function" in a.kwargs]
    return list(opaque.kwargs["function"](values))


def _node_for(description: _Recorded, **arguments: str) -> _Recorded:
    """The package's own node among them."""
    actions = _actions_for(description, **arguments)
    (node,) = [a for a in actions if a.kwargs.get("package") == "gp_mapper"]
    return node


@pytest.mark.parametrize(("given", "expected"), [("True", True), ("1", True), ("False", False)])
def test_launch_file_passes_use_sim_time_as_a_bool(
    description: _Recorded, given: str, expected: bool
) -> None:
    (actions,) = description.args
    declared = next(a for a in actions if a.args == ("use_sim_time",))
    assert "choices" not in declared.kwargs  # no two-spelling whitelist in front of ROS
    node = _node_for(description, use_sim_time=given)
    assert node.kwargs["parameters"][1]["use_sim_time"] is expected
    assert node.kwargs["executable"] == "gp_mapper_node"


def test_launch_file_default_is_wall_time_and_bad_values_are_named(
    description: _Recorded,
) -> None:
    assert _node_for(description).kwargs["parameters"][1]["use_sim_time"] is False
    with pytest.raises(LaunchArgumentError, match="use_sim_time"):
        _node_for(description, use_sim_time="sometimes")


def test_launch_file_declares_what_an_integrator_expects(description: _Recorded) -> None:
    (actions,) = description.args
    defaults = {a.args[0]: a.kwargs["default_value"] for a in actions if a.args}
    assert defaults == {
        "namespace": "",
        "use_sim_time": "false",
        "params_file": str(LAUNCH_FILE.parents[1] / "config" / "gp_mapper.yaml"),
        "log_level": "info",
        "autostart": "true",
        "use_rviz": "false",
        "mag_topic": "mag",
        "pose_topic": "pose",
    }
    assert all(a.kwargs.get("description") for a in actions if a.args)


def test_the_node_by_default(description: _Recorded) -> None:
    (node,) = _actions_for(description)  # no RViz2 unless asked
    assert node.kwargs["name"] == "gp_mapper" and node.kwargs["namespace"] == ""
    assert node.kwargs["parameters"][1] == {"use_sim_time": False, "autostart": True}
    assert node.kwargs["arguments"] == ["--ros-args", "--log-level", "info"]
    remappings = node.kwargs["remappings"]
    assert [(a, b.name) for a, b in remappings[:2]] == [
        ("mag", "mag_topic"),
        ("pose", "pose_topic"),
    ]
    assert remappings[2:] == TF_REMAPPINGS


@pytest.mark.parametrize(("given", "expected"), [("false", False), ("0", False), ("True", True)])
def test_autostart_is_passed_as_the_nodes_parameter(
    description: _Recorded, given: str, expected: bool
) -> None:
    assert _node_for(description, autostart=given).kwargs["parameters"][1]["autostart"] is expected
    with pytest.raises(LaunchArgumentError, match="autostart"):
        _node_for(description, autostart="later")


def test_namespace_and_log_level_reach_the_node(description: _Recorded) -> None:
    node = _node_for(description, namespace="robot1/", log_level="debug")
    assert node.kwargs["namespace"] == "/robot1"
    assert node.kwargs["arguments"] == ["--ros-args", "--log-level", "debug"]
    # /tf and /tf_static follow the namespace, as nav2_bringup remaps them
    assert node.kwargs["remappings"][2:] == TF_REMAPPINGS


def test_use_rviz_starts_rviz2_with_the_shipped_config(
    description: _Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "INSTALLED", {"gp_mapper", "rviz2"})
    node, rviz = _actions_for(description, use_rviz="true", use_sim_time="1")
    assert node.kwargs["package"] == "gp_mapper"
    assert rviz.kwargs["executable"] == "rviz2"
    assert rviz.kwargs["arguments"] == ["-d", str(RVIZ_CONFIG)]
    assert rviz.kwargs["parameters"] == [{"use_sim_time": True}]
    assert rviz.kwargs["remappings"] == TF_REMAPPINGS


def test_use_rviz_under_a_namespace_shows_the_namespaced_topics(
    description: _Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "INSTALLED", {"gp_mapper", "rviz2"})
    _, rviz = _actions_for(description, use_rviz="true", namespace="robot1")
    assert rviz.kwargs["namespace"] == "/robot1"
    flag, config = rviz.kwargs["arguments"]
    text = Path(config).read_text()
    Path(config).unlink()
    assert flag == "-d" and "Value: /robot1/gp_mapper/mean" in text
    assert "Value: /gp_mapper/" not in text


def test_use_rviz_without_rviz2_installed_starts_the_mapper_alone(description: _Recorded) -> None:
    node, warning = _actions_for(description, use_rviz="yes")
    assert node.kwargs["package"] == "gp_mapper"
    assert "rviz2 is not installed" in warning.kwargs["msg"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", ""), ("/", ""), ("robot1", "/robot1"), (" /robot1/ ", "/robot1"), ("a//b", "/a/b")],
)
def test_namespace_is_normalized(text: str, expected: str) -> None:
    assert normalize_namespace(text) == expected


def test_namespaced_rviz_config_rewrites_only_the_nodes_topics() -> None:
    text = "Value: /gp_mapper/mean\nValue: /gp_mapper_other/x\nValue: /tf\n"
    assert namespaced_rviz_config(text, "", "gp_mapper") == text
    assert namespaced_rviz_config(text, "/r1", "gp_mapper") == (
        "Value: /r1/gp_mapper/mean\nValue: /gp_mapper_other/x\nValue: /tf\n"
    )
