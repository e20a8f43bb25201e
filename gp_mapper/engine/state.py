"""Pieces every model's ``state_dict``/``from_state`` share: raw parameters in and out, and θ in
the node's parameter names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from .core.hyperparameters import node_hyperparameters
from .core.kernels import Kernel
from .errors import StateError
from .model import Hyperparameters


class StateSetting(NamedTuple):
    """A constructor setting a state keeps (the batch models' ``STATE_SETTINGS``, the
    stream's ``OnlineSparseGP.STATE_SETTINGS``).

    Attributes:
        name: the constructor's keyword.
        kind: the type it is read back as (int, float, bool or str).
        key: the state's field (default: ``name``).
        attr: where the model holds it, dotted (default: ``name``).
        none: the value that stands for None in the state (None: never None).
        missing: read when an older state lacks the field (None: required).
    """

    name: str
    kind: type
    key: str | None = None
    attr: str | None = None
    none: Any = None
    missing: Any = None

    @property
    def field(self) -> str:
        return self.key or self.name

    def read_from(self, model: object) -> Any:
        value = model
        for part in (self.attr or self.name).split("."):
            value = getattr(value, part)
        return self.none if value is None and self.none is not None else value

    def parse(self, state: Mapping[str, Any]) -> Any:
        if self.field not in state and self.missing is not None:
            return self.missing
        value = self.kind(np.asarray(state[self.field]).item())
        return None if self.none is not None and value == self.none else value


def raw_parameters(module: nn.Module) -> dict[str, np.ndarray]:
    """Every raw (unconstrained) parameter of a kernel or noise module, by its torch name."""
    return {name: p.detach().cpu().numpy() for name, p in module.named_parameters()}


def load_raw_parameters(
    module: nn.Module,
    state: Mapping[str, Any],
    prefix: str,
    dtype: torch.dtype,
    device: torch.device,
) -> None:
    """Copy ``state[prefix + name]`` into each raw parameter, bit for bit; frozen afterwards.

    Raises:
        StateError: a field is missing, has another shape, or is not finite.
    """
    with torch.no_grad():
        for name, param in module.named_parameters():
            key = prefix + name
            if key not in state:
                raise StateError(f"state has no field {key!r}")
            value = torch.as_tensor(np.asarray(state[key]), dtype=dtype, device=device)
            if value.shape != param.shape:
                raise StateError(
                    f"{key}: shape {tuple(value.shape)}, expected {tuple(param.shape)}"
                )
            if not torch.isfinite(value).all():
                raise StateError(f"state field {key!r} has non-finite values")
            param.copy_(value)
    for p in module.parameters():
        p.requires_grad_(False)


def freeze_parameters(*modules: nn.Module) -> None:
    """Stop gradients to every parameter of the modules (a committed θ is never trained)."""
    for module in modules:
        for p in module.parameters():
            p.requires_grad_(False)


def validate_data(
    X: Tensor | np.ndarray, y: Tensor | np.ndarray, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """X [N, D] and y [N] as tensors of the model's dtype and device, checked.

    Raises:
        ValueError: wrong shapes, no rows, or NaN/inf values (the message says which).
    """
    X_t = torch.as_tensor(X, dtype=dtype, device=device)
    y_t = torch.as_tensor(y, dtype=dtype, device=device)
    if X_t.ndim != 2 or y_t.shape != (X_t.shape[0],):
        raise ValueError(
            f"expected X [N, D] and y [N]; got {tuple(X_t.shape)} and {tuple(y_t.shape)}"
        )
    if X_t.shape[0] == 0:
        raise ValueError("no data: X and y have no rows")
    if not torch.isfinite(X_t).all():
        raise ValueError(f"X has {int((~torch.isfinite(X_t)).any(1).sum())} rows with NaN/inf")
    if not torch.isfinite(y_t).all():
        raise ValueError(f"y has {int((~torch.isfinite(y_t)).sum())} NaN/inf values")
    return X_t, y_t


def describe_hyperparameters(kernel: Kernel, noise_variance: float) -> Hyperparameters:
    """θ in the node's parameter names where the kernel has that flat form
    (``core.node_hyperparameters``), else by the kernel's own parameter names."""
    try:
        return dict(node_hyperparameters(kernel, noise_variance))
    except ValueError:  # no flat form (a GAM's components, a product)
        return {**kernel.describe(), "noise_variance": float(noise_variance)}
