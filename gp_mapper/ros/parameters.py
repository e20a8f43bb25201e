"""Declare the node's parameters from the PARAMETERS table and guard changes to them.

Each ``Setting`` (gp_mapper.mapping.config) becomes one declared parameter with a
``ParameterDescriptor``: its description, the allowed values as ``additional_constraints``,
an ``IntegerRange``/``FloatingPointRange`` where it has min and max (rclpy then refuses
out-of-range values itself), and ``read_only`` for frames, topics and what the map holds.
``ParameterGuard`` is the on-set-parameters callback: it checks each new value against its
row (choices, pattern, array shape) and the whole configuration with
``MapperConfig.from_dict``, and refuses with the reason.

``bounds`` (``float_array``, default None) is declared as a statically typed double array
without a value: rclpy cannot declare an empty array (``[]`` infers BYTE_ARRAY) and a YAML
``bounds: []`` loads as "not set". Not set means "explored box + margin".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

from gp_mapper.engine.settings import Setting
from gp_mapper.mapping.config import PARAMETERS, MapperConfig, validate
from gp_mapper.mapping.errors import ConfigError

# Setting.type -> the rclpy parameter type it is declared with.
ROS_TYPES: Mapping[str, Parameter.Type] = {
    "bool": Parameter.Type.BOOL,
    "int": Parameter.Type.INTEGER,
    "float": Parameter.Type.DOUBLE,
    "str": Parameter.Type.STRING,
    "float_array": Parameter.Type.DOUBLE_ARRAY,
}


def descriptor_for(info: Setting) -> ParameterDescriptor:
    """The ROS descriptor of one table row (range only where both min and max exist).

    A ``float_or_auto`` row ("auto" or a number) is declared dynamically typed: its value is a
    string or a double, and ``ParameterGuard`` checks it against the row.

    Raises:
        ValueError: the row's type is not one of ``ROS_TYPES``.
    """
    if info.type == "float_or_auto":
        return ParameterDescriptor(
            name=info.name,
            description=info.description,
            additional_constraints=info.allowed(),
            read_only=info.read_only,
            dynamic_typing=True,
        )
    if info.type not in ROS_TYPES:
        raise ValueError(f"{info.name}: no ROS type for {info.type!r}")
    desc = ParameterDescriptor(
        name=info.name,
        type=ROS_TYPES[info.type].value,
        description=info.description,
        additional_constraints=info.allowed(),
        read_only=info.read_only,
    )
    if info.min is not None and info.max is not None:
        if info.type == "int":
            desc.integer_range = [
                IntegerRange(from_value=int(info.min), to_value=int(info.max), step=0)
            ]
        elif info.type == "float":
            desc.floating_point_range = [
                FloatingPointRange(from_value=float(info.min), to_value=float(info.max), step=0.0)
            ]
    return desc


def _ros_default(info: Setting) -> Any:
    if info.default is None:
        # Declared typed but unset (see the module docstring).
        return ROS_TYPES[info.type]
    if info.type == "float_array":
        return [float(v) for v in info.default]  # type: ignore[union-attr]
    if info.type == "float" or (info.type == "float_or_auto" and info.default != "auto"):
        return float(info.default)  # type: ignore[arg-type]
    return info.default


def declare_parameters(node: Node, table: Iterable[Setting] = PARAMETERS) -> None:
    """Declare every row of ``table`` on ``node`` (overrides from --params-file/-p apply).

    Raises:
        rclpy.exceptions.InvalidParameterValueException: an override is out of range.
        rclpy.exceptions.InvalidParameterTypeException: an override has the wrong type
            (e.g. ``5`` for a float parameter: write ``5.0``).
    """
    table = tuple(table)
    for info in table:
        node.declare_parameter(info.name, _ros_default(info), descriptor_for(info))
    for info in table:
        if info.legacy:  # the flat name of an earlier release: typed, unset, read-only
            descriptor = ParameterDescriptor(
                description=f"deprecated: use {info.name} (read in its place when set)",
                read_only=True,
                dynamic_typing=info.type == "float_or_auto",
            )
            kind = None if info.type == "float_or_auto" else ROS_TYPES[info.type]
            node.declare_parameter(info.legacy, kind, descriptor)


def from_ros(info: Setting, value: Any) -> Any:
    """A ROS parameter value -> the value ``MapperConfig`` takes (arrays as tuples)."""
    if info.type == "float_array":
        return None if value is None or len(value) == 0 else tuple(float(v) for v in value)
    return value


def _value(node: Node, name: str) -> Any:
    try:
        return node.get_parameter(name).value
    except ParameterUninitializedException:
        return None


def _legacy_value(node: Node, info: Setting) -> Any:
    """The value set on the row's flat name of an earlier release; None where none is."""
    return _value(node, info.legacy) if info.legacy and node.has_parameter(info.legacy) else None


def read_values(node: Node, table: Iterable[Setting] = PARAMETERS) -> dict[str, Any]:
    """The current values of every row of ``table``; unset arrays read as None. A row's flat
    name of an earlier release, where set, is read in its place while the row is at its
    default (``deprecated_names`` says which)."""
    values: dict[str, Any] = {}
    for info in table:
        values[info.name] = from_ros(info, _value(node, info.name))
        old = _legacy_value(node, info)
        if old is not None and values[info.name] == info.default:
            values[info.name] = from_ros(info, old)
    return values


def deprecated_names(node: Node, table: Iterable[Setting] = PARAMETERS) -> list[str]:
    """A warning for each flat name of an earlier release that is set on ``node``."""
    out = []
    for info in table:
        old = _legacy_value(node, info)
        if old is None:
            continue
        if from_ros(info, _value(node, info.name)) != info.default:
            out.append(f"parameter {info.legacy} is deprecated and ignored: {info.name} is set")
        else:
            out.append(
                f"parameter {info.legacy} is deprecated (removed in the next release): use "
                f"{info.name}; read as {info.name} = {old}"
            )
    return out


def read_config(node: Node) -> MapperConfig:
    """A validated MapperConfig from the node's parameters; each deprecated name that is set
    is logged as a warning.

    Raises:
        ConfigError: the combination is invalid; the message names the parameter.
    """
    for warning in deprecated_names(node):
        node.get_logger().warning(warning)
    return MapperConfig.from_dict(read_values(node))


class ParameterGuard:
    """On-set-parameters callback: refuse any change that would give an invalid config.

    rclpy itself refuses wrong types, out-of-range numbers and read-only parameters; this
    adds choices, patterns, array shapes and cross-parameter checks (e.g. bounds order),
    each refusal carrying the reason from the table.

    Args:
        node: the node whose current values complete each proposed change.
        table: the parameter rows; parameters not in it (use_sim_time) pass through.
    """

    def __init__(self, node: Node, table: Sequence[Setting] = PARAMETERS) -> None:
        self._node = node
        self._table = {info.name: info for info in table}

    def check(self, params: Sequence[Parameter]) -> str | None:
        """The reason ``params`` are refused, or None if they are acceptable."""
        changes: dict[str, Any] = {}
        for param in params:
            info = self._table.get(param.name)
            if info is None:
                continue
            try:
                changes[param.name] = validate(info, from_ros(info, param.value))
            except ConfigError as err:
                return str(err)
        if not changes:
            return None
        try:
            MapperConfig.from_dict({**read_values(self._node, self._table.values()), **changes})
        except ConfigError as err:
            return str(err)
        return None

    def __call__(self, params: list[Parameter]) -> SetParametersResult:
        reason = self.check(params)
        return SetParametersResult(successful=reason is None, reason=reason or "")
