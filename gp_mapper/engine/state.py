"""Pieces every model's ``state_dict``/``from_state`` share: raw parameters in and out, and θ in
the node's parameter names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from .core.hyperparameters import node_hyperparameters
from .core.kernels import Kernel
from .errors import StateError
from .model import Hyperparameters


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


def describe_hyperparameters(kernel: Kernel, noise_variance: float) -> Hyperparameters:
    """θ in the node's parameter names where the kernel has that flat form
    (``core.node_hyperparameters``), else by the kernel's own parameter names."""
    try:
        return dict(node_hyperparameters(kernel, noise_variance))
    except ValueError:  # no flat form (a GAM's components, a product)
        return {**kernel.describe(), "noise_variance": float(noise_variance)}
