"""SE and Matérn-3/2 kernels projected to zero mean over an interval (Durrande et al. 2013).

``s(x, x') = g(x, x') − h(x) h(x') / H`` with ``h(x) = ∫_a^b g(x, t) dt`` and
``H = ∬_[a,b]² g``: every sample path of s integrates to 0 over [a, b], so an additive model
built from such terms (plus a constant) has identifiable components, its ANOVA decomposition
(Adam, Durrande & John 2018, Sec. 7 eq. 8, whose double integral prints g_i(s_i, t): it is
g_i(s, t)). The integrals are in closed form for the SE kernel; the
projection is the same for any positive multiple of the Lebesgue measure, so the interval
alone fixes it. The Matérn-3/2 twin (the magnetometer's drift in time, our addition) has closed
forms too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import LENGTHSCALE_FLOOR, SQRT3, VARIANCE_FLOOR, Kernel
from ..core.transforms import inverse_softplus_with_floor, softplus_with_floor

SQRT2 = math.sqrt(2.0)
SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
SQRT_2PI = math.sqrt(2.0 * math.pi)


def se_interval_integral(x: Tensor, lengthscale: Tensor, low: float, high: float) -> Tensor:
    """``∫_low^high exp(−(x − t)²/2ℓ²) dt`` [N] at x [N] (unit variance)."""
    s = SQRT2 * lengthscale
    return SQRT_HALF_PI * lengthscale * (torch.erf((high - x) / s) + torch.erf((x - low) / s))


def se_interval_double_integral(lengthscale: Tensor, low: float, high: float) -> Tensor:
    """``∬_[low,high]² exp(−(x − t)²/2ℓ²) dx dt`` (unit variance)."""
    width = high - low
    ell = lengthscale
    # -expm1 keeps 1 − e^{−w²/2ℓ²} accurate for long lengthscales (the near-linear terms).
    tail = -torch.expm1(-(width * width) / (2.0 * ell * ell))
    return SQRT_2PI * ell * width * torch.erf(width / (SQRT2 * ell)) - 2.0 * ell * ell * tail


def matern32_interval_integral(x: Tensor, lengthscale: Tensor, low: float, high: float) -> Tensor:
    """``∫_low^high (1 + λ|x − t|) e^{−λ|x − t|} dt`` [N] at x [N], λ = √3/ℓ (unit variance).

    With ``g(D) = ∫_0^D (1 + λr) e^{−λr} dr = (2 − (2 + λD) e^{−λD}) / λ`` extended as an odd
    function, it is ``g(high − x) + g(x − low)``: inside the interval both terms count, outside
    the nearer end's is subtracted from the farther one's.
    """
    lam = SQRT3 / lengthscale

    def g(d: Tensor) -> Tensor:
        u = lam * torch.abs(d)
        return torch.sign(d) * (-2.0 * torch.expm1(-u) - u * torch.exp(-u)) / lam

    return g(high - x) + g(x - low)


def matern32_interval_double_integral(lengthscale: Tensor, low: float, high: float) -> Tensor:
    """``∬_[low,high]² (1 + λ|x − t|) e^{−λ|x − t|} dx dt`` (unit variance).

    It is ``2/λ² (2u + 3(e^{−u} − 1) + u e^{−u})`` with u = λ (high − low).
    """
    lam = SQRT3 / lengthscale
    u = lam * (high - low)
    return 2.0 / (lam * lam) * (2.0 * u + 3.0 * torch.expm1(-u) + u * torch.exp(-u))


class _ZeroMeanStationary(Kernel):
    """A one-column stationary kernel ``v·k(r)`` minus its projection on the constants.

    A subclass gives the unit-variance profile ``_profile(x − x')`` and its single and double
    integrals over the interval; everything else (θ, the projection, the spec) is shared.
    """

    kind = ""
    label = ""  # the kernel's name in error messages

    def __init__(
        self,
        variance: float,
        lengthscale: float,
        active_dims: Sequence[int],
        interval: tuple[float, float] | None,
    ) -> None:
        super().__init__(active_dims)
        if self.active_dims is None or len(self.active_dims) != 1:
            raise ValueError(
                f"a zero-mean {self.label} reads exactly one column, got {active_dims}"
            )
        self.interval: tuple[float, float] | None = None
        if interval is not None:
            self.set_interval(*interval)
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, VARIANCE_FLOOR))
        self.raw_lengthscale = nn.Parameter(
            inverse_softplus_with_floor(float(lengthscale), LENGTHSCALE_FLOOR)
        )

    def set_interval(self, low: float, high: float) -> None:
        """Fix the interval the sample paths integrate to zero over."""
        low, high = float(low), float(high)
        if not (math.isfinite(low) and math.isfinite(high) and high > low):
            raise ValueError(f"interval must be finite with high > low, got {(low, high)}")
        self.interval = (low, high)

    @property
    def variance(self) -> Tensor:
        return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)

    @property
    def lengthscale(self) -> Tensor:
        return softplus_with_floor(self.raw_lengthscale, LENGTHSCALE_FLOOR)

    @staticmethod
    def _profile(d: Tensor, lengthscale: Tensor) -> Tensor:
        """The unit-variance kernel at differences d."""
        raise NotImplementedError

    @staticmethod
    def _integral(x: Tensor, lengthscale: Tensor, low: float, high: float) -> Tensor:
        raise NotImplementedError

    @staticmethod
    def _double_integral(lengthscale: Tensor, low: float, high: float) -> Tensor:
        raise NotImplementedError

    def _projection(self, x: Tensor) -> Tensor:
        """``h(x) / √H`` [N] for one column x [N]; the projection is its outer product."""
        if self.interval is None:
            raise ValueError(
                f"the zero-mean {self.label} kernel has no interval yet (set at a fit)"
            )
        low, high = self.interval
        ell = self.lengthscale
        h = self.variance * self._integral(x, ell, low, high)
        H = self.variance * self._double_integral(ell, low, high)
        return h / torch.sqrt(H)

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        X2 = X if X2 is None else X2
        x, x2 = X[:, 0], X2[:, 0]
        g = self.variance * self._profile(x[:, None] - x2[None, :], self.lengthscale)
        return g - self._projection(x)[:, None] * self._projection(x2)[None, :]

    def _K_diag(self, X: Tensor) -> Tensor:
        p = self._projection(X[:, 0])
        return self.variance - p * p

    def to_spec(self) -> dict[str, Any]:
        return self._leaf_spec(
            {
                "type": self.kind,
                "variance": float(self.variance.detach()),
                "lengthscale": float(self.lengthscale.detach()),
                "interval": None if self.interval is None else list(self.interval),
            }
        )

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(self.kind, {"variance": self.variance, "lengthscale": self.lengthscale})]


class ZeroMeanSE(_ZeroMeanStationary):
    """SE kernel on one input column, minus its projection on the constants over [low, high].

    Args:
        variance: v of the SE kernel ``g = v exp(−r²/2ℓ²)`` before the projection.
        lengthscale: ℓ (one column only).
        active_dims: the one input column it reads.
        interval: (low, high), the range the components integrate to zero over.
    """

    kind = "zero_mean_se"
    label = "SE"

    def __init__(
        self,
        variance: float = 1.0,
        lengthscale: float = 1.0,
        active_dims: Sequence[int] = (0,),
        interval: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        super().__init__(variance, lengthscale, active_dims, interval)

    @staticmethod
    def _profile(d: Tensor, lengthscale: Tensor) -> Tensor:
        r = d / lengthscale
        return torch.exp(-0.5 * r * r)

    _integral = staticmethod(se_interval_integral)
    _double_integral = staticmethod(se_interval_double_integral)


class ZeroMeanMatern32(_ZeroMeanStationary):
    """Matérn-3/2 on one column, minus its projection on the constants over [low, high].

    The drift component's kernel: a slow time-varying offset that integrates to zero over the
    log, so the level of the field stays with the ``offset`` component (our identifiability
    rule). The interval may be left unset (None) and given at the first fit, when the
    log's time span is known; the kernel cannot be evaluated before.

    Args:
        variance: v of ``v (1 + λr) e^{−λr}`` before the projection [µT²].
        lengthscale: ℓ [the column's unit, seconds for time].
        active_dims: the one input column it reads.
        interval: (low, high), or None until the data are seen.
    """

    kind = "zero_mean_matern32"
    label = "Matérn-3/2"

    def __init__(
        self,
        variance: float = 1.0,
        lengthscale: float = 1.0,
        active_dims: Sequence[int] = (0,),
        interval: tuple[float, float] | None = None,
    ) -> None:
        super().__init__(variance, lengthscale, active_dims, interval)

    @staticmethod
    def _profile(d: Tensor, lengthscale: Tensor) -> Tensor:
        r = SQRT3 * torch.abs(d) / lengthscale
        return (1.0 + r) * torch.exp(-r)

    _integral = staticmethod(matern32_interval_integral)
    _double_integral = staticmethod(matern32_interval_double_integral)
