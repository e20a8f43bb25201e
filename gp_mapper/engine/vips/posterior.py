"""What one batch hands to the next, and the immutable cache that prediction reads.

The carried posterior is the "whitened natural" form of q(a) (our form, not in
Pescador-Barrios et al. 2024 or Bui et al. 2017): with
``L = chol(K_θ(Z, Z) + εI)`` at the θ of the batch that produced it, ``q(a) = N(L D⁻¹ v, L D⁻¹ Lᵀ)``
where ``D = I + P``. ``P`` is PSD by construction, so no difference of two large precisions is
ever formed (the fragility of the paper's ``S_a⁻¹ − K'_aa⁻¹``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import Jitter, solve_lower, solve_upper_t
from ..model import ScalarOutputs

# Predictive variances are differences of large terms; clamp the round-off below zero.
VARIANCE_CLAMP = 0.0
# predict_block leaves out inducing points whose correlation with every point of the block is
# below this fraction of the kernel variance: ~1e-8 µT on a 20 m map of 500 points (measured).
BLOCK_CUTOFF = 1e-9


class CarriedPosterior(NamedTuple):
    """q(a) over the function values at the inducing inputs Z, in whitened natural form.

    Attributes:
        Z: inducing inputs [M, D].
        L: chol(K_θ(Z, Z) + εI) [M, M] under the θ that produced it (the "old" prior factor).
        P: D − I [M, M], PSD: the data's precision in the whitened basis.
        v: L⁻¹ c [M], the whitened natural mean.
        L_D: chol(I + P) [M, M].
        jitter: the jitter used in L.
    """

    Z: Tensor
    L: Tensor
    P: Tensor
    v: Tensor
    L_D: Tensor
    jitter: Jitter

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    def mean_and_cov(self) -> tuple[Tensor, Tensor]:
        """``(m_a [M], S_a [M, M])`` of q(a), for tests and export."""
        w = torch.cholesky_solve(self.v[:, None], self.L_D)[:, 0]
        m = self.L @ w
        B = solve_lower(self.L_D, self.L.mT)  # L_D⁻¹ Lᵀ
        return m, B.mT @ B


class RebuiltMatrix:
    """A matrix a cache may drop and compute again from what it was made of.

    Args:
        value: the matrix, as first computed.
        rebuild: computes it again, the same numbers (the same operations on the same inputs);
            None: it cannot be dropped.
    """

    def __init__(self, value: Tensor, rebuild: Callable[[], Tensor] | None) -> None:
        self._value: Tensor | None = value
        self._rebuild = rebuild

    @property
    def held(self) -> bool:
        """Whether the matrix is in memory now."""
        return self._value is not None

    def get(self) -> Tensor:
        value = self._value  # read once: a release from another thread may clear it
        if value is None:
            assert self._rebuild is not None  # only a rebuildable matrix is ever dropped
            value = self._rebuild()
            self._value = value
        return value

    def release(self) -> None:
        if self._rebuild is not None:
            self._value = None


def _explained_precision(carried: CarriedPosterior, D_inv: Tensor | None = None) -> Tensor:
    """W = L⁻ᵀ (I − D⁻¹) L⁻¹ of a carried posterior, symmetric to round-off (``D_inv``: D⁻¹
    if the caller has it, the same numbers as computed here)."""
    eye = torch.eye(carried.num_inducing, dtype=carried.L.dtype, device=carried.L.device)
    if D_inv is None:
        D_inv = torch.cholesky_solve(eye, carried.L_D)
    inner = eye - D_inv
    W = solve_upper_t(carried.L, solve_upper_t(carried.L, inner).mT)
    return 0.5 * (W + W.mT)


@dataclass(frozen=True)
class Posterior(ScalarOutputs):
    """Immutable prediction cache of the sparse posterior q(f) (GPflow's SGPRPosterior idea).

    ``mean(x) = k_xb α`` and ``var(x) = k(x, x) − k_xb W k_bx`` with
    ``α = L_b⁻ᵀ D⁻¹ v`` and ``W = L_b⁻ᵀ (I − D⁻¹) L_b⁻¹``, so a prediction is one kernel block and
    one matrix product: O(S M²) for S test points.

    Attributes:
        kernel: the kernel at the final θ of the last batch (never trained again).
        Z: inducing inputs [M, D].
        noise_variance: σ² (for the predictive of y).
        alpha: [M].
        W_cache: W [M, M], which :meth:`release` drops and the next prediction computes again.
    """

    kernel: Kernel
    Z: Tensor
    noise_variance: float
    alpha: Tensor
    W_cache: RebuiltMatrix
    W_ones: Tensor  # [M] W 1, for the constant part of the kernel
    ones_W_ones: float  # 1ᵀ W 1
    alpha_sum: float  # 1ᵀ α
    block_radius: float | None  # distance past which the stationary part is below BLOCK_CUTOFF

    @classmethod
    def from_carried(
        cls, kernel: Kernel, carried: CarriedPosterior, noise_variance: float
    ) -> Posterior:
        eye = torch.eye(carried.num_inducing, dtype=carried.L.dtype, device=carried.L.device)
        D_inv = torch.cholesky_solve(eye, carried.L_D)
        alpha = solve_upper_t(carried.L, D_inv @ carried.v)
        W = _explained_precision(carried, D_inv)
        W_ones = W.sum(1)
        local = kernel.without_constant()
        return cls(
            kernel,
            carried.Z,
            noise_variance,
            alpha,
            RebuiltMatrix(W, partial(_explained_precision, carried)),
            W_ones,
            float(W_ones.sum()),
            float(alpha.sum()),
            None if local is None else local.negligible_distance(BLOCK_CUTOFF),
        )

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    @property
    def W(self) -> Tensor:
        """[M, M] ``L_b⁻ᵀ (I − D⁻¹) L_b⁻¹`` (computed again if :meth:`release` dropped it)."""
        return self.W_cache.get()

    def release(self) -> None:
        """Drop W, the one M × M matrix the cache holds beyond the carried posterior (a map
        tile long idle); the next prediction computes it again, the same numbers."""
        self.W_cache.release()

    @property
    def support(self) -> Tensor:
        """The inputs the posterior rests on [M, D]: the inducing points."""
        return self.Z

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance at test inputs.

        Args:
            Xs: test inputs [S, D] on this posterior's device and dtype.

        Returns:
            (mean [S], variance [S]) of f(Xs); add ``noise_variance`` for y.
        """
        Ksb = self.kernel.K(Xs, self.Z)
        mean = Ksb @ self.alpha
        var = self.kernel.K_diag(Xs) - ((Ksb @ self.W) * Ksb).sum(-1)
        return mean, torch.clamp(var, min=VARIANCE_CLAMP)

    @torch.no_grad()
    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` for a spatially compact block, from the inducing points near it.

        With ``k = c + g`` (a constant c plus a stationary g that vanishes with distance),
        ``mean = c 1ᵀα + g_Sᵀ α_S`` and ``var = k(x, x) − c² 1ᵀW1 − 2c g_Sᵀ (W1)_S −
        g_Sᵀ W_SS g_S``, where S are the inducing points within the distance at which g falls
        below ``BLOCK_CUTOFF`` of its variance from the block's bounding box. The cost is
        O(S_block · |S|²) instead of O(S_block · M²): a large map is mostly far away.

        Args:
            Xs: test inputs [S, D] that lie close together (a tile of a grid).

        Returns:
            (mean [S], variance [S]) of f(Xs), equal to :meth:`predict` up to the cutoff.
        """
        local = self.kernel.without_constant()
        radius = self.block_radius
        if local is None or radius is None:
            return self.predict(Xs)
        lo, hi = Xs.min(0).values, Xs.max(0).values
        gap = torch.clamp(lo - self.Z, min=0.0) + torch.clamp(self.Z - hi, min=0.0)
        near = torch.nonzero((gap * gap).sum(1) <= radius * radius).squeeze(1)
        c = self.kernel.constant_variance()
        G = local.K(Xs, self.Z[near])
        mean = c * self.alpha_sum + G @ self.alpha[near]
        W_near = self.W[near][:, near]
        var = (
            self.kernel.K_diag(Xs)
            - c * c * self.ones_W_ones
            - 2.0 * c * (G @ self.W_ones[near])
            - ((G @ W_near) * G).sum(-1)
        )
        return mean, torch.clamp(var, min=VARIANCE_CLAMP)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """Variance of f where no data are near: k(x, x) less what the data tell of the offset.

        A constant kernel part models the field's mean offset, which every datum informs,
        wherever it is; far from all data only that part is known. Comparing the predictive
        variance with this value says whether the *local* field is known.

        Args:
            Xs: inputs [S, D].

        Returns:
            [S].
        """
        c = self.kernel.constant_variance()
        return self.kernel.K_diag(Xs) - c * c * self.ones_W_ones
