"""The engine's models by name: each one's kind and the package that holds it, and the record
(``ModelEntry``) a model's package gives to build it and read it back.

A model is a package: its settings in ``settings.py`` (a ``ModelSettings`` class, ``SECTION``),
its builder and entry in ``entry.py`` (``entry(name) -> ModelEntry``). The engine's own models
are listed below; a package outside the engine joins with one call, ``register_model``, and
its settings then join the engine's table (``gp_mapper.engine.settings``), the node's
parameters and ``gp-mapper fit --help``. This module imports no model and no setting: the
settings table, the registry and every model's entry read it, and it reads none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from .model import ModelKind

if TYPE_CHECKING:
    from .cost import FitCost
    from .model import Model
    from .spec import EngineSpec

MODEL_KINDS: tuple[ModelKind, ...] = ("streaming", "batch")
# A model's name is a parameter value and a key in saved maps.
MODEL_NAME_PATTERN = r"[a-z][a-z0-9_]*"


class ModelEntry(NamedTuple):
    """One registered model.

    Attributes:
        name: the key in specs, parameter files and saved states.
        kind: "streaming" (``update`` per window) or "batch" (``fit`` on a whole log).
        summary: one line for ``--help`` and errors.
        build: a fresh model from a spec and the input dimension.
        from_state: the model rebuilt from its ``state_dict()``.
        exact_settings: settings (for N data points) under which the model's posterior is the
            exact GP's on all the data at fixed θ; the contract tests check it.
        to_streaming: for a batch model whose posterior the streaming model can carry on
            (SOLVE-GP), the fitted model and the spec (its streaming settings: the node's) to
            a streaming model's state; None otherwise.
        target: "scalar" (y [N]: ‖B‖ or one component) or "vector" (y [N, 3]: the field in
            map_frame; the posterior also has ``predict_field``).
        support_label: what the posterior's support is (the PNG's legend and title).
        takes_components: the model removes nuisance components (heading, run, drift) given in
            ``gam.components``; any other model refuses them.
        dense_points: for a fit that factors a dense kernel matrix over the data, how many
            points it spans for N samples under a spec (the memory check); None otherwise.
        fit_cost: for a batch model, the work of a fit of N samples under a spec (``cost.py``:
            the time estimate a fit prints, and refuses past its budget); None: no estimate.
    """

    name: str
    kind: ModelKind
    summary: str
    build: Callable[[EngineSpec, int], Model]
    from_state: Callable[[Mapping[str, Any], str | torch.device], Model]
    exact_settings: Callable[[int], dict[str, Any]]
    to_streaming: Callable[[Any, EngineSpec], dict[str, np.ndarray]] | None = None
    target: str = "scalar"
    support_label: str = "inducing points"
    takes_components: bool = False
    dense_points: Callable[[EngineSpec, int], int] | None = None
    fit_cost: Callable[[EngineSpec, int], FitCost] | None = None


class ModelInfo(NamedTuple):
    """One model of the table: its name, its kind and the dotted path of its package."""

    name: str
    kind: ModelKind
    package: str


# The engine's models, in the settings table's order (listing them imports no model).
_MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        ModelInfo("vips", "streaming", "gp_mapper.engine.vips"),
        ModelInfo("potential", "streaming", "gp_mapper.engine.potential"),
        ModelInfo("exact", "batch", "gp_mapper.engine.exact"),
        ModelInfo("acgp", "batch", "gp_mapper.engine.acgp"),
        ModelInfo("solvegp", "batch", "gp_mapper.engine.solvegp"),
        ModelInfo("cagp", "batch", "gp_mapper.engine.cagp"),
        ModelInfo("cagp_cg", "batch", "gp_mapper.engine.cagp"),
        ModelInfo("gam", "batch", "gp_mapper.engine.gam"),
        ModelInfo("gam_stream", "streaming", "gp_mapper.engine.gam"),
    )
}
# Bumped by every change of the table, so that what is derived from it (the settings table)
# is derived again.
_version = 0


def register_model(name: str, kind: ModelKind, package: str) -> None:
    """Add a model to the engine: ``package`` (a dotted import path) holds ``entry.py`` with
    ``entry(name) -> ModelEntry`` and, optionally, ``settings.py`` with its settings class
    ``SECTION`` (a ``ModelSettings``). Nothing is imported until the model or the settings
    table is asked for. An installed package lists its models as entry points instead
    (``registry.load_installed_models``).

    Raises:
        ValueError: a bad name, kind or package, or a name already registered with another
            package or kind (registering the same model again is allowed).
    """
    if not re.fullmatch(MODEL_NAME_PATTERN, name):
        raise ValueError(f"a model's name must match {MODEL_NAME_PATTERN}; got {name!r}")
    if kind not in MODEL_KINDS:
        raise ValueError(f"a model's kind must be one of {MODEL_KINDS}; got {kind!r}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", package):
        raise ValueError(f"package must be a dotted import path; got {package!r}")
    info = ModelInfo(name, kind, package)
    known = _MODELS.get(name)
    if known is not None and known != info:
        raise ValueError(f"model {name!r} is already registered as {known.kind} in "
                         f"{known.package}")  # fmt: skip
    global _version
    if known is None:
        _MODELS[name] = info
        _version += 1


def unregister_model(name: str) -> None:
    """Remove a model added with ``register_model`` (the engine's own stay).

    Raises:
        ValueError: an engine model, or a name not registered.
    """
    info = _MODELS.get(name)
    if info is None:
        raise ValueError(f"unknown model {name!r}")
    if info.package.startswith("gp_mapper.engine."):
        raise ValueError(f"model {name!r} is the engine's own and stays")
    global _version
    del _MODELS[name]
    _version += 1


def table_version() -> int:
    """A number that changes whenever the table does."""
    return _version


def model_info(name: str) -> ModelInfo:
    """The table's row of a model.

    Raises:
        ValueError: no model of that name (the message lists the registered ones).
    """
    info = _MODELS.get(name)
    if info is None:
        raise ValueError(f"unknown model {name!r}; registered: {', '.join(_MODELS)}")
    return info


def model_kind(name: str) -> ModelKind:
    """ "streaming" or "batch" (for a registered name)."""
    return model_info(name).kind


def model_names(kind: ModelKind | None = None) -> tuple[str, ...]:
    """Registered names, of one kind or all (no model is imported)."""
    return tuple(name for name, info in _MODELS.items() if kind is None or info.kind == kind)


def model_packages() -> tuple[str, ...]:
    """The model packages' import paths, each once, in the table's order."""
    return tuple(dict.fromkeys(info.package for info in _MODELS.values()))
