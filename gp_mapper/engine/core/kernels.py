"""Covariance functions: small modules with raw (unconstrained) parameters, ``+`` and ``*``.

Every positive parameter is stored raw and read through a softplus with a named floor, as GPyTorch
does with its constraints. A kernel knows how to describe itself (``to_spec``) so an engine state
can be saved without pickle and rebuilt with :func:`kernel_from_spec`.

Leaf kernels (:class:`Constant` and the stationary ones) take ``active_dims``: the input columns
they act on (None: all). A map kernel can so use (x, y) while a drift term uses time t. Sums and
products act on all columns and hand them to their parts, which pick their own.

Hyperparameter names are ``<kind>_<parameter>`` (``matern52_lengthscale``); when a kind occurs
more than once in a kernel, the leaves are numbered depth-first, left to right, and the second
and later get the number after the kind (``matern52_2_lengthscale``). The first occurrence keeps
the plain name, so a kernel with one part of each kind has the names it always had, and every
name still ends in ``_variance`` or ``_lengthscale`` and starts with its kind.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterator, Sequence
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
SQRT3 = math.sqrt(3.0)
SQRT5 = math.sqrt(5.0)
# Distances are sqrt(max(r², tiny)) so the gradient at r = 0 stays finite (GPflow does the same).
_R2_FLOOR = 1e-36
_R_FLOOR = math.sqrt(_R2_FLOOR)  # a distance clamped to the floor has no derivative
# Bisection steps for negligible_distance: 60 halvings of a bracket [0, 2^k] reach double
# precision of the distance.
_BISECTION_STEPS = 60

Columns = slice | list[int]

# Whether a stationary kernel's matrix may be built as one fused autograd node
# (:class:`_StationaryMatrix`), whose backward gives first derivatives only: per thread, so a
# fit in the mapper's worker never changes how another thread differentiates.
_FIRST_DERIVATIVES_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "first_derivatives_only", default=False
)


@contextlib.contextmanager
def first_derivatives_only() -> Iterator[None]:
    """Within it, an isotropic stationary kernel's matrix (inputs without gradients) is one
    autograd node with its first derivatives in θ written out, instead of a dozen elementwise
    nodes: a hyperparameter fit's backward pass at a fraction of the cost. Its values are the
    same; a backward pass that builds a graph for second derivatives (``create_graph``) through
    it is refused, so only a fit's closure enters it (the θ memory's curvature, which
    differentiates twice, does not)."""
    token = _FIRST_DERIVATIVES_ONLY.set(True)
    try:
        yield
    finally:
        _FIRST_DERIVATIVES_ONLY.reset(token)


def _as_row(value: float | Tensor | list[float], name: str) -> Tensor:
    t = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    if t.numel() == 0 or not torch.isfinite(t).all() or (t <= 0).any():
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return t


def _check_active_dims(active_dims: Sequence[int] | None) -> tuple[int, ...] | None:
    if active_dims is None:
        return None
    dims = tuple(active_dims)
    if (
        not dims
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)
        or len(set(dims)) != len(dims)
    ):
        raise ValueError(
            f"active_dims must be distinct non-negative column indices, got {active_dims}"
        )
    return dims


def _columns(dims: tuple[int, ...]) -> Columns:
    # A run of consecutive columns is a slice (a view, no copy); anything else a gather.
    if dims == tuple(range(dims[0], dims[0] + len(dims))):
        return slice(dims[0], dims[0] + len(dims))
    return list(dims)


class Kernel(nn.Module, metaclass=ABCMeta):
    """Base class: ``K(X, X2)`` [N, N2], ``K_diag(X)`` [N]; ``+`` and ``*`` compose.

    Args:
        active_dims: the input columns this kernel acts on, in the order it reads them;
            None (default): all columns.
    """

    def __init__(self, active_dims: Sequence[int] | None = None) -> None:
        super().__init__()
        self.active_dims = _check_active_dims(active_dims)
        self._cols: Columns | None = (
            None if self.active_dims is None else _columns(self.active_dims)
        )
        self._columns_needed = 0 if self.active_dims is None else max(self.active_dims) + 1

    def K(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        """Covariance [N, N2] between X [N, D] and X2 [N2, D] (X itself if None).

        Raises:
            ValueError: ``active_dims`` names a column that X does not have.
        """
        return self._K(self._select(X), None if X2 is None else self._select(X2))

    def K_diag(self, X: Tensor) -> Tensor:
        """Variances k(x, x) [N] at X [N, D]."""
        return self._K_diag(self._select(X))

    @abstractmethod
    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        """:meth:`K` on inputs already restricted to ``active_dims`` [N, D'], [N2, D']."""

    @abstractmethod
    def _K_diag(self, X: Tensor) -> Tensor:
        """:meth:`K_diag` on inputs already restricted to ``active_dims`` [N, D']."""

    def _select(self, X: Tensor) -> Tensor:
        if self._cols is None:
            return X
        if self._columns_needed > X.shape[-1]:
            raise ValueError(
                f"{type(self).__name__} acts on columns {self.active_dims}, "
                f"but the inputs have {X.shape[-1]}"
            )
        return X[..., self._cols]

    def forward(self, X: Tensor, X2: Tensor | None = None) -> Tensor:
        return self.K(X, X2)

    def __add__(self, other: Kernel) -> Kernel:
        return Sum(self, other)

    def __mul__(self, other: Kernel) -> Kernel:
        return Product(self, other)

    def constant_part(self) -> Kernel | None:
        """The constant (offset) part of this kernel, sharing its parameters; None if none.

        Together with :meth:`without_constant`: ``k = constant_part + without_constant``.
        """
        return None

    def constant_variance(self) -> float:
        """The variance of the constant (offset) part of this kernel; 0 if it has none."""
        return 0.0

    def without_constant(self) -> Kernel | None:
        """This kernel with its constant part removed (None if nothing else is left).

        ``k(x, x') = constant_variance() + without_constant()(x, x')`` for all inputs; the
        result shares this kernel's parameters.
        """
        return self

    # Targets whose rows this kernel tags as different quantities with their own levels (a
    # field's components); the engine keeps running statistics per group.
    num_target_groups: int = 1

    def target_groups(self, X: Tensor) -> Tensor | None:
        """The group [N] (0 .. num_target_groups - 1) of each observation row; None: one."""
        return None

    def negligible_distance(self, rel_tol: float) -> float | None:
        """Distance beyond which k(x, x') < rel_tol · k(x, x) (None: no such distance).

        The distance is Euclidean over all input columns. Constant parts of a sum are left
        out (they are the offset, which prediction handles apart; see ``without_constant``).
        """
        return None

    @abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description that :func:`kernel_from_spec` rebuilds."""

    @abstractmethod
    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        """Each leaf's kind and constrained parameters, depth-first, left to right.

        E.g. ``[("constant", {"variance": σ₀²}), ("matern52", {"variance": σ², ...})]``; the
        building block of the unique names of :meth:`hyperparameters`.
        """

    def hyperparameters(self) -> dict[str, Tensor]:
        """Constrained hyperparameters by unique name (differentiable).

        Names are ``<kind>_<parameter>``, and ``<kind>_<n>_<parameter>`` for the n-th leaf of
        a kind that occurs more than once (n ≥ 2); see the module docstring.
        """
        seen: dict[str, int] = {}
        out: dict[str, Tensor] = {}
        for kind, params in self.hyperparameter_groups():
            seen[kind] = seen.get(kind, 0) + 1
            prefix = kind if seen[kind] == 1 else f"{kind}_{seen[kind]}"
            for name, value in params.items():
                out[f"{prefix}_{name}"] = value
        return out

    def describe(self) -> dict[str, float | list[float]]:
        """Hyperparameters in physical units, for reports and logs (names as hyperparameters)."""
        out: dict[str, float | list[float]] = {}
        for name, value in self.hyperparameters().items():
            v = value.detach()
            out[name] = float(v) if v.numel() == 1 else v.cpu().tolist()
        return out

    def _leaf_spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        # Written only when set, so the specs of kernels on all columns are as they always were.
        if self.active_dims is not None:
            spec["active_dims"] = list(self.active_dims)
        return spec


class Constant(Kernel):
    """``k(x, x') = σ₀²``: an unknown constant offset (the ~48 µT mean field of a room).

    Args:
        variance: σ₀², at least VARIANCE_FLOOR.
        active_dims: accepted for a uniform spec; a constant reads no column.
    """

    def __init__(self, variance: float = 1.0, active_dims: Sequence[int] | None = None) -> None:
        super().__init__(active_dims)
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, VARIANCE_FLOOR))

    @property
    def variance(self) -> Tensor:
        return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)

    def _select(self, X: Tensor) -> Tensor:
        return X  # only the number of rows matters

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        n2 = X.shape[0] if X2 is None else X2.shape[0]
        return self.variance.expand(X.shape[0], n2)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.variance.expand(X.shape[0])

    def constant_part(self) -> Kernel | None:
        return self

    def constant_variance(self) -> float:
        return float(self.variance.detach())

    def without_constant(self) -> Kernel | None:
        return None

    def to_spec(self) -> dict[str, Any]:
        return self._leaf_spec({"type": "constant", "variance": float(self.variance.detach())})

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [("constant", {"variance": self.variance})]


class Stationary(Kernel):
    """A variance times a function of the scaled distance; isotropic or ARD lengthscales.

    Args:
        variance: initial variance.
        lengthscale: initial lengthscale (one, or one per input with ``ard_dims``).
        ard_dims: number of inputs for ARD lengthscales; 0 for one isotropic lengthscale.
        variance_max: optional upper limit of the variance. The variance is then read through a
            sigmoid onto (floor, variance_max), as the VIPS authors' code does on its UCI runs
            (limit 2000): with near-noiseless data maximum likelihood can otherwise drive it
            without bound. None (default): a softplus, no upper limit.
        active_dims: the input columns the distance is taken over (None: all); with ARD,
            ``ard_dims`` must equal their number.
    """

    kind = "stationary"

    def __init__(
        self,
        variance: float = 1.0,
        lengthscale: float | list[float] = 1.0,
        ard_dims: int = 0,
        variance_max: float | None = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(active_dims)
        if variance_max is not None and not VARIANCE_FLOOR < variance_max < math.inf:
            raise ValueError(f"variance_max must be finite and above {VARIANCE_FLOOR}")
        if ard_dims and self.active_dims is not None and ard_dims != len(self.active_dims):
            raise ValueError(
                f"ard_dims={ard_dims} but active_dims names {len(self.active_dims)} columns"
            )
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

    @property
    def ard(self) -> bool:
        """Whether each input has its own lengthscale."""
        return self.raw_lengthscale.numel() > 1

    def scaled_distance(self, X: Tensor, X2: Tensor) -> Tensor:
        """Euclidean distance after dividing each input by its lengthscale [N, N2].

        Args:
            X: [N, D'] and X2: [N2, D'], already restricted to ``active_dims``.
        """
        ls = self.lengthscale
        A, B = X / ls, X2 / ls
        r2 = (A * A).sum(-1)[:, None] + (B * B).sum(-1)[None, :] - 2.0 * A @ B.mT
        return torch.sqrt(torch.clamp(r2, min=_R2_FLOOR))

    @abstractmethod
    def profile(self, r: Tensor) -> Tensor:
        """The correlation as a function of scaled distance, 1 at r = 0."""

    def negligible_distance(self, rel_tol: float) -> float | None:
        if self.active_dims is not None:
            # Points far apart over all columns can be close in the ones this kernel reads.
            return None
        # The profile decreases in r: bisect for profile(r) = rel_tol, then scale by the
        # longest lengthscale (the slowest axis decides for ARD).
        lo, hi = 0.0, 1.0
        tol = torch.tensor(rel_tol, dtype=torch.float64)
        while self.profile(torch.tensor(hi, dtype=torch.float64)) > tol:
            hi *= 2.0
        for _ in range(_BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            if self.profile(torch.tensor(mid, dtype=torch.float64)) > tol:
                lo = mid
            else:
                hi = mid
        return hi * float(self.lengthscale.detach().max())

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        X2 = X if X2 is None else X2
        if (
            _FIRST_DERIVATIVES_ONLY.get()
            and torch.is_grad_enabled()
            and not (self.ard or X.requires_grad or X2.requires_grad)
        ):
            return _StationaryMatrix.apply(X, X2, self.lengthscale, self.variance, self)
        return self.variance * self.profile(self.scaled_distance(X, X2))

    def profile_slope(self, r: Tensor) -> tuple[Tensor, Tensor]:
        """The profile and its derivative in r (the fused matrix's backward reads both)."""
        with torch.enable_grad():
            r = r.detach().requires_grad_(True)
            p = self.profile(r)
            (slope,) = torch.autograd.grad(p.sum(), r)
        return p.detach(), slope

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.variance.expand(X.shape[0])

    def to_spec(self) -> dict[str, Any]:
        ls = self.lengthscale.detach().cpu().tolist()
        spec = {
            "type": self.kind,
            "variance": float(self.variance.detach()),
            "lengthscale": ls,
            "ard_dims": len(ls) if self.ard else 0,
        }
        if self.variance_max is not None:
            spec["variance_max"] = self.variance_max
        return self._leaf_spec(spec)

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(self.kind, {"variance": self.variance, "lengthscale": self.lengthscale})]


class _StationaryMatrix(torch.autograd.Function):
    """``σ² profile(|x - x'| / ℓ)`` for one lengthscale, as one node: the forward is the
    kernel's own arithmetic (the same values), the backward its derivatives in ℓ and σ²
    (dr/dℓ = -r/ℓ; a distance at the floor has none, as through the clamp)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, X: Tensor, X2: Tensor, ls: Tensor, variance: Tensor, kernel: Stationary
    ) -> Tensor:
        r = kernel.scaled_distance(X, X2)  # ls is the kernel's own lengthscale
        p, slope = kernel.profile_slope(r)
        ctx.save_for_backward(torch.where(r > _R_FLOOR, r * slope, 0.0), p, ls, variance)
        return variance * p

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        if torch.is_grad_enabled():  # create_graph: a second derivative would be wrong
            raise RuntimeError("a fused kernel matrix has first derivatives only: take second "
                               "derivatives outside first_derivatives_only()")  # fmt: skip
        r_slope, p, ls, variance = ctx.saved_tensors
        grad_ls = grad_var = None
        if ctx.needs_input_grad[2]:
            grad_ls = (-(grad * r_slope).sum() * variance / ls).reshape(ls.shape)
        if ctx.needs_input_grad[3]:
            grad_var = (grad * p).sum().reshape(variance.shape)
        return None, None, grad_ls, grad_var, None


class SquaredExponential(Stationary):
    """``σ² exp(-r²/2)``, r the scaled distance."""

    kind = "se"

    def profile(self, r: Tensor) -> Tensor:
        return torch.exp(-0.5 * r * r)

    def profile_slope(self, r: Tensor) -> tuple[Tensor, Tensor]:
        p = torch.exp(-0.5 * r * r)
        return p, -r * p


class Matern32(Stationary):
    """Matérn ν = 3/2: ``σ² (1 + √3 r) exp(-√3 r)``."""

    kind = "matern32"

    def profile(self, r: Tensor) -> Tensor:
        s = SQRT3 * r
        return (1.0 + s) * torch.exp(-s)

    def profile_slope(self, r: Tensor) -> tuple[Tensor, Tensor]:
        s = SQRT3 * r
        e = torch.exp(-s)
        return (1.0 + s) * e, -SQRT3 * s * e


class Matern52(Stationary):
    """Matérn ν = 5/2: ``σ² (1 + √5 r + 5r²/3) exp(-√5 r)``."""

    kind = "matern52"

    def profile(self, r: Tensor) -> Tensor:
        s = SQRT5 * r
        return (1.0 + s + s * s / 3.0) * torch.exp(-s)

    def profile_slope(self, r: Tensor) -> tuple[Tensor, Tensor]:
        s = SQRT5 * r
        e = torch.exp(-s)
        return (1.0 + s + s * s / 3.0) * e, -(SQRT5 / 3.0) * s * (1.0 + s) * e


class Sum(Kernel):
    """``k₁ + k₂`` (on all columns; each part reads its own ``active_dims``)."""

    def __init__(self, first: Kernel, second: Kernel) -> None:
        super().__init__()
        self.first = first
        self.second = second

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        return self.first.K(X, X2) + self.second.K(X, X2)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.first.K_diag(X) + self.second.K_diag(X)

    def constant_part(self) -> Kernel | None:
        parts = [self.first.constant_part(), self.second.constant_part()]
        return _sum_of([k for k in parts if k is not None])

    def constant_variance(self) -> float:
        return self.first.constant_variance() + self.second.constant_variance()

    def negligible_distance(self, rel_tol: float) -> float | None:
        parts = [
            k.negligible_distance(rel_tol)
            for k in (self.first, self.second)
            if k.without_constant() is not None
        ]
        if not parts or any(p is None for p in parts):
            return None
        return max(parts)

    def without_constant(self) -> Kernel | None:
        parts = [self.first.without_constant(), self.second.without_constant()]
        return _sum_of([k for k in parts if k is not None])

    def to_spec(self) -> dict[str, Any]:
        return {"type": "sum", "parts": [self.first.to_spec(), self.second.to_spec()]}

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return self.first.hyperparameter_groups() + self.second.hyperparameter_groups()


class Product(Kernel):
    """``k₁ · k₂`` (on all columns; each factor reads its own ``active_dims``).

    A constant factor scales the other: ``Constant(c) * Matern52(1, ℓ)`` is a Matérn of
    variance c, not an offset, so its :meth:`constant_variance` is 0. In general, with each
    factor split as ``kᵢ = cᵢ + gᵢ`` (constant part plus the rest), ``k₁k₂ = c₁c₂ + (c₁g₂ +
    g₁c₂ + g₁g₂)``: the offset is ``c₁c₂`` and :meth:`without_constant` is the bracket.
    """

    def __init__(self, first: Kernel, second: Kernel) -> None:
        super().__init__()
        self.first = first
        self.second = second

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        return self.first.K(X, X2) * self.second.K(X, X2)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.first.K_diag(X) * self.second.K_diag(X)

    def constant_part(self) -> Kernel | None:
        c1, c2 = self.first.constant_part(), self.second.constant_part()
        return None if c1 is None or c2 is None else Product(c1, c2)

    def constant_variance(self) -> float:
        return self.first.constant_variance() * self.second.constant_variance()

    def without_constant(self) -> Kernel | None:
        c1, c2 = self.first.constant_part(), self.second.constant_part()
        if c1 is None or c2 is None:
            return self  # no offset to take out
        g1, g2 = self.first.without_constant(), self.second.without_constant()
        terms = [
            Product(a, b)
            for a, b in ((c1, g2), (g1, c2), (g1, g2))
            if a is not None and b is not None
        ]
        return _sum_of(terms)

    def negligible_distance(self, rel_tol: float) -> float | None:
        # |k₂(x, x')| ≤ k₂(x, x) for a stationary factor, so the product is negligible wherever
        # one factor is. A factor with a constant part is never negligible (its reported
        # distance leaves the offset out), so only factors without one count.
        parts = [
            d
            for k in (self.first, self.second)
            if k.constant_part() is None and (d := k.negligible_distance(rel_tol)) is not None
        ]
        return min(parts) if parts else None

    def to_spec(self) -> dict[str, Any]:
        return {"type": "product", "parts": [self.first.to_spec(), self.second.to_spec()]}

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return self.first.hyperparameter_groups() + self.second.hyperparameter_groups()


def _sum_of(parts: list[Kernel]) -> Kernel | None:
    """The sum of the parts (None for none, the part itself for one)."""
    if not parts:
        return None
    total = parts[0]
    for part in parts[1:]:
        total = Sum(total, part)
    return total


_STATIONARY: dict[str, type[Stationary]] = {
    "se": SquaredExponential,
    "matern32": Matern32,
    "matern52": Matern52,
}
_COMBINATIONS: dict[str, type[Sum] | type[Product]] = {"sum": Sum, "product": Product}
KERNEL_TYPES = ("constant", *_COMBINATIONS, *_STATIONARY)
# Kernels of a method's own subpackage (the potential's curl-free kernel), registered on import.
_REGISTERED: dict[str, Callable[[dict[str, Any]], Kernel]] = {}


def register_kernel_type(kind: str, from_spec: Callable[[dict[str, Any]], Kernel]) -> None:
    """Let :func:`kernel_from_spec` rebuild a kernel type defined outside this module."""
    if kind in KERNEL_TYPES:
        raise ValueError(f"kernel type {kind!r} is built in")
    _REGISTERED[kind] = from_spec


def kernel_from_spec(spec: dict[str, Any]) -> Kernel:
    """Rebuild a kernel from :meth:`Kernel.to_spec` output.

    Values on their floor or limit are accepted (a fit can end there); they rebuild onto the
    limit, and a saved engine state then restores the exact raw values.

    Raises:
        ValueError: the spec names an unknown kernel type, misses a field or has a bad one.
    """
    kind = spec.get("type")
    try:
        if kind == "constant":
            return Constant(spec["variance"], spec.get("active_dims"))
        if kind in _COMBINATIONS:
            if "active_dims" in spec:
                raise ValueError(f"a {kind} acts on all columns; give active_dims to its parts")
            first, second = spec["parts"]
            return _COMBINATIONS[kind](kernel_from_spec(first), kernel_from_spec(second))
        if kind in _STATIONARY:
            return _STATIONARY[kind](
                spec["variance"],
                spec["lengthscale"],
                int(spec["ard_dims"]),
                spec.get("variance_max"),
                spec.get("active_dims"),
            )
        if kind in _REGISTERED:
            return _REGISTERED[kind](spec)
    except (KeyError, TypeError) as err:
        raise ValueError(f"kernel spec {spec!r} is missing or has a bad field: {err}") from err
    known = ", ".join((*KERNEL_TYPES, *_REGISTERED))
    raise ValueError(f"unknown kernel type {kind!r}; expected one of {known}")
