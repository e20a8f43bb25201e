"""Rebuild whichever model saved a state: a model's own or a tiled map of that model.

Apart from the registry so that the registry imports no model and the tiled map, which reads
the registry, imports it at the top."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .errors import StateError
from .model import Model
from .registry import model_entry, saved_model_name
from .tiled import TiledModel, is_tiled_state


def model_from_state(
    state: Mapping[str, Any], device: str | torch.device = "auto", expected: str | None = None
) -> Model:
    """Rebuild whichever model saved ``state``.

    Args:
        state: a ``state_dict()`` (or ``np.load`` of one).
        device: where to put it.
        expected: if given, the state must be this model's.

    Raises:
        StateError: the state names another model than ``expected``, an unknown model, or is
            malformed (the model's own ``from_state`` says how).
    """
    name = saved_model_name(state)
    if expected is not None and name != expected:
        raise StateError(f"the state holds a {name!r} model; expected a {expected!r} model")
    try:
        entry = model_entry(name)
    except ValueError as err:
        raise StateError(str(err)) from err
    if is_tiled_state(state):  # a tiled map of that model
        return TiledModel.from_state(state, device)
    return entry.from_state(state, device)
