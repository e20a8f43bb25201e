"""The localizer's shipped files: its parameter YAML, launch file and RViz view agree with the
node (the table of gp_mapper.mapping.localization.settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gp_mapper.mapping.localization.settings import LOCALIZER_PARAMETERS

from . import test_launch_args
from .test_launch_args import _actions_for, _node_for, launch_description

REPO = Path(__file__).resolve().parents[2]
YAML_PATH = REPO / "config" / "gp_localizer.yaml"
RVIZ_PATH = REPO / "config" / "gp_localizer.rviz"
LAUNCH_FILE = REPO / "launch" / "gp_localizer.launch.py"


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML keys as ROS names them (``initial_pose: {x: ...}`` is ``initial_pose.x``)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_yaml_lists_every_parameter_at_its_default_under_any_node() -> None:
    document = yaml.safe_load(YAML_PATH.read_text())
    assert list(document) == ["/**"]  # a namespaced or renamed node takes it too
    params = flatten(document["/**"]["ros__parameters"])
    for info in LOCALIZER_PARAMETERS:
        assert params[info.name] == info.default, info.name
        assert type(params[info.name]) is type(info.default), info.name
    assert set(params) == {p.name for p in LOCALIZER_PARAMETERS}


def test_node_starts_from_the_yaml_under_a_namespace(ros_context) -> None:
    pytest.importorskip("rclpy", reason="rclpy is not importable")
    pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs is not importable (make venv)")
    from gp_mapper.ros.localizer_node import GpLocalizerNode

    node = GpLocalizerNode(
        context=ros_context,
        namespace="robot1",
        cli_args=["--ros-args", "--params-file", str(YAML_PATH), "-p", "max_particles:=800",
                  "-p", "initial_pose.yaw:=0.5"],
    )  # fmt: skip
    try:
        assert node.config.max_particles == 800 and node.config.alpha1 == 0.05
        assert node.get_parameter("initial_pose.yaw").value == 0.5
        assert node.get_parameter("odom_source").value == "tf"
        assert node.localizer is None  # no map_path in the YAML
    finally:
        node.destroy_node()


def test_the_rviz_view_shows_the_nodes_topics_with_their_qos() -> None:
    view = yaml.safe_load(RVIZ_PATH.read_text())
    topics = {
        d["Name"]: d["Topic"] for d in view["Visualization Manager"]["Displays"] if "Topic" in d
    }
    assert topics["Magnetic map"]["Value"] == "/gp_localizer/map"
    assert topics["Pose"]["Value"] == "/amcl_pose"
    assert topics["Particles"]["Value"] == "/particle_cloud"
    for name in ("Magnetic map", "Pose"):  # transient local: a late RViz gets the last one
        assert topics[name]["Durability Policy"] == "Transient Local"
    tools = [t for t in view["Visualization Manager"]["Tools"] if "Topic" in t]
    assert tools[0]["Topic"]["Value"] == "/initialpose"


def test_the_launch_file_passes_the_map_the_remappings_and_the_arguments(monkeypatch) -> None:
    description = launch_description(monkeypatch, LAUNCH_FILE)
    node = _node_for(description, map_path="/maps/floor.npz", mag_topic="/imu/mag",
                     namespace="/robot1/", autostart="False", log_level="debug")  # fmt: skip
    assert node.kwargs["executable"] == "gp_localizer_node"
    assert node.kwargs["namespace"] == "/robot1"
    assert node.kwargs["parameters"][1] == {
        "use_sim_time": False, "autostart": False, "map_path": "/maps/floor.npz"
    }  # fmt: skip
    assert node.kwargs["arguments"] == ["--ros-args", "--log-level", "debug"]
    remaps = {a: (b if isinstance(b, str) else b.name) for a, b in node.kwargs["remappings"]}
    assert remaps == {"mag": "mag_topic", "odom": "odom_topic", "/tf": "tf",
                      "/tf_static": "tf_static"}  # fmt: skip
    defaults = _node_for(description)
    assert defaults.kwargs["parameters"][1] == {"use_sim_time": False, "autostart": True}
    assert defaults.kwargs["namespace"] == ""


def test_use_rviz_starts_rviz_on_the_namespaced_topics(monkeypatch) -> None:
    monkeypatch.setattr(test_launch_args, "INSTALLED", {"gp_mapper", "rviz2"})
    description = launch_description(monkeypatch, LAUNCH_FILE)
    assert [a.kwargs.get("package") for a in _actions_for(description)] == ["gp_mapper"]
    actions = _actions_for(description, use_rviz="true", namespace="robot1")
    (rviz,) = [a for a in actions if a.kwargs.get("package") == "rviz2"]
    assert rviz.kwargs["namespace"] == "/robot1"
    view = yaml.safe_load(Path(rviz.kwargs["arguments"][1]).read_text())
    topics = {d["Name"]: d["Topic"]["Value"]
              for d in view["Visualization Manager"]["Displays"] if "Topic" in d}  # fmt: skip
    assert topics == {"Magnetic map": "/robot1/gp_localizer/map", "Pose": "/robot1/amcl_pose",
                      "Particles": "/robot1/particle_cloud"}  # fmt: skip
    tools = [t for t in view["Visualization Manager"]["Tools"] if "Topic" in t]
    assert tools[0]["Topic"]["Value"] == "/robot1/initialpose"


def test_use_rviz_without_rviz2_starts_the_localizer_alone(monkeypatch) -> None:
    monkeypatch.setattr(test_launch_args, "INSTALLED", {"gp_mapper"})
    description = launch_description(monkeypatch, LAUNCH_FILE)
    actions = _actions_for(description, use_rviz="true")
    assert [a.kwargs.get("package") for a in actions] == ["gp_mapper", None]
    assert "rviz2 is not installed" in actions[1].kwargs["msg"]
