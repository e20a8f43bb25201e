"""The localizer's shipped files: its parameter YAML, launch file and RViz view agree with the
node (the table of gp_mapper.mapping.localization.settings)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gp_mapper.mapping.localization.settings import LOCALIZER_PARAMETERS

from .test_launch_args import _node_for, launch_description

REPO = Path(__file__).resolve().parents[2]
YAML_PATH = REPO / "config" / "gp_localizer.yaml"
RVIZ_PATH = REPO / "config" / "gp_localizer.rviz"
LAUNCH_FILE = REPO / "launch" / "gp_localizer.launch.py"


def test_yaml_lists_every_parameter_at_its_default() -> None:
    params = yaml.safe_load(YAML_PATH.read_text())["gp_localizer"]["ros__parameters"]
    for info in LOCALIZER_PARAMETERS:
        assert params[info.name] == info.default, info.name
        assert type(params[info.name]) is type(info.default), info.name
    assert set(params) == {p.name for p in LOCALIZER_PARAMETERS}


def test_node_starts_from_the_yaml(ros_context) -> None:
    pytest.importorskip("rclpy", reason="rclpy is not importable")
    from gp_mapper.ros.localizer_node import GpLocalizerNode

    node = GpLocalizerNode(
        context=ros_context,
        cli_args=["--ros-args", "--params-file", str(YAML_PATH), "-p", "max_particles:=800"],
    )
    try:
        assert node.config.max_particles == 800 and node.config.alpha1 == 0.05
        assert node.localizer is None  # no map_path in the YAML
    finally:
        node.destroy_node()


def test_the_rviz_view_shows_the_nodes_topics_with_their_qos() -> None:
    view = yaml.safe_load(RVIZ_PATH.read_text())
    topics = {
        d["Name"]: d["Topic"] for d in view["Visualization Manager"]["Displays"] if "Topic" in d
    }
    assert topics["Magnetic map"]["Value"] == "/gp_localizer/map"
    assert topics["Pose"]["Value"] == "/gp_localizer/pose"
    assert topics["Particles"]["Value"] == "/gp_localizer/particles"
    for name in ("Magnetic map", "Pose"):  # transient local: a late RViz gets the last one
        assert topics[name]["Durability Policy"] == "Transient Local"
    tools = [t for t in view["Visualization Manager"]["Tools"] if "Topic" in t]
    assert tools[0]["Topic"]["Value"] == "/initialpose"


def test_the_launch_file_passes_the_map_and_the_remappings(monkeypatch) -> None:
    description = launch_description(monkeypatch, LAUNCH_FILE)
    node = _node_for(description, map_path="/maps/floor.npz", mag_topic="/imu/mag")
    assert node.kwargs["executable"] == "gp_localizer_node"
    assert node.kwargs["parameters"][1] == {"use_sim_time": False, "map_path": "/maps/floor.npz"}
    remaps = dict((a, b.name) for a, b in node.kwargs["remappings"])
    assert remaps == {"mag": "mag_topic", "odom": "odom_topic"}
    assert "map_path" not in _node_for(description).kwargs["parameters"][1]
