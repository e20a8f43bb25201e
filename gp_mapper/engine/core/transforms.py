"""Positive parameters: unconstrained raw values mapped through a softplus with a floor.

Both transforms reach their limits exactly in floating point: ``floor + softplus(raw)`` equals
``floor`` once ``softplus(raw)`` is below half an ulp of the floor (raw ≲ −51 in float64 for a
floor of 1e-6), and a sigmoid rounds to 0 or 1 for |raw| ≳ 37. A fit can end there, so the
inverses accept a value on its limit and return :data:`RAW_AT_LIMIT` (with its sign), a finite
raw value from which the forward transform gives the limit again. Saving a value and rebuilding
it then works for every state a fit can reach; the engine state also keeps the raw values
themselves, which is what makes its round trip bit-for-bit.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# |raw| at which every transform here sits on its limit exactly, in float32 and float64:
# softplus(−1000) and sigmoid(−1000) underflow to 0, sigmoid(1000) rounds to 1. Finite, so a
# raw value saved from it is accepted by every finiteness check.
RAW_AT_LIMIT = 1000.0
# A value read back from a float32 parameter is its float64 limit rounded to float32, up to
# 2⁻²⁴ ≈ 6e-8 relatively below (or above) it; this much slack, relative to the limit, is
# still counted as "on the limit".
LIMIT_REL_TOL = 1e-6
# Above this, softplus(v) = v to double precision and log(expm1(v)) would overflow.
_SOFTPLUS_LINEAR = 30.0


def softplus_with_floor(raw: Tensor, floor: float) -> Tensor:
    """``floor + softplus(raw)``: positive, smooth, and never below ``floor``."""
    return floor + torch.nn.functional.softplus(raw)


def inverse_softplus_with_floor(value: float | Tensor, floor: float) -> Tensor:
    """The raw value whose ``softplus_with_floor`` is ``value``.

    Args:
        value: one value or a tensor of them, at least ``floor`` (less :data:`LIMIT_REL_TOL`
            relative slack for float32 round-off).
        floor: the transform's floor.

    Returns:
        Raw values (float64, ``value``'s shape); a value on the floor gives −RAW_AT_LIMIT.

    Raises:
        ValueError: a value below the floor or not finite.
    """
    t = torch.as_tensor(value, dtype=torch.float64)
    if not torch.isfinite(t).all() or (t < floor * (1.0 - LIMIT_REL_TOL)).any():
        raise ValueError(f"value {value} must be finite and at least its floor {floor}")
    v = t - floor
    on_floor = v <= 0
    safe = torch.clamp(v, min=torch.finfo(torch.float64).tiny, max=_SOFTPLUS_LINEAR)
    raw = torch.where(v > _SOFTPLUS_LINEAR, v, torch.log(torch.expm1(safe)))
    return torch.where(on_floor, torch.full_like(raw, -RAW_AT_LIMIT), raw)


def inverse_softplus_scalar(value: float, floor: float) -> float:
    """Scalar form of :func:`inverse_softplus_with_floor`."""
    if not math.isfinite(value) or value < floor * (1.0 - LIMIT_REL_TOL):
        raise ValueError(f"value {value} must be finite and at least its floor {floor}")
    v = value - floor
    if v <= 0:
        return -RAW_AT_LIMIT
    return v if v > _SOFTPLUS_LINEAR else math.log(math.expm1(v))


def bounded_sigmoid(raw: Tensor, low: float, high: float) -> Tensor:
    """``low + (high − low)·sigmoid(raw)``: smooth, and inside [low, high] for every raw value.

    The limits themselves are reached only where the sigmoid rounds to 0 or 1.
    """
    return low + (high - low) * torch.sigmoid(raw)


def inverse_bounded_sigmoid(value: float | Tensor, low: float, high: float) -> Tensor:
    """The raw value whose ``bounded_sigmoid`` is ``value``, in [low, high].

    A value read back from a fitted parameter can sit on either limit (within
    :data:`LIMIT_REL_TOL` of its magnitude); it maps to ∓RAW_AT_LIMIT.

    Raises:
        ValueError: a value outside the limits or not finite.
    """
    v = torch.as_tensor(value, dtype=torch.float64)
    slack_low, slack_high = abs(low) * LIMIT_REL_TOL, abs(high) * LIMIT_REL_TOL
    if not torch.isfinite(v).all() or (v < low - slack_low).any() or (v > high + slack_high).any():
        raise ValueError(f"value {value} must be in [{low}, {high}] and finite")
    p = (v - low) / (high - low)
    # Clamped only so that the unused branch of the where() below stays finite.
    inside = torch.logit(p.clamp(torch.finfo(torch.float64).tiny, 1.0 - 1e-16))
    raw = torch.where(p <= 0, torch.full_like(inside, -RAW_AT_LIMIT), inside)
    return torch.where(p >= 1, torch.full_like(raw, RAW_AT_LIMIT), raw)
