"""The models by name: a model built from its entry, and the model a saved state names.

The name is the key a model's ``state_dict()`` stores under ``"model"``; a map file is read back
by the model that wrote it, and refused with a clear message by any other. States written
before the key existed are the streaming model's (``vips``). The table of models is
``model_table``; this module imports a model's entry only when it is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module, metadata
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import StateError
from .model_table import (
    ModelEntry,
    model_info,
    model_kind,
    model_names,
    model_packages,
    register_model,
    unregister_model,
)

if TYPE_CHECKING:
    from .model import Model
    from .spec import EngineSpec

__all__ = [
    "LEGACY_MODEL",
    "MODELS_GROUP",
    "ModelEntry",
    "build_model",
    "load_installed_models",
    "model_entry",
    "model_kind",
    "model_names",
    "model_packages",
    "register_model",
    "saved_model_name",
    "unregister_model",
]

# The model of a state saved before models had names.
LEGACY_MODEL = "vips"
# The entry-point group an installed package lists its models in: the name is the model's, the
# value its package (``[project.entry-points."gp_mapper.models"] my_gp = "my_pkg.my_gp"``).
MODELS_GROUP = "gp_mapper.models"


def load_installed_models() -> list[str]:
    """Register every model an installed package lists under ``MODELS_GROUP`` (its kind read
    from its entry), as ``gp-mapper`` and the node do at start; a model that cannot be loaded
    is left out, and said so.

    Returns:
        one line per model left out (its name, package and why); [] when all loaded.
    """
    problems = []
    for point in metadata.entry_points(group=MODELS_GROUP):
        try:
            kind = import_module(f"{point.value}.entry").entry(point.name).kind
            register_model(point.name, kind, point.value)
        except Exception as err:  # a broken plugin must not stop the mapper
            problems.append(f"model {point.name!r} ({point.value}) not loaded: {err}")
    return problems


def model_entry(name: str) -> ModelEntry:
    """The entry of a registered model (its package's ``entry.entry(name)``).

    Raises:
        ValueError: no model of that name (the message lists the registered ones).
    """
    return import_module(f"{model_info(name).package}.entry").entry(name)


def build_model(spec: EngineSpec, input_dim: int) -> Model:
    """A fresh model as the spec describes it (dispatched on ``spec.model``)."""
    return model_entry(spec.model).build(spec, input_dim)


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
