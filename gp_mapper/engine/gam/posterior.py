"""Frozen prediction caches of a fitted additive model: per component, any subset, the total.

For a subset S of components at x (Adam, Durrande & John 2018, App. C gives it for all
components; any subset is the same algebra):
``mean_S = Σ_{c∈S} mean_c`` and ``var_S = Σ_{c∈S} d_c − ‖Σ_{c∈S} V_c‖² + ‖Σ_{c∈S} G_c‖²``,
where each posterior form supplies per component the mean, a diagonal d_c and the columns
V_c (subtracted) and G_c (added). The cross-covariance of c and c' is ``−V_cᵀV_c' + G_cᵀG_c'``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.linalg import solve_lower
from ..model import ScalarOutputs
from .component import Component

# Predictive variances are differences of large terms; clamp the round-off below zero.
VARIANCE_CLAMP = 0.0


class ComponentTerms(NamedTuple):
    """One component's share of the predictive at S test inputs.

    Attributes:
        mean: [S] posterior mean of f_c.
        diag: [S] d_c, the part of the variance that does not couple to other components.
        down: [R, S] V_c, whose summed squares are subtracted.
        up: [K, S] G_c, whose summed squares are added (K = 0 where the form has none).
    """

    mean: Tensor
    diag: Tensor
    down: Tensor
    up: Tensor


@dataclass(frozen=True)
class AdditivePosterior(ScalarOutputs, ABC):
    """q of an additive model with its factors; the shared prediction arithmetic.

    Attributes:
        components: the fitted components (kernels at the fitted θ, never trained again).
        noise_variance: σ² of the observations.
    """

    components: tuple[Component, ...]
    noise_variance: float

    @abstractmethod
    def terms(self, Xs: Tensor) -> list[ComponentTerms]:
        """Each component's :class:`ComponentTerms` at Xs [S, D], in component order."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.components)

    @property
    def support(self) -> Tensor:
        """Inducing inputs [M, D] of the components that have a location (not the offsets)."""
        located = [c.inducing for c in self.components if c.kernel.without_constant() is not None]
        if not located:
            return self.components[0].inducing[:0]
        return torch.cat(located, 0)

    def _indices(self, names: Sequence[str] | None) -> list[int]:
        if names is None:
            return list(range(len(self.components)))
        unknown = [n for n in names if n not in self.names]
        if unknown or not names:
            raise ValueError(f"unknown or no components {list(names)}; have {list(self.names)}")
        return [self.names.index(n) for n in names]

    @torch.no_grad()
    def predict_subset(
        self, Xs: Tensor, names: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] of ``Σ_{c∈names} f_c`` at Xs [S, D] (None: all)."""
        terms = self.terms(Xs)
        chosen = [terms[i] for i in self._indices(names)]
        mean = sum(t.mean for t in chosen)
        down = sum(t.down for t in chosen)
        up = sum(t.up for t in chosen)
        var = sum(t.diag for t in chosen) - (down * down).sum(0) + (up * up).sum(0)
        return mean, torch.clamp(var, min=VARIANCE_CLAMP)

    @torch.no_grad()
    def predict_components(self, Xs: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
        """Each component's latent mean and variance [S] at Xs [S, D], by name."""
        out = {}
        for c, t in zip(self.components, self.terms(Xs), strict=True):
            var = t.diag - (t.down * t.down).sum(0) + (t.up * t.up).sum(0)
            out[c.name] = (t.mean, torch.clamp(var, min=VARIANCE_CLAMP))
        return out

    @torch.no_grad()
    def component_covariance(self, Xs: Tensor, first: str, second: str) -> Tensor:
        """Posterior covariance [S] of f_first(x) and f_second(x) at the same inputs Xs [S, D]."""
        a, b = self._indices([first, second])
        terms = self.terms(Xs)
        ta, tb = terms[a], terms[b]
        return -(ta.down * tb.down).sum(0) + (ta.up * tb.up).sum(0)

    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] of the whole additive predictor at Xs [S, D]."""
        return self.predict_subset(Xs)

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (the grid calls this per tile)."""
        return self.predict(Xs)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] variance far from the data: the offsets' posterior plus the others' prior."""
        offsets = [c.name for c in self.components if c.kernel.without_constant() is None]
        var = sum(
            (c.kernel.K_diag(Xs) for c in self.components if c.name not in offsets),
            torch.zeros(Xs.shape[0], dtype=Xs.dtype, device=Xs.device),
        )
        if offsets:
            var = var + self.predict_subset(Xs, offsets)[1]
        return var


@dataclass(frozen=True)
class PrecisionPosterior(AdditivePosterior):
    """``q(U) = N(K_UU α, (K_UU⁻¹ + BBᵀ)⁻¹)``; V_c = L_A⁻¹ B_cᵀ k_c(Z_c, x), no G.

    Attributes:
        alpha: α_c [M_c] per component.
        B: B_c [M_c, R] per component.
        L_A: chol(I + Σ_c B_cᵀ K_c B_c) [R, R].
    """

    alpha: tuple[Tensor, ...] = ()
    B: tuple[Tensor, ...] = ()
    L_A: Tensor | None = None

    def terms(self, Xs: Tensor) -> list[ComponentTerms]:
        out = []
        for c, a, B_c in zip(self.components, self.alpha, self.B, strict=True):
            Kcx = c.kernel.K(c.inducing, Xs)
            V = solve_lower(self.L_A, B_c.mT @ Kcx)
            out.append(ComponentTerms(Kcx.mT @ a, c.kernel.K_diag(Xs), V, V[:0]))
        return out


@dataclass(frozen=True)
class WhitenedPosterior(AdditivePosterior):
    """``U = L V``, ``q(V) = N(m, P⁻¹)``; d_c = k_c − ‖W_c‖², G_c = L_P⁻¹ [0; W_c; 0], no V.

    Attributes:
        L: chol(K_c) [M_c, M_c] per component (with the jitter the fit used).
        mean: m [M_tot], the stacked whitened means.
        L_P: [M_tot, M_tot] lower factor of the whitened precision P (block-diagonal for
            mean field).
    """

    L: tuple[Tensor, ...] = ()
    mean: Tensor | None = None
    L_P: Tensor | None = None

    def terms(self, Xs: Tensor) -> list[ComponentTerms]:
        out = []
        start = 0
        M_tot = self.L_P.shape[0]
        for c, L_c in zip(self.components, self.L, strict=True):
            M_c = L_c.shape[0]
            W_c = solve_lower(L_c, c.kernel.K(c.inducing, Xs))
            padded = W_c.new_zeros(M_tot, W_c.shape[1])
            padded[start : start + M_c] = W_c
            G = solve_lower(self.L_P, padded)
            mean = W_c.mT @ self.mean[start : start + M_c]
            diag = c.kernel.K_diag(Xs) - (W_c * W_c).sum(0)
            out.append(ComponentTerms(mean, diag, W_c[:0], G))
            start += M_c
        return out


@dataclass(frozen=True)
class MapLayerPosterior(ScalarOutputs):
    """The published map of an additive model: some of its components, at map inputs.

    The grid, ``predict`` and the saved products see only the named components (e.g. offset +
    map) with the nuisance (heading, run offsets, drift) removed: the subset's own posterior,
    in which the ambiguity between the level of the map and the nuisance cancels. The map
    inputs may be narrower than the model's, which also reads yaw, run and time columns after
    the position: those columns are filled with zeros, which the map layer never reads.

    Attributes:
        full: the model's posterior over every component.
        names: the components of the layer.
        input_dim: the width of the map inputs (2 for (x, y), 3 for (x, y, z)).
    """

    full: AdditivePosterior
    names: tuple[str, ...]
    input_dim: int

    @property
    def noise_variance(self) -> float:
        return self.full.noise_variance

    @property
    def model_input_dim(self) -> int:
        return int(self.full.components[0].inducing.shape[1])

    @property
    def support(self) -> Tensor:
        """Inducing inputs [M, input_dim] of the layer's located components (the map's)."""
        located = [
            c.inducing[:, : self.input_dim]
            for c in self.full.components
            if c.name in self.names and c.kernel.without_constant() is not None
        ]
        if not located:
            return self.full.components[0].inducing[:0, : self.input_dim]
        return torch.cat(located, 0)

    def model_inputs(self, Xs: Tensor) -> Tensor:
        """Xs [S, input_dim] padded with zero columns to the model's width (or as given)."""
        width = self.model_input_dim
        if Xs.ndim != 2 or Xs.shape[1] not in (self.input_dim, width):
            raise ValueError(
                f"expected map inputs [S, {self.input_dim}] or model inputs [S, {width}]; "
                f"got {tuple(Xs.shape)}"
            )
        if Xs.shape[1] == width:
            return Xs
        pad = Xs.new_zeros(Xs.shape[0], width - self.input_dim)
        return torch.cat([Xs, pad], 1)

    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] of the layer's sum at Xs [S, input_dim]."""
        return self.full.predict_subset(self.model_inputs(Xs), self.names)

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (the grid calls this per tile)."""
        return self.predict(Xs)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] the layer's variance far from the data: its offsets' posterior plus the others'
        prior."""
        X = self.model_inputs(Xs)
        layer = [c for c in self.full.components if c.name in self.names]
        offsets = [c.name for c in layer if c.kernel.without_constant() is None]
        var = sum(
            (c.kernel.K_diag(X) for c in layer if c.name not in offsets),
            torch.zeros(X.shape[0], dtype=X.dtype, device=X.device),
        )
        if offsets:
            var = var + self.full.predict_subset(X, offsets)[1]
        return var
