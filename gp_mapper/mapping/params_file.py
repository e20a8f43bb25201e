"""The node's parameter file: read a ROS 2 parameters YAML (``node: {ros__parameters: {...}}``)
into a MapperConfig, ``NAME=VALUE`` overrides, and the ``theta.yaml`` a fit writes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gp_mapper.mapping.config import PARAMETER_BY_NAME, MapperConfig
from gp_mapper.mapping.errors import ConfigError

NODE_NAME = "gp_mapper"
# ROS-wide parameters a node accepts that are not the mapper's own.
ROS_ONLY_PARAMETERS = frozenset({"use_sim_time"})
# The node's parameters that hold θ, written to theta.yaml, by the hyperparameter's name.
THETA_PARAMETERS = {"kernel": "kernel", "constant_variance": "constant_variance",
                    "kernel_variance": "kernel_variance", "lengthscale": "lengthscale",
                    "noise_variance": "noise_variance",
                    "pass_noise_variance": "vips.pass_noise_variance"}  # fmt: skip


def flat_parameters(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameters as ROS reads them: ``{vips: {delta: 0.1}}`` -> ``{"vips.delta": 0.1}``.

    Raises:
        ConfigError: a name given twice (nested and dotted).
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        items = flat_parameters(value, f"{name}.") if isinstance(value, dict) else {name: value}
        for k, v in items.items():
            if k in out:
                raise ConfigError(f"parameter {k} is given twice")
            out[k] = v
    return out


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
            merged.update(flat_parameters(section["ros__parameters"]))
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


def parse_overrides(items: list[str]) -> dict[str, object]:
    """``NAME=VALUE`` strings to typed values (YAML scalars: 0.1, true, vips).

    Raises:
        ConfigError: an item without ``=`` or a name.
    """
    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
        out[name.strip()] = yaml.safe_load(value)
    return out


def theta_yaml(hyperparameters: dict[str, Any]) -> str:
    """A ``gp_mapper`` parameter file holding θ, every value inside the node's ranges.

    The node adds ``vips.pass_noise_variance`` to the ``noise_variance`` it fits, so the file
    splits the fitted whole the same way: the model's own pass noise and the rest, or, for a
    model without one, all of it as white noise and no pass noise. A node given the file
    starts from the fit's θ exactly, whatever its defaults.
    """
    hyperparameters = dict(hyperparameters)
    if "noise_variance" in hyperparameters:
        pass_noise = float(hyperparameters.get("pass_noise_variance", 0.0))
        hyperparameters["noise_variance"] = float(hyperparameters["noise_variance"]) - pass_noise
        hyperparameters["pass_noise_variance"] = pass_noise
    lines = [
        "# Hyperparameters fitted by gp-mapper fit; the node takes this file as",
        "#   gp_mapper_node --ros-args --params-file theta.yaml",
        "#   ros2 launch gp_mapper gp_mapper.launch.py params_file:=theta.yaml",
        # Any node name and namespace, as config/gp_mapper.yaml: a namespaced node finds it.
        "/**:",
        "  ros__parameters:",
    ]
    nested = []
    for theta_name, name in THETA_PARAMETERS.items():
        if theta_name not in hyperparameters:
            continue
        value = hyperparameters[theta_name]
        info = PARAMETER_BY_NAME[name]
        note = ""
        if isinstance(value, list):  # ARD: the node takes one initial lengthscale
            value = float(math.exp(np.mean(np.log(value))))
            note = "  # geometric mean of the fitted ARD lengthscales"
        if isinstance(value, float):
            clipped = min(max(value, info.min), info.max)
            if clipped != value:
                note = f"  # fitted {value:.6g}, clipped to the node's range"
            value = clipped
            text = f"{value!r}{note}"
        else:
            text = f'"{value}"{note}'
        namespace, _, key = name.rpartition(".")
        if namespace:  # a model's own parameter, nested as a ROS parameter file nests it
            nested.append(f"    {namespace}:\n      {key}: {text}")
        else:
            lines.append(f"    {name}: {text}")
    return "\n".join(lines + nested) + "\n"
