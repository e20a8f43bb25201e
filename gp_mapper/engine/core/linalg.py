"""Cholesky factorisation with a jitter ladder, and the triangular solves built on it.

No explicit inverses: every ``A⁻¹ B`` is a triangular or Cholesky solve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import NumericalError

LOG_2PI = math.log(2.0 * math.pi)

# Relative jitters tried in turn, each times mean(diag K). The first rung is always added, so that
# the factor is a smooth function of the hyperparameters during a fit; it is about the authors'
# absolute 1e-6 for a kernel of variance ~500 (the magnetometer model). Later rungs only on failure.
JITTER_LADDER: tuple[float, ...] = (1e-8, 1e-6, 1e-4)
# An absolute jitter climbs by the same factors as the relative ladder.
ABSOLUTE_LADDER_FACTORS: tuple[float, ...] = (1.0, 1e2, 1e4)


@dataclass(frozen=True)
class Jitter:
    """What is added to a kernel matrix's diagonal before its Cholesky.

    Relative (the default): ``value · mean(diag K)``. The conditioning is then the same whatever
    the kernel's units, so a model in µT² and one on standardised targets behave alike.
    Absolute: ``value`` in the kernel's units. This is the VIPS authors' convention (ε = 1e-6 on
    standardised UCI targets); it penalises a small kernel variance, so maximum likelihood on
    near-noiseless data settles elsewhere than under a relative jitter. The authors pair it with
    an upper limit on the variance (``Stationary(variance_max=2000)``); without one the
    variance can run away on such data (naval: past 1e5).

    Attributes:
        value: the first rung (≥ 0; > 0 when absolute).
        relative: whether ``value`` multiplies ``mean(diag K)``.
    """

    value: float = JITTER_LADDER[0]
    relative: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value >= 0.0):
            raise ValueError(f"jitter must be finite and non-negative, got {self.value}")
        if not self.relative and self.value == 0.0:
            raise ValueError("an absolute jitter must be positive")

    @classmethod
    def coerce(cls, jitter: float | Jitter) -> Jitter:
        """A float is a relative first rung (the form the internal solves use)."""
        return jitter if isinstance(jitter, Jitter) else cls(float(jitter))

    def rungs(self) -> tuple[Jitter, ...]:
        """This jitter, then the larger ones tried when a factorisation fails."""
        if self.relative:
            values = (self.value, *(j for j in JITTER_LADDER if j > self.value))
        else:
            values = tuple(self.value * f for f in ABSOLUTE_LADDER_FACTORS)
        return tuple(Jitter(v, self.relative) for v in values)

    def amount(self, diag_mean: float | Tensor) -> float | Tensor:
        """The value added to the diagonal of a matrix whose mean diagonal is ``diag_mean``."""
        return self.value * diag_mean if self.relative else self.value

    def __str__(self) -> str:
        return f"{'relative' if self.relative else 'absolute'} jitter {self.value:g}"


def jitter_scale(diag: Tensor) -> Tensor:
    """The scale the relative jitters multiply: the mean of a kernel diagonal [M].

    Floored just above zero for an all-zero diagonal, and 1 for an empty one.
    """
    if diag.shape[-1] == 0:
        return torch.ones((), dtype=diag.dtype, device=diag.device)
    return torch.clamp(diag.mean(-1), min=torch.finfo(diag.dtype).tiny)


def cholesky_with_jitter(
    K: Tensor, jitter: float | Jitter = JITTER_LADDER[0], *, scale: Tensor | None = None
) -> tuple[Tensor, Jitter]:
    """Lower Cholesky factor of ``K + ε·I``, climbing the ladder from ``jitter``.

    Args:
        K: symmetric matrix [M, M].
        jitter: the first jitter to try (a float is relative); larger rungs follow on failure.
        scale: what a relative jitter multiplies; default the mean of K's own diagonal. A
            Schur complement (SOLVE-GP's C_vv) passes the kernel's variance instead: its own
            diagonal shrinks to zero as O approaches Z, and the jitter with it.

    Returns:
        (L, the jitter used), L [M, M] lower triangular.

    Raises:
        NumericalError: K has non-finite entries or is not positive definite at any rung.
    """
    first = Jitter.coerce(jitter)
    M = K.shape[-1]
    if M == 0:
        return K.clone(), first
    if not torch.isfinite(K).all():
        raise NumericalError(f"matrix of size {M} has non-finite entries")
    # The scale is detached: the jitter is a constant of each factorisation, not a parameter.
    if scale is None:
        scale = jitter_scale(torch.diagonal(K, dim1=-2, dim2=-1))
    scale = scale.detach()
    eye = torch.eye(M, dtype=K.dtype, device=K.device)
    rungs = first.rungs()
    for rung in rungs:
        L, info = torch.linalg.cholesky_ex(K + rung.amount(scale) * eye)
        if int(info) == 0:
            return L, rung
    raise NumericalError(f"matrix of size {M} is not positive definite even with {rungs[-1]}")


def solve_lower(L: Tensor, B: Tensor) -> Tensor:
    """``L⁻¹ B`` for lower-triangular L [M, M] and B [M, K] (or [M])."""
    if B.ndim == 1:
        return torch.linalg.solve_triangular(L, B[:, None], upper=False)[:, 0]
    return torch.linalg.solve_triangular(L, B, upper=False)


def solve_upper_t(L: Tensor, B: Tensor) -> Tensor:
    """``L⁻ᵀ B`` for lower-triangular L [M, M] and B [M, K] (or [M])."""
    if B.ndim == 1:
        return torch.linalg.solve_triangular(L.mT, B[:, None], upper=True)[:, 0]
    return torch.linalg.solve_triangular(L.mT, B, upper=True)


def logdet_from_cholesky(L: Tensor) -> Tensor:
    """``log|L Lᵀ|`` from its Cholesky factor."""
    return 2.0 * torch.log(torch.diagonal(L)).sum()


def gaussian_log_density(y: Tensor, mean: Tensor, cov: Tensor) -> Tensor:
    """``log N(y; mean, cov)`` for a full covariance [N, N] (jittered Cholesky)."""
    L, _ = cholesky_with_jitter(cov, jitter=0.0)
    r = solve_lower(L, y - mean)
    n = y.shape[0]
    return -0.5 * (n * LOG_2PI + r @ r) - torch.log(torch.diagonal(L)).sum()
