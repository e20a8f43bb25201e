"""The prediction cache of a fitted SVGP / SOLVE-GP posterior, with its coarse and detail layers.

Shi, Titsias & Mnih 2020, App. D.2: for test inputs x*, with B* = L_u⁻¹ K_u* and
D* = L_v⁻¹ (K_v* − Aᵀ B*),

    mean = B*ᵀ m̃_u            + D*ᵀ m̃_v
    var  = |L̃_uᵀ B*|²          + (k** − |B*|² − |D*|² + |L̃_vᵀ D*|²)
           (coarse: span of Z)   (detail: the orthogonal part f⊥, informed by O)

The two parts are independent under q, so mean and variance are their sums. The posterior is
fitted on targets divided by ``scale`` (``model.py``); it reports in the data's units (µT).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..model import ScalarOutputs
from .svgp import (
    MARGINAL_VARIANCE_FLOOR,
    Marginals,
    PriorFactors,
    WhitenedQ,
    marginals_from_projections,
)

# Test points per chunk: bounds the [M, chunk] projections at 8·M·chunk bytes.
PREDICT_CHUNK = 4096
LAYER_NAMES = ("coarse_mean", "coarse_var", "detail_mean", "detail_var")


@dataclass(frozen=True)
class SolvePosterior(ScalarOutputs):
    """Immutable prediction cache of q(f) = ∫ p(f | u, v⊥) q(u) q(v⊥).

    Attributes:
        kernel: k at the fitted θ, in the fitted (scaled) units.
        Z: [M, D]; Zo: O [M2, D].
        factors: the block Cholesky of the prior over [Z; O].
        q: q in the whitened coordinates.
        scale: the targets were divided by it; predictions are multiplied back [µT].
        shift: and had it subtracted first (0 unless centred) [µT].
        noise_variance: σ² in the data's units [µT²].
    """

    kernel: Kernel
    Z: Tensor
    Zo: Tensor
    factors: PriorFactors
    q: WhitenedQ
    scale: float
    shift: float
    noise_variance: float

    @property
    def support(self) -> Tensor:
        """[M + M2, D] the inducing inputs: Z then O."""
        return torch.cat([self.Z, self.Zo]) if self.Zo.shape[0] else self.Z

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    @property
    def num_orthogonal(self) -> int:
        return int(self.Zo.shape[0])

    def _marginals(self, Kus: Tensor, Kvs: Tensor, kss: Tensor) -> Marginals:
        """q(f) from kernel columns K_u* [M, S], K_v* [M2, S] and k** [S], in fitted units."""
        L_u = self.factors.L_u
        B = torch.linalg.solve_triangular(L_u, Kus.to(L_u.dtype), upper=False)
        if self.num_orthogonal:
            D = torch.linalg.solve_triangular(
                self.factors.L_v, Kvs.to(L_u.dtype) - self.factors.A.mT @ B, upper=False
            )
        else:
            D = B.new_zeros((0, B.shape[1]))
        return marginals_from_projections(kss.to(L_u.dtype), B, D, self.q)

    def _chunked(self, Xs: Tensor) -> Marginals:
        parts = []
        for s in range(0, Xs.shape[0], PREDICT_CHUNK):
            X = Xs[s : s + PREDICT_CHUNK]
            parts.append(
                self._marginals(
                    self.kernel.K(self.Z, X), self.kernel.K(self.Zo, X), self.kernel.K_diag(X)
                )
            )
        if not parts:
            empty = Xs.new_zeros(0)
            return Marginals(empty, empty, empty, empty)
        return Marginals(*(torch.cat([getattr(p, f) for p in parts]) for f in Marginals._fields))

    @torch.no_grad()
    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        """The coarse (span of Z) and detail (orthogonal, O) parts of the prediction.

        Args:
            Xs: [S, D].

        Returns:
            ``coarse_mean`` (with the shift) [µT], ``coarse_var`` [µT²], ``detail_mean`` [µT],
            ``detail_var`` [µT²], each [S]; ``mean = coarse_mean + detail_mean`` and
            ``var = coarse_var + detail_var`` are :meth:`predict`'s.
        """
        m = self._chunked(Xs)
        s2 = self.scale * self.scale
        return {
            "coarse_mean": self.shift + self.scale * m.mean_u,
            "coarse_var": s2 * m.var_u,
            "detail_mean": self.scale * m.mean_v,
            "detail_var": s2 * torch.clamp(m.var_v, min=0.0),
        }

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean [µT] and variance [µT²], each [S], at Xs [S, D] (add σ² for y)."""
        m = self._chunked(Xs)
        return self.shift + self.scale * m.mean, self.scale * self.scale * m.var

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (every inducing point is used; a tile costs O(S (M + M2)²))."""
        return self.predict(Xs)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] the latent variance where no data are near [µT²].

        Far from every inducing point only the kernel's constant part (the field's offset)
        still correlates with them: the predictive variance there, with k(x, Z) = k(x, O) = c.
        Without a constant part it is k(x, x).
        """
        c = self.kernel.constant_variance()
        one = Xs.new_full((1, 1), c)
        # The variance is k(x, x) less a reduction that is the same at every far-away x.
        m = self._marginals(
            one.expand(self.num_inducing, 1), one.expand(self.num_orthogonal, 1), Xs.new_zeros(1)
        )
        var = self.kernel.K_diag(Xs) + (m.var_u + m.var_v)[0]
        return self.scale * self.scale * torch.clamp(var, min=MARGINAL_VARIANCE_FLOOR)
