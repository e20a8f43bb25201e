"""Every setting of every model, declared once: name, default, type, range, unit, which models.

This table is the one source of the engine's defaults and ranges. ``EngineSpec`` takes its
defaults from it, the selectors and models check their arguments against it, and the node's
parameter table (``gp_mapper.mapping.config.PARAMETERS``) is built from it, so a value the node
accepts is a value the engine accepts. Settings of one model live in that model's subpackage
(``vips/settings.py``, ``acgp/settings.py``), read here in the registry's order; the shared ones
(kernel, noise, numerics) are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from ..registry import model_names, model_packages
from .setting import Setting

# The models the node runs (their kinds are the registry's; listing them imports no model).
STREAMING_MODELS = model_names("streaming")

# The shared settings. Defaults are the magnetometer model of Pescador-Barrios et al. 2024
# (Sec. 5.4, App. D.4).
COMMON_SETTINGS: tuple[Setting, ...] = (
    Setting("model", "vips", "str",
            "the model: vips = the streaming sparse GP (the node's); potential = the "
            "three-axis curl-free field, streamed by VIPS (needs target: vector); gam_stream = "
            "the additive map (components) streamed by VIPS; exact, acgp, "
            "solvegp, cagp, cagp_cg, gam = batch models for gp-mapper fit",
            pattern=r"[a-z][a-z0-9_]*", rule="a registered model (gp_mapper.engine.registry)",
            read_only=True),
    Setting("kernel", "matern52", "str", "stationary kernel added to the constant",
            choices=("matern52", "matern32", "se"), read_only=True),
    Setting("constant_variance", 500.0, "float",
            "initial variance of the constant kernel (absorbs the ~48 µT mean) [µT²]; 0 = off",
            min=0.0, max=1.0e6),
    Setting("kernel_variance", 1.0, "float", "initial stationary kernel variance [µT²]",
            min=1.0e-6, max=1.0e6),
    Setting("lengthscale", 1.0, "float", "initial kernel lengthscale [m]",
            min=1.0e-3, max=1.0e3),
    Setting("ard", False, "bool", "one lengthscale per input dimension", read_only=True),
    Setting("noise_variance", 0.1, "float", "initial observation noise variance [µT²]",
            min=1.0e-6, max=1.0e4),
    Setting("fit_iterations", 100, "int",
            "L-BFGS iterations of the hyperparameter fit (per update for vips); 0 = keep them "
            "fixed",
            min=0, max=10000),
    Setting("jitter", 1.0e-8, "float",
            "first jitter added to a kernel matrix before its Cholesky (larger ones follow on "
            "failure): times the mean kernel variance when jitter_relative, else in µT²",
            min=0.0, max=1.0, read_only=True),
    Setting("jitter_relative", True, "bool",
            "scale the jitter by the mean kernel variance (false: absolute, the convention "
            "of the VIPS authors' code)",
            read_only=True),
    Setting("device", "auto", "str", "torch device: auto, cpu, cuda or cuda:N",
            pattern=r"auto|cpu|cuda(:[0-9]+)?", read_only=True),
    Setting("dtype", "float64", "str", "engine floating-point type",
            choices=("float64", "float32"), read_only=True),
)  # fmt: skip


def _package_settings(package: str) -> tuple[Setting, ...]:
    """A model package's ``settings.SETTINGS``; () for a package without settings of its own."""
    name = f"{package}.settings"
    try:
        return tuple(import_module(name).SETTINGS)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return ()


# The shared settings, then each model package's, in the registry's order.
ENGINE_SETTINGS: tuple[Setting, ...] = COMMON_SETTINGS + tuple(
    s for package in model_packages() for s in _package_settings(package)
)
SETTING_BY_NAME: Mapping[str, Setting] = {s.name: s for s in ENGINE_SETTINGS}


def default(name: str) -> Any:
    """The default of a setting (``EngineSpec`` and the models' constructors use this)."""
    return SETTING_BY_NAME[name].default


def check(name: str, value: Any) -> Any:
    """``value`` if the setting ``name`` allows it, else ValueError naming both."""
    return SETTING_BY_NAME[name].check(value)


def node_settings() -> tuple[Setting, ...]:
    """The settings the node declares: the shared ones and those of its streaming models."""
    out = []
    for s in ENGINE_SETTINGS:
        if s.name == "model":  # the node runs a streaming model; batch ones are for `fit`
            out.append(s._replace(choices=STREAMING_MODELS, pattern=None, rule=""))
        elif not s.models or any(m in STREAMING_MODELS for m in s.models):
            out.append(s)
    return tuple(out)
