"""Positive parameters: unconstrained raw values mapped through a softplus with a floor."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def softplus_with_floor(raw: Tensor, floor: float) -> Tensor:
    """``floor + softplus(raw)``: positive, smooth, and never below ``floor``."""
    return floor + torch.nn.functional.softplus(raw)


def inverse_softplus_with_floor(value: float | Tensor, floor: float) -> Tensor:
    """The raw value whose ``softplus_with_floor`` is ``value`` (which must exceed ``floor``)."""
    v = torch.as_tensor(value, dtype=torch.float64) - floor
    if (v <= 0).any():
        raise ValueError(f"value {value} must be greater than its floor {floor}")
    # log(expm1(v)) overflows for large v, where softplus is the identity to double precision.
    return torch.where(v > 30.0, v, torch.log(torch.expm1(torch.clamp(v, max=30.0))))


def inverse_softplus_scalar(value: float, floor: float) -> float:
    """Scalar form of :func:`inverse_softplus_with_floor`."""
    v = value - floor
    if v <= 0:
        raise ValueError(f"value {value} must be greater than its floor {floor}")
    return v if v > 30.0 else math.log(math.expm1(v))


def bounded_sigmoid(raw: Tensor, low: float, high: float) -> Tensor:
    """``low + (high − low)·sigmoid(raw)``: smooth, and inside (low, high) for every raw value."""
    return low + (high - low) * torch.sigmoid(raw)


def inverse_bounded_sigmoid(value: float | Tensor, low: float, high: float) -> Tensor:
    """The raw value whose ``bounded_sigmoid`` is ``value`` (in (low, high]).

    ``high`` itself is accepted, within round-off, and maps to a large finite raw value: a value
    read back from a fitted parameter can sit on its bound.
    """
    v = torch.as_tensor(value, dtype=torch.float64)
    if (v <= low).any() or (v > high * (1.0 + 1e-12)).any():
        raise ValueError(f"value {value} must be in ({low}, {high}]")
    p = torch.clamp((v - low) / (high - low), max=1.0 - 1e-15)
    return torch.logit(p)
