"""The computation-aware posterior as a frozen prediction cache.

Wenger et al. 2024, Sec. 2 eq. 5, computed as their Algorithm S2.

Given actions S [N, I], with ``G = SᵀK̂S = LLᵀ`` and ``ṽ = G⁻¹Sᵀy``::

    μ_I(x) = K(x, X) S ṽ
    K_I(x, x) = k(x, x) − ‖L⁻¹ SᵀK(X, x)‖²

The variance is that of the exact GP (the mathematical part) plus ``K(x, X)(K̂⁻¹ − C_I)K(X, x)
≥ 0`` (the computational part): never below the exact GP's at the same θ, and falling as
actions are added (Prop. S1).

Prediction is O(N) kernel evaluations per point (the row ``K(x, X) S``), not O(M) as for an
inducing-point model: a map of a long log is best predicted once on its grid (which
:meth:`CaGPPosterior.predict` does in chunks of grid points), not served point by point.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import JITTER_LADDER, Jitter, cholesky_with_jitter, solve_lower
from ..model import ScalarOutputs
from .actions import Actions
from .elbo import GRAM_DTYPE, evaluate_elbo
from .kernel_actions import DEFAULT_CHUNK, block_rows, contract

# Variances are differences of large terms; round-off below zero is clamped away.
VARIANCE_CLAMP = 0.0
# The split into mathematical and computational variance needs the exact GP's Cholesky
# (O(N³) time, O(N²) memory: the computational part is K(x, X)(K̂⁻¹ − C_I)K(X, x)), and every
# map cell a solve against it; past this many points it is not offered. At N 17 794 the split
# of a 40 000-cell grid took 164 s against the 57-s fit (CaGP-CG, 64 actions, one epoch, this
# 2-core machine); at 5000 points it is seconds.
MAX_EXACT_SPLIT = 5000


@dataclass(frozen=True)
class CaGPPosterior(ScalarOutputs):
    """``f | Sᵀy``: exact inference on the projected data (Lemma S1).

    Attributes:
        kernel: the kernel at the θ the posterior was formed with (never trained again).
        X: the training inputs [N, D] (every one: prediction needs them all).
        actions: S [N, I] with orthonormal columns (detached).
        L: chol(SᵀK̂S) [I, I], float64.
        v_tilde: ṽ = (SᵀK̂S)⁻¹Sᵀy [I], float64.
        noise_variance: σ².
        ones_solved: ‖L⁻¹Sᵀ1‖², what the projected data tell of a constant kernel part.
        elbo: ℓ_ELBO at this θ and S [nats] (≥ −log p(y | θ)).
        chunk: points per kernel block when predicting (memory O(chunk·N)).
    """

    kernel: Kernel
    X: Tensor
    actions: Actions
    L: Tensor
    v_tilde: Tensor
    noise_variance: float
    ones_solved: float
    elbo: float
    chunk: int = DEFAULT_CHUNK

    @classmethod
    @torch.no_grad()
    def build(
        cls,
        kernel: Kernel,
        noise_variance: float,
        X: Tensor,
        y: Tensor,
        actions: Actions,
        *,
        chunk: int = DEFAULT_CHUNK,
        jitter: float | Jitter = JITTER_LADDER[0],
    ) -> CaGPPosterior:
        """Form ``K S``, factor the Gram and solve for ṽ (Algorithm S2).

        Args:
            kernel: prior kernel at the final θ.
            noise_variance: σ².
            X: inputs [N, D]; y: targets [N].
            actions: S with orthonormal columns.
            chunk: rows per kernel block.
            jitter: first jitter of the Gram's Cholesky.

        Raises:
            NumericalError: the Gram is not positive definite.
        """
        frozen = Actions(
            actions.values.detach(), None if actions.index is None else actions.index.detach()
        )
        noise = torch.as_tensor(noise_variance, dtype=X.dtype, device=X.device)
        elbo = evaluate_elbo(kernel, noise, X, y, frozen, chunk=chunk, jitter=jitter)
        ones = frozen.transpose_apply(torch.ones_like(y)).to(GRAM_DTYPE)
        ones_solved = solve_lower(elbo.L, ones)
        return cls(
            kernel,
            X,
            frozen,
            elbo.L,
            elbo.v_tilde,
            float(noise_variance),
            float(ones_solved @ ones_solved),
            float(elbo.loss),
            chunk,
        )

    @property
    def support(self) -> Tensor:
        """[N, D] the inputs the posterior rests on: all the training inputs."""
        return self.X

    @property
    def num_actions(self) -> int:
        return self.actions.num_actions

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at Xs [S, D] (add ``noise_variance`` for y).

        The variance is the combined one (mathematical + computational).
        """
        means, variances = [], []
        points = self.actions.points(self.X)
        step = block_rows(self.chunk, points.shape[0], Xs.element_size())
        for start in range(0, Xs.shape[0], step):
            Xc = Xs[start : start + step]
            KSs = contract(self.kernel.K(Xc, points), self.actions.values, self.actions.block)
            KSs = KSs.to(GRAM_DTYPE)
            A = solve_lower(self.L, KSs.mT)
            means.append(KSs @ self.v_tilde)
            variances.append(self.kernel.K_diag(Xc).to(GRAM_DTYPE) - (A * A).sum(0))
        mean = torch.cat(means) if means else Xs.new_zeros(0, dtype=GRAM_DTYPE)
        var = torch.cat(variances) if variances else Xs.new_zeros(0, dtype=GRAM_DTYPE)
        return mean.to(Xs.dtype), torch.clamp(var, min=VARIANCE_CLAMP).to(Xs.dtype)

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (a CaGP posterior has no local support to skip)."""
        return self.predict(Xs)

    def predictive(self, Xs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mean, latent variance and predictive variance of y (latent + σ²), each [S]."""
        mean, var = self.predict(Xs)
        return mean, var, var + self.noise_variance

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] variance far from all data: k(x, x) less what Sᵀy tell of a constant offset c
        (``c² 1ᵀS G⁻¹ Sᵀ1``)."""
        c = self.kernel.constant_variance()
        return self.kernel.K_diag(Xs) - c * c * self.ones_solved

    @cached_property
    def _exact_factor(self) -> Tensor:
        """chol(K + σ²I) [N, N] of the exact GP at this θ, formed once (O(N³))."""
        n = self.X.shape[0]
        with torch.no_grad():
            K = self.kernel.K(self.X).to(GRAM_DTYPE)
            eye = torch.eye(n, dtype=GRAM_DTYPE, device=K.device)
            L_exact, _ = cholesky_with_jitter(K + self.noise_variance * eye, jitter=0.0)
        return L_exact

    @torch.no_grad()
    def variance_parts(self, Xs: Tensor) -> dict[str, Tensor]:
        """The map's values at Xs [S, D], each [S].

        Keys: ``mean``, ``variance`` (latent, combined), ``predictive_variance`` (+ σ²),
        ``mathematical_variance`` (the exact GP's at this θ) and ``computational_variance``
        (the share the approximation adds, ≥ 0). The last two need the exact GP's Cholesky
        (O(N³)), formed once per posterior.

        Raises:
            ValueError: N > MAX_EXACT_SPLIT (the split is then not affordable).
            NumericalError: K + σ²I is not positive definite.
        """
        n = self.X.shape[0]
        if n > MAX_EXACT_SPLIT:
            raise ValueError(
                f"the variance split needs an exact Cholesky of {n} points "
                f"(at most {MAX_EXACT_SPLIT}); use predict() for the combined variance"
            )
        mean, var = self.predict(Xs)
        L_exact = self._exact_factor
        exact = []
        step = block_rows(self.chunk, n, Xs.element_size())
        for start in range(0, Xs.shape[0], step):
            Xc = Xs[start : start + step]
            B = solve_lower(L_exact, self.kernel.K(self.X, Xc).to(GRAM_DTYPE))
            exact.append(self.kernel.K_diag(Xc).to(GRAM_DTYPE) - (B * B).sum(0))
        mathematical = torch.clamp(torch.cat(exact), min=VARIANCE_CLAMP).to(Xs.dtype)
        return {
            "mean": mean,
            "variance": var,
            "predictive_variance": var + self.noise_variance,
            "mathematical_variance": mathematical,
            "computational_variance": torch.clamp(var - mathematical, min=VARIANCE_CLAMP),
        }

    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        """The map's extra layers at Xs [S, D]: the mathematical and the computational share
        of the latent variance, each [S] (µT²); none above MAX_EXACT_SPLIT training points,
        where the exact factor that splits them is not affordable."""
        if self.X.shape[0] > MAX_EXACT_SPLIT:
            return {}
        parts = self.variance_parts(Xs)
        return {k: parts[k] for k in ("mathematical_variance", "computational_variance")}
