"""Covariance functions: small modules with raw (unconstrained) parameters and ``+`` to compose.

Every positive parameter is stored raw and read through a softplus with a named floor, as GPyTorch
does with its constraints. A kernel knows how to describe itself (``to_spec``) so an engine state
can be saved without pickle and rebuilt with :func:`kernel_from_spec`.
"""

from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from typing import Any

import torch
from torch import Tensor, nn

from .transforms import (
    bounded_sigmoid,
    inverse_bounded_sigmoid,
    inverse_softplus_with_floor,
    softplus_with_floor,
)

# Floors keep a fit away from degenerate kernels; they are far below any physical value in µT² or m.
VARIANCE_FLOOR = 1e-6
LENGTHSCALE_FLOOR = 1e-3
SQRT5 = math.sqrt(5.0)
# Distances are sqrt(max(r², tiny)) so the gradient at r = 0 stays finite (GPflow does the same).
_R2_FLOOR = 1e-36


def _as_row(value: float | Tensor | list[float], name: str) -> Tensor:
    t = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    if t.numel() == 0 or not torch.isfinite(t).all() or (t <= 0).any():
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return t


class Kernel(nn.Module, metaclass=ABCMeta):
    """Base class: ``K(X, X2)`` [N, N2], ``K_diag(X)`` [N]; ``k1 + k2`` builds a :class:`Sum`."""

    @abstractmethod
    def K(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        """Covariance [N, N2] between X [N, D] and X2 [N2, D] (X itself if None)."""

    @abstractmethod
    def K_diag(self, X: Tensor) -> Tensor:
        """Variances k(x, x) [N] at X [N, D]."""

    def forward(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        return self.K(X, X2)

    def __add__(self, other: Kernel) -> Kernel:
        return Sum(self, other)

    def constant_variance(self) -> float:
        """The variance of the constant (offset) parts of this kernel; 0 if it has none."""
        return 0.0

    def without_constant(self) -> Kernel | None:
        """This kernel with its constant parts removed (None if nothing else is left)."""
        return self

    def negligible_distance(self, rel_tol: float) -> float | None:
        """Distance beyond which k(x, x') < rel_tol · k(x, x) (None: no such distance)."""
        return None

    @abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description that :func:`kernel_from_spec` rebuilds."""

    @abstractmethod
    def hyperparameters(self) -> dict[str, Tensor]:
        """Constrained hyperparameters by name (differentiable), e.g. ``matern52_lengthscale``."""

    @abstractmethod
    def describe(self) -> dict[str, float | list[float]]:
        """Hyperparameters in physical units, for reports and logs."""


class Constant(Kernel):
    """``k(x, x') = σ₀²``: an unknown constant offset (the ~48 µT mean field of a room)."""

    def __init__(self, variance: float = 1.0) -> None:
        super().__init__()
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, VARIANCE_FLOOR))

    @property
    def variance(self) -> Tensor:
        return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)

    def K(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        n2 = X.shape[0] if X2 is None else X2.shape[0]
        return self.variance.expand(X.shape[0], n2)

    def K_diag(self, X: Tensor) -> Tensor:
        return self.variance.expand(X.shape[0])

    def constant_variance(self) -> float:
        return float(self.variance.detach())

    def without_constant(self) -> Kernel | None:
        return None

    def to_spec(self) -> dict[str, Any]:
        return {"type": "constant", "variance": float(self.variance.detach())}

    def hyperparameters(self) -> dict[str, Tensor]:
        return {"constant_variance": self.variance}

    def describe(self) -> dict[str, float | list[float]]:
        return {"constant_variance": float(self.variance.detach())}


class Stationary(Kernel):
    """A variance times a function of the scaled distance; isotropic or ARD lengthscales.

    Args:
        variance: initial variance.
        lengthscale: initial lengthscale (one, or one per input with ``ard_dims``).
        ard_dims: number of inputs for ARD lengthscales; 0 for one isotropic lengthscale.
        variance_max: optional upper limit of the variance. The variance is then read through a
            sigmoid onto (floor, variance_max), as the seed paper's code does on its UCI runs
            (limit 2000): with near-noiseless data maximum likelihood can otherwise drive it
            without bound. None (default): a softplus, no upper limit.
    """

    kind = "stationary"

    def __init__(
        self,
        variance: float = 1.0,
        lengthscale: float | list[float] = 1.0,
        ard_dims: int = 0,
        variance_max: float | None = None,
    ) -> None:
        super().__init__()
        if variance_max is not None and not VARIANCE_FLOOR < variance_max < math.inf:
            raise ValueError(f"variance_max must be finite and above {VARIANCE_FLOOR}")
        self.variance_max = variance_max
        ls = _as_row(lengthscale, "lengthscale")
        if ard_dims and ls.numel() == 1:
            ls = ls.repeat(ard_dims)
        if ard_dims and ls.numel() != ard_dims:
            raise ValueError(f"expected {ard_dims} lengthscales, got {ls.numel()}")
        if variance_max is None:
            raw = inverse_softplus_with_floor(variance, VARIANCE_FLOOR)
        else:
            raw = inverse_bounded_sigmoid(variance, VARIANCE_FLOOR, variance_max)
        self.raw_variance = nn.Parameter(raw)
        self.raw_lengthscale = nn.Parameter(inverse_softplus_with_floor(ls, LENGTHSCALE_FLOOR))

    @property
    def variance(self) -> Tensor:
        if self.variance_max is None:
            return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)
        return bounded_sigmoid(self.raw_variance, VARIANCE_FLOOR, self.variance_max)

    @property
    def lengthscale(self) -> Tensor:
        return softplus_with_floor(self.raw_lengthscale, LENGTHSCALE_FLOOR)

    def scaled_distance(self, X: Tensor, X2: Tensor) -> Tensor:
        """Euclidean distance after dividing each input by its lengthscale [N, N2]."""
        ls = self.lengthscale
        A, B = X / ls, X2 / ls
        r2 = (A * A).sum(-1)[:, None] + (B * B).sum(-1)[None, :] - 2.0 * A @ B.mT
        return torch.sqrt(torch.clamp(r2, min=_R2_FLOOR))

    @abstractmethod
    def profile(self, r: Tensor) -> Tensor:
        """The correlation as a function of scaled distance, 1 at r = 0."""

    def negligible_distance(self, rel_tol: float) -> float | None:
        # The profile decreases in r: bisect for profile(r) = rel_tol, then scale by the
        # longest lengthscale (the slowest axis decides for ARD).
        lo, hi = 0.0, 1.0
        tol = torch.tensor(rel_tol, dtype=torch.float64)
        while self.profile(torch.tensor(hi, dtype=torch.float64)) > tol:
            hi *= 2.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.profile(torch.tensor(mid, dtype=torch.float64)) > tol:
                lo = mid
            else:
                hi = mid
        return hi * float(self.lengthscale.detach().max())

    def K(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        return self.variance * self.profile(self.scaled_distance(X, X if X2 is None else X2))

    def K_diag(self, X: Tensor) -> Tensor:
        return self.variance.expand(X.shape[0])

    def to_spec(self) -> dict[str, Any]:
        ls = self.lengthscale.detach().cpu().tolist()
        spec = {
            "type": self.kind,
            "variance": float(self.variance.detach()),
            "lengthscale": ls,
            "ard_dims": len(ls) if self.raw_lengthscale.numel() > 1 else 0,
        }
        if self.variance_max is not None:
            spec["variance_max"] = self.variance_max
        return spec

    def hyperparameters(self) -> dict[str, Tensor]:
        return {
            f"{self.kind}_variance": self.variance,
            f"{self.kind}_lengthscale": self.lengthscale,
        }

    def describe(self) -> dict[str, float | list[float]]:
        ls = self.lengthscale.detach().cpu().tolist()
        return {
            f"{self.kind}_variance": float(self.variance.detach()),
            f"{self.kind}_lengthscale": ls[0] if len(ls) == 1 else ls,
        }


class SquaredExponential(Stationary):
    """``σ² exp(-r²/2)``, r the scaled distance."""

    kind = "se"

    def profile(self, r: Tensor) -> Tensor:
        return torch.exp(-0.5 * r * r)


class Matern52(Stationary):
    """Matérn ν = 5/2: ``σ² (1 + √5 r + 5r²/3) exp(-√5 r)``."""

    kind = "matern52"

    def profile(self, r: Tensor) -> Tensor:
        s = SQRT5 * r
        return (1.0 + s + s * s / 3.0) * torch.exp(-s)


class Sum(Kernel):
    """``k₁ + k₂``."""

    def __init__(self, first: Kernel, second: Kernel) -> None:
        super().__init__()
        self.first = first
        self.second = second

    def K(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        return self.first.K(X, X2) + self.second.K(X, X2)

    def K_diag(self, X: Tensor) -> Tensor:
        return self.first.K_diag(X) + self.second.K_diag(X)

    def constant_variance(self) -> float:
        return self.first.constant_variance() + self.second.constant_variance()

    def negligible_distance(self, rel_tol: float) -> float | None:
        parts = [
            k.negligible_distance(rel_tol)
            for k in (self.first, self.second)
            if not isinstance(k, Constant)
        ]
        if not parts or any(p is None for p in parts):
            return None
        return max(parts)

    def without_constant(self) -> Kernel | None:
        parts = [k for k in (self.first.without_constant(), self.second.without_constant()) if k]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else Sum(parts[0], parts[1])

    def to_spec(self) -> dict[str, Any]:
        return {"type": "sum", "parts": [self.first.to_spec(), self.second.to_spec()]}

    def hyperparameters(self) -> dict[str, Tensor]:
        return {**self.first.hyperparameters(), **self.second.hyperparameters()}

    def describe(self) -> dict[str, float | list[float]]:
        return {**self.first.describe(), **self.second.describe()}


_STATIONARY: dict[str, type[Stationary]] = {"se": SquaredExponential, "matern52": Matern52}


def kernel_from_spec(spec: dict[str, Any]) -> Kernel:
    """Rebuild a kernel from :meth:`Kernel.to_spec` output.

    Raises:
        ValueError: the spec names an unknown kernel type or misses a field.
    """
    kind = spec.get("type")
    try:
        if kind == "constant":
            return Constant(spec["variance"])
        if kind == "sum":
            first, second = spec["parts"]
            return Sum(kernel_from_spec(first), kernel_from_spec(second))
        if kind in _STATIONARY:
            return _STATIONARY[kind](
                spec["variance"],
                spec["lengthscale"],
                int(spec["ard_dims"]),
                spec.get("variance_max"),
            )
    except (KeyError, TypeError) as err:
        raise ValueError(f"kernel spec {spec!r} is missing or has a bad field: {err}") from err
    raise ValueError(f"unknown kernel type {kind!r}; expected constant, sum, se or matern52")
