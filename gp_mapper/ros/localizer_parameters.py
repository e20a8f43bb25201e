"""The localizer's parameters: declared from its table, the deprecated names, and the guard
that validates every change while the node runs.

``LOCALIZER_PARAMETERS`` (``gp_mapper.mapping.localization.settings``) declares one parameter
per row, as the mapper's table does (``gp_mapper.ros.parameters``). The names of an earlier
release (``DEPRECATED_NAMES``: ``initial_pose_x`` ...) are declared typed but unset and
read-only: set from a YAML or ``-p``, each is read in place of its new name with a warning;
they go in the next release.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

from gp_mapper.mapping.localization import LocalizerConfig
from gp_mapper.mapping.localization.settings import (
    DEPRECATED_NAMES,
    LOCALIZER_PARAMETERS,
    PARAMETER_BY_NAME,
)
from gp_mapper.ros.parameters import declare_parameters, read_values


def declare_localizer_parameters(node: Node) -> None:
    """Declare every row of the table, and each deprecated name typed like its replacement.

    Raises:
        rclpy.exceptions.InvalidParameterValueException: an override is out of range.
        rclpy.exceptions.InvalidParameterTypeException: an override has the wrong type.
    """
    declare_parameters(node, LOCALIZER_PARAMETERS)
    for old, new in DEPRECATED_NAMES.items():
        kind = node.get_parameter(new).type_
        descriptor = ParameterDescriptor(
            description=f"deprecated: use {new} (read in its place when set)", read_only=True
        )
        node.declare_parameter(old, kind, descriptor)


def read_localizer_values(node: Node) -> tuple[dict[str, Any], list[str]]:
    """The value of every row, the deprecated names that are set mapped onto the new ones,
    and a warning for each of those.

    A deprecated name is read when its new name is at its default; when both are set the
    new one wins and the warning says the old one is ignored.
    """
    values = read_values(node, LOCALIZER_PARAMETERS)
    warnings = []
    for old, new in DEPRECATED_NAMES.items():
        try:
            value = node.get_parameter(old).value
        except ParameterUninitializedException:
            continue
        if value is None:
            continue
        if values[new] != PARAMETER_BY_NAME[new].default:
            warnings.append(f"parameter {old} is deprecated and ignored: {new} is set")
            continue
        values[new] = value
        warnings.append(
            f"parameter {old} is deprecated (removed in the next release): use {new}; read "
            f"as {new} = {value}"
        )
    return values, warnings


class LocalizerParameterGuard:
    """On-set-parameters callback: refuse a change the filter would refuse, with its reason.

    rclpy refuses wrong types, out-of-range numbers and read-only parameters itself; this adds
    each row's own check (choices) and the settings together (``min_particles`` above
    ``max_particles``), against the node's current values.
    """

    def __init__(self, node: Node) -> None:
        self._node = node

    def check(self, params: Sequence[Parameter]) -> str | None:
        """The reason ``params`` are refused, or None if they are acceptable."""
        changes: dict[str, Any] = {}
        for param in params:
            info = PARAMETER_BY_NAME.get(param.name)
            if info is None:
                continue  # use_sim_time, the deprecated names (read-only)
            try:
                changes[param.name] = info.check(param.value)
            except ValueError as err:
                return str(err)
        if not changes:
            return None
        try:
            LocalizerConfig.from_values({**read_values(self._node, LOCALIZER_PARAMETERS),
                                         **changes})  # fmt: skip
        except ValueError as err:
            return str(err)
        return None

    def __call__(self, params: list[Parameter]) -> SetParametersResult:
        reason = self.check(params)
        return SetParametersResult(successful=reason is None, reason=reason or "")
