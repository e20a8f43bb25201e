"""Parameter declarations from the PARAMETERS table, the guard, and config/gp_mapper.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rcl_interfaces.msg import ParameterType
from rclpy.context import Context
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from gp_mapper.mapping.config import PARAMETER_BY_NAME, PARAMETERS, MapperConfig
from gp_mapper.mapping.params_file import flat_parameters
from gp_mapper.ros.parameters import (
    ParameterGuard,
    declare_parameters,
    deprecated_names,
    descriptor_for,
    read_config,
    read_values,
)

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
YAML_PATH = REPO / "config" / "gp_mapper.yaml"
# The shipped YAML's top-level key: every node name, every namespace.
ANY_NODE = "/**"


def test_descriptors_carry_type_range_choices_and_read_only() -> None:
    res = descriptor_for(PARAMETER_BY_NAME["resolution"])
    assert res.type == ParameterType.PARAMETER_DOUBLE
    assert (res.floating_point_range[0].from_value, res.floating_point_range[0].to_value) == (
        0.01,
        5.0,
    )
    assert not res.integer_range and not res.read_only
    assert "[m]" in res.description and res.additional_constraints == "in [0.01, 5]"

    batch = descriptor_for(PARAMETER_BY_NAME["batch_size"])
    assert batch.type == ParameterType.PARAMETER_INTEGER
    assert (batch.integer_range[0].from_value, batch.integer_range[0].to_value) == (1, 10000)
    assert not batch.floating_point_range

    frame = descriptor_for(PARAMETER_BY_NAME["map_frame"])
    assert frame.read_only and frame.type == ParameterType.PARAMETER_STRING

    pose_type = descriptor_for(PARAMETER_BY_NAME["pose_type"])
    assert "pose_with_covariance" in pose_type.additional_constraints and pose_type.read_only

    bounds = descriptor_for(PARAMETER_BY_NAME["bounds"])
    assert bounds.type == ParameterType.PARAMETER_DOUBLE_ARRAY


def test_every_row_declares_and_reads_back_its_default(ros_context: Context) -> None:
    node = Node("param_probe", context=ros_context)
    try:
        declare_parameters(node)
        values = read_values(node)
        assert set(values) == {p.name for p in PARAMETERS}
        for info in PARAMETERS:
            assert values[info.name] == info.default, info.name
            assert node.describe_parameter(info.name).read_only == info.read_only
        assert read_config(node) == MapperConfig()
    finally:
        node.destroy_node()


def test_guard_refuses_with_the_tables_reason(ros_context: Context) -> None:
    node = Node("guard_probe", context=ros_context)
    try:
        declare_parameters(node)
        node.add_on_set_parameters_callback(ParameterGuard(node))
        bad = {
            "vips.selector": ("best", "selector must be one of"),
            "device": ("cuda:0", "read-only"),
            "bounds": ([0.0, 1.0, 3.0, 2.0], "ymin < ymax"),
            "resolution": (0.0, "out of range"),
            "input_dims": (3, "read-only"),
        }
        for name, (value, reason) in bad.items():
            (result,) = node.set_parameters([Parameter(name, value=value)])
            assert not result.successful and reason in result.reason, (name, result.reason)
        (ok,) = node.set_parameters([Parameter("bounds", value=[0.0, 1.0, 2.0, 3.0])])
        assert ok.successful
        assert read_config(node).bounds == (0.0, 1.0, 2.0, 3.0)
        # several at once: checked together, applied together
        results = node.set_parameters_atomically(
            [Parameter("vips.selector", value="fixed"), Parameter("vips.fixed_size", value=7)]
        )
        assert results.successful
        assert read_config(node).engine.get("vips.fixed_size") == 7
        refused = node.set_parameters_atomically(
            [Parameter("vips.fixed_size", value=9), Parameter("vips.selector", value="best")]
        )
        assert not refused.successful and "selector" in refused.reason
        assert read_config(node).engine.get("vips.fixed_size") == 7
    finally:
        node.destroy_node()


def test_a_number_or_auto_parameter_takes_both_and_refuses_the_rest(ros_context: Context) -> None:
    node = Node("auto_probe", context=ros_context, parameter_overrides=[
        Parameter("vips.pass_noise_variance", value=1.5),
    ])  # fmt: skip
    try:
        declare_parameters(node)
        node.add_on_set_parameters_callback(ParameterGuard(node))
        assert read_config(node).engine.get("vips.pass_noise_variance") == 1.5  # a YAML number
        (ok,) = node.set_parameters([Parameter("vips.pass_noise_variance", value="auto")])
        assert ok.successful and read_config(node).pass_noise_auto
        for value, reason in (("automatic", "'auto' or a number"), (-1.0, "pass_noise_variance")):
            (result,) = node.set_parameters([Parameter("vips.pass_noise_variance", value=value)])
            assert not result.successful and reason in result.reason, result.reason
        assert read_config(node).pass_noise_auto
    finally:
        node.destroy_node()


def test_out_of_range_override_is_refused_at_declaration(ros_context: Context) -> None:
    node = Node(
        "override_probe",
        context=ros_context,
        parameter_overrides=[Parameter("max_pose_gap", value=99.0)],
    )
    try:
        with pytest.raises(InvalidParameterValueException, match="max_pose_gap"):
            declare_parameters(node)
    finally:
        node.destroy_node()


def test_yaml_lists_every_parameter_at_its_default() -> None:
    doc = yaml.safe_load(YAML_PATH.read_text())
    assert list(doc) == [ANY_NODE]
    params = flat_parameters(doc[ANY_NODE]["ros__parameters"])  # nested as ROS nests them
    text = YAML_PATH.read_text()
    for info in PARAMETERS:
        if info.default is None:
            assert f"# {info.name.rpartition('.')[2]}:" in text, info.name  # commented out
            assert info.name not in params
            continue
        assert params[info.name] == info.default, info.name
        assert type(params[info.name]) is type(info.default), info.name
    assert set(params) == {p.name for p in PARAMETERS if p.default is not None}


def test_node_starts_from_the_yaml(ros_context: Context) -> None:
    from gp_mapper.ros.node import GpMapperNode

    node = GpMapperNode(
        context=ros_context,
        cli_args=["--ros-args", "--params-file", str(YAML_PATH), "-p", "batch_size:=123"],
    )
    try:
        assert node.pipeline.config == MapperConfig(batch_size=123)
        assert node.get_parameter("map_path").value == "~/.ros/gp_mapper/map.npz"
    finally:
        node.destroy_node()


def _shipped_yaml_with(tmp_path: Path, key: str, **changes: object) -> Path:
    """The shipped YAML, its parameters under ``key`` with some changed."""
    doc = yaml.safe_load(YAML_PATH.read_text())
    params = {**doc[ANY_NODE]["ros__parameters"], **changes}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({key: {"ros__parameters": params}}))
    return path


@pytest.mark.parametrize("namespace", ["/robot1", "/fleet/robot2"])
def test_a_namespaced_node_takes_the_yamls_parameters(
    ros_context: Context, tmp_path: Path, namespace: str
) -> None:
    """What a launch with namespace:=robot1 starts: /robot1/gp_mapper, matched by /**."""
    path = _shipped_yaml_with(tmp_path, ANY_NODE, batch_size=123, pose_source="topic")
    node = Node(
        "gp_mapper",
        namespace=namespace,
        context=ros_context,
        cli_args=["--ros-args", "--params-file", str(path)],
    )
    try:
        assert node.get_fully_qualified_name() == f"{namespace}/gp_mapper"
        declare_parameters(node)
        assert read_config(node) == MapperConfig(batch_size=123, pose_source="topic")
    finally:
        node.destroy_node()


def test_a_node_name_key_misses_the_namespaced_node(ros_context: Context, tmp_path: Path) -> None:
    """Why the shipped file uses /**: rcl matches ``gp_mapper:`` to /gp_mapper only."""
    path = _shipped_yaml_with(tmp_path, "gp_mapper", batch_size=123)
    args = ["--ros-args", "--params-file", str(path)]
    plain = Node("gp_mapper", context=ros_context, cli_args=args)
    spaced = Node("gp_mapper", namespace="/robot1", context=ros_context, cli_args=args)
    try:
        declare_parameters(plain)
        declare_parameters(spaced)
        assert read_config(plain).batch_size == 123
        assert read_config(spaced).batch_size == MapperConfig().batch_size
    finally:
        plain.destroy_node()
        spaced.destroy_node()


def test_a_flat_name_of_the_last_release_is_read_in_its_place_with_a_warning(
    ros_context: Context, tmp_path: Path
) -> None:
    """A YAML of the last release (``delta``, ``max_inducing``: now ``vips.delta`` ...) still
    maps as it did; each old name is logged, and one whose new name is also set is ignored."""
    path = tmp_path / "old.yaml"
    old = {"delta": 0.05, "max_inducing": 300, "pass_noise_variance": 0.5,
           "cell_size": 0.1, "vips": {"cell_size": 0.4}}  # fmt: skip
    path.write_text(yaml.safe_dump({ANY_NODE: {"ros__parameters": old}}))
    node = Node(
        "gp_mapper", context=ros_context, cli_args=["--ros-args", "--params-file", str(path)]
    )
    try:
        declare_parameters(node)
        config = read_config(node)
        assert config.engine.get("vips.delta") == 0.05
        assert config.engine.get("vips.max_inducing") == 300
        assert config.engine.get("vips.pass_noise_variance") == 0.5
        assert config.engine.get("vips.cell_size") == 0.4  # the new name wins
        warnings = deprecated_names(node)
        assert any("delta is deprecated" in w and "vips.delta" in w for w in warnings)
        assert any("cell_size is deprecated and ignored" in w for w in warnings)
        assert len(warnings) == 4
        assert node.describe_parameter("delta").read_only
    finally:
        node.destroy_node()
