"""The models by name: how to build each from a spec and how to rebuild it from a saved state.

The name is the key a model's ``state_dict()`` stores under ``"model"``; a map file is read back
by the model that wrote it, and refused with a clear message by any other. States written
before the key existed are the streaming model's (``vips``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from .errors import StateError
from .model import ModelKind

if TYPE_CHECKING:
    from .cost import FitCost
    from .model import Model
    from .spec import EngineSpec

# The model of a state saved before models had names.
LEGACY_MODEL = "vips"


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
            ``components``; any other model refuses them.
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


# Each model: its kind and the package that holds it (its settings in ``settings.py``, its
# builder and entry in ``entry.py``: ``entry(name)``): a package of the engine by name, or
# any package by its dotted path. Listing them imports no model; adding a model is its package
# and one line here. The packages' order is the settings table's.
_MODELS: dict[str, tuple[ModelKind, str]] = {
    "vips": ("streaming", "vips"),
    "potential": ("streaming", "potential"),
    "exact": ("batch", "exact"),
    "acgp": ("batch", "acgp"),
    "solvegp": ("batch", "solvegp"),
    "cagp": ("batch", "cagp"),
    "cagp_cg": ("batch", "cagp"),
    "gam": ("batch", "gam"),
    "gam_stream": ("streaming", "gam"),
}


def model_kind(name: str) -> ModelKind:
    """ "streaming" or "batch" (for a registered name)."""
    return _MODELS[name][0]


def model_names(kind: ModelKind | None = None) -> tuple[str, ...]:
    """Registered names, of one kind or all (no model is imported)."""
    return tuple(name for name, (k, _) in _MODELS.items() if kind is None or k == kind)


def _package_path(package: str) -> str:
    """A package of the engine by its name (``acgp``), or any package by its dotted path."""
    return package if "." in package else f"gp_mapper.engine.{package}"


def model_packages() -> tuple[str, ...]:
    """The model packages' import paths, each once, in the table's order."""
    return tuple(dict.fromkeys(_package_path(package) for _, package in _MODELS.values()))


def model_entry(name: str) -> ModelEntry:
    """The entry of a registered model.

    Raises:
        ValueError: no model of that name (the message lists the registered ones).
    """
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; registered: {', '.join(_MODELS)}")
    return import_module(f"{_package_path(_MODELS[name][1])}.entry").entry(name)


def saved_model_name(state: Mapping[str, Any]) -> str:
    """The model a state was saved by (``vips`` for states from before models had names).

    Raises:
        StateError: the key is there but is not a string.
    """
    if "model" not in state:
        return LEGACY_MODEL
    value = np.asarray(state["model"])
    if value.shape != () or value.dtype.kind not in "US":
        raise StateError(f"the saved model name must be a string; got {value!r}")
    return str(value)
