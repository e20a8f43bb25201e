"""Read a ROS 2 parameters YAML (``node: {ros__parameters: {...}}``) into a MapperConfig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gp_mapper.mapping import MapperConfig
from gp_mapper.mapping.errors import ConfigError

NODE_NAME = "gp_mapper"
# ROS-wide parameters a node accepts that are not the mapper's own.
ROS_ONLY_PARAMETERS = frozenset({"use_sim_time"})


def load_params_file(path: str | Path, node_name: str = NODE_NAME) -> dict[str, Any]:
    """The flat parameters for ``node_name`` (or ``/**``) in a ROS 2 parameters file.

    Raises:
        ConfigError: the file is missing, is not YAML, or has no parameters for the node.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read parameters file {path}: {err}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping of node names, got {type(doc).__name__}")
    merged: dict[str, Any] = {}
    for key in ("/**", node_name, f"/{node_name}"):
        section = doc.get(key)
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            merged.update(section["ros__parameters"])
    if not merged and doc:
        raise ConfigError(
            f"{path}: no 'ros__parameters' for node {node_name!r} (sections: {sorted(doc)})"
        )
    return {k: v for k, v in merged.items() if k not in ROS_ONLY_PARAMETERS}


def config_from_params_file(path: str | Path | None, **overrides: Any) -> MapperConfig:
    """A MapperConfig from a parameters file (defaults if None) with flat overrides on top."""
    values = load_params_file(path) if path is not None else {}
    if isinstance(values.get("bounds"), list) and not values["bounds"]:
        values["bounds"] = None
    values.update(overrides)
    return MapperConfig.from_dict(values)
