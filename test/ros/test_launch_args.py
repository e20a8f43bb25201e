"""``use_sim_time:=True`` and friends: the launch file reads booleans as ROS does.

The launch file is run here against stand-ins for ``launch`` and ``launch_ros`` (neither is
installable from PyPI), so its argument handling is tested everywhere;
test_launch.py runs it for real where a ROS 2 install provides them.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gp_mapper.ros.launch_args import LaunchArgumentError, parse_bool

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "gp_mapper.launch.py"


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


def _stub_modules() -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    launch.LaunchDescription = _Recorded  # type: ignore[attr-defined]
    launch.LaunchContext = dict  # type: ignore[attr-defined]
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = _Recorded  # type: ignore[attr-defined]
    actions.OpaqueFunction = _Recorded  # type: ignore[attr-defined]
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


def _node_for(description: _Recorded, **arguments: str) -> _Recorded:
    (actions,) = description.args
    values = {
        a.args[0]: a.kwargs["default_value"]
        for a in actions
        if a.args and "default_value" in a.kwargs
    }
    values.update(arguments)
    (opaque,) = [a for a in actions if "function" in a.kwargs]
    (node,) = opaque.kwargs["function"](values)
    return node


@pytest.mark.parametrize(("given", "expected"), [("True", True), ("1", True), ("False", False)])
def test_launch_file_passes_use_sim_time_as_a_bool(
    description: _Recorded, given: str, expected: bool
) -> None:
    (actions,) = description.args
    declared = next(a for a in actions if a.args == ("use_sim_time",))
    assert "choices" not in declared.kwargs  # no two-spelling whitelist in front of ROS
    node = _node_for(description, use_sim_time=given)
    assert node.kwargs["parameters"][1] == {"use_sim_time": expected}
    assert node.kwargs["executable"] == "gp_mapper_node"


def test_launch_file_default_is_wall_time_and_bad_values_are_named(
    description: _Recorded,
) -> None:
    assert _node_for(description).kwargs["parameters"][1] == {"use_sim_time": False}
    with pytest.raises(LaunchArgumentError, match="use_sim_time"):
        _node_for(description, use_sim_time="sometimes")
