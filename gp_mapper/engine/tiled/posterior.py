"""The tiles' posteriors blended into one map with the layout's partition of unity.

At a point x with weights w_k (summing to one over the tiles that have a posterior) the map is
the mixture of the tiles' predictive distributions: mean ``μ = Σ w_k μ_k`` and variance
``Σ w_k (σ_k² + (μ_k − μ)²)``. Both are as smooth as the weights and the tiles (no step at a
tile edge), and where two tiles disagree the variance says so. Where no tile reaches, the map
is the reference tile's prediction: far from its data, its prior (with the level it fitted).
The map's variance then gains what the passes' shared offsets leave in it
(:mod:`..core.pass_record`; nothing for a map without a pass record): ‖B‖'s, and a map of
the field vector's 3 x 3 covariance, along the field where its error lies along it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from ..core.pass_record import NO_PASSES, PassCounts
from ..errors import NotSupportedError
from ..model import ModelPosterior, Target
from .layout import TileKey, TileLayout

# For each tile reaching some of a set of points: those rows and their normalised weights.
Weights = dict[TileKey, tuple[Tensor, Tensor]]


class BlendedPosterior:
    """The blend of tile posteriors (each a :class:`~..model.ModelPosterior`) over a layout.

    Args:
        layout: the tiles' geometry.
        tiles: each tile's posterior, by key (tiles without one are left out).
        reference: the key of the tile whose noise variance the map reports (the one whose θ
            a new tile starts from).
        passes: the passes near each place and the pass error's scale (none by default).
    """

    def __init__(
        self,
        layout: TileLayout,
        tiles: Mapping[TileKey, ModelPosterior],
        reference: TileKey,
        passes: PassCounts = NO_PASSES,
    ) -> None:
        if not tiles:
            raise ValueError("a blended posterior needs at least one tile")
        self.layout = layout
        self.tiles = dict(sorted(tiles.items()))  # one summation order, however built
        self.reference = reference if reference in self.tiles else next(iter(self.tiles))
        self.passes = passes

    # ------------------------------------------------------------------ ModelPosterior
    @property
    def support(self) -> Tensor:
        return torch.cat([p.support for p in self.tiles.values()])

    @property
    def noise_variance(self) -> float:
        return self.tiles[self.reference].noise_variance

    @property
    def target(self) -> Target:
        return self.tiles[self.reference].target

    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        mean, var = self._mixture(Xs, lambda p, X: p.predict(X))
        return mean, self._with_pass_error(Xs, var)

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        mean, var = self._mixture(Xs, lambda p, X: p.predict_block(X))
        return mean, self._with_pass_error(Xs, var)

    def prior_variance(self, Xs: Tensor) -> Tensor:
        out = torch.zeros(Xs.shape[0], dtype=Xs.dtype, device=Xs.device)
        covered = torch.zeros(Xs.shape[0], dtype=torch.bool, device=Xs.device)
        for key, (rows, w) in self._weights(Xs).items():
            out[rows] += w * self.tiles[key].prior_variance(Xs[rows])
            covered[rows] = True
        if not bool(covered.all()):  # where no tile reaches: the reference tile's
            out[~covered] = self.tiles[self.reference].prior_variance(Xs[~covered])
        return out

    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        """Each layer the tiles have, blended linearly with the weights (0 where no tile)."""
        out: dict[str, Tensor] = {}
        for key, (rows, w) in self._weights(Xs).items():
            for name, value in self.tiles[key].layers(Xs[rows]).items():
                layer = out.setdefault(name, torch.zeros(Xs.shape[0], dtype=value.dtype))
                layer[rows] += w * value
        return out

    def predict_field(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """The field vector's mixture: mean [S, 3], covariance [S, 3, 3].

        Raises:
            NotSupportedError: the tiles map one scalar.
        """
        self._check_vector()
        parts, covered, rest = self._parts(Xs, self._weights(Xs), lambda p, X: p.predict_field(X))
        mean, cov = _field_mixture(Xs, parts, covered, rest)
        return mean, self._field_with_pass_error(Xs, mean, cov)

    def predict_block_with_field(self, Xs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`predict_block` and :meth:`predict_field` from one prediction per tile.

        Raises:
            NotSupportedError: the tiles map one scalar.
        """
        self._check_vector()
        weights = self._weights(Xs)
        single = self._single_tile(Xs, weights)
        if single is not None:
            mean, var, field_mean, field_cov = single.predict_block_with_field(Xs)
            return (mean, *self._both_with_pass_error(Xs, var, field_mean, field_cov))
        parts, covered, rest = self._parts(Xs, weights, lambda p, X: p.predict_block_with_field(X))
        mean, var = _scalar_mixture(
            Xs, [(rows, w, m, v) for rows, w, m, v, _, _ in parts], covered,
            None if rest is None else rest[:2],
        )  # fmt: skip
        field_mean, field_cov = _field_mixture(
            Xs, [(rows, w, fm, fc) for rows, w, _, _, fm, fc in parts], covered,
            None if rest is None else rest[2:],
        )  # fmt: skip
        return (mean, *self._both_with_pass_error(Xs, var, field_mean, field_cov))

    def changed_since(self, previous: ModelPosterior, xy: np.ndarray) -> np.ndarray | None:
        """Where a tile changed since ``previous`` (another object: updated, new or gone) has
        weight, and where no tile reaches if the reference tile changed; None if ``previous``
        is not a blend over this layout."""
        if not isinstance(previous, BlendedPosterior) or previous.layout != self.layout:
            return None
        xy = np.asarray(xy, dtype=np.float64)[:, :2]
        changed = np.zeros(len(xy), dtype=bool)
        covered = np.zeros(len(xy), dtype=bool)
        for key in sorted(self.tiles.keys() | previous.tiles.keys()):
            now, before = self.tiles.get(key), previous.tiles.get(key)
            reach = self.layout.weight(key, xy) > 0.0
            covered |= reach & (now is not None)
            if now is not before:
                changed |= reach
        reference_changed = (self.reference != previous.reference) or (
            self.tiles[self.reference] is not previous.tiles.get(previous.reference)
        )
        if reference_changed:
            changed |= ~covered
        return changed

    def pass_error_variance(
        self, Xs: Tensor, latent: Tensor, prior: Tensor | None = None
    ) -> Tensor:
        """What the passes' shared offsets leave in a map of ``latent`` variance at Xs [S]
        (:mod:`..core.pass_record`): σ²_pass · c · ρ² / k, 0 where no pass came near.
        ``prior``: :meth:`prior_variance` at Xs where the caller has it."""
        if self.passes.scale <= 0.0:
            return torch.zeros_like(latent)
        prior = self.prior_variance(Xs) if prior is None else prior
        term = self.passes.variance(
            Xs[:, :2].detach().cpu().numpy(),
            latent.detach().cpu().double().numpy(),
            prior.detach().cpu().double().numpy(),
        )
        return torch.as_tensor(term, dtype=latent.dtype, device=latent.device)

    def _with_pass_error(self, Xs: Tensor, latent: Tensor, prior: Tensor | None = None) -> Tensor:
        if self.passes.scale <= 0.0:
            return latent
        return latent + self.pass_error_variance(Xs, latent, prior)

    def _both_with_pass_error(
        self, Xs: Tensor, var: Tensor, field_mean: Tensor, field_cov: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """‖B‖'s variance, the field's mean and covariance, each with the passes' term (the
        prior variance at Xs computed once for both)."""
        if self.passes.scale <= 0.0:
            return var, field_mean, field_cov
        prior = self.prior_variance(Xs)
        return (self._with_pass_error(Xs, var, prior), field_mean,
                self._field_with_pass_error(Xs, field_mean, field_cov, prior))  # fmt: skip

    def _field_with_pass_error(
        self, Xs: Tensor, mean: Tensor, cov: Tensor, prior: Tensor | None = None
    ) -> Tensor:
        """The field's covariance [S, 3, 3] plus ``(a I + b u uᵀ) · c ρ² / k`` (u the mean's
        direction, ρ from the variance along it: :mod:`..core.pass_record`)."""
        if self.passes.scale <= 0.0:
            return cov
        a, b = self.passes.field_terms()
        u = mean / torch.clamp(mean.norm(dim=-1, keepdim=True), min=1e-9)
        along = (u[:, None, :] @ cov @ u[:, :, None])[:, 0, 0]
        prior = self.prior_variance(Xs) if prior is None else prior
        shares = self.passes.shares(
            Xs[:, :2].detach().cpu().numpy(),
            along.detach().cpu().double().numpy(),
            prior.detach().cpu().double().numpy(),
        )
        w = torch.as_tensor(shares, dtype=cov.dtype, device=cov.device)[:, None, None]
        eye = torch.eye(3, dtype=cov.dtype, device=cov.device)
        return cov + w * (a * eye + b * u[:, :, None] * u[:, None, :])

    # ------------------------------------------------------------------ the blend
    def _weights(self, Xs: Tensor) -> Weights:
        """For each tile reaching some of ``Xs``: those rows and their normalised weights."""
        xy = Xs[:, :2].detach().cpu().numpy()
        raw: dict[TileKey, np.ndarray] = {}
        total = np.zeros(len(xy))
        for key in self.tiles:
            w = self.layout.weight(key, xy)
            if w.any():
                raw[key] = w
                total += w
        out = {}
        for key, w in raw.items():
            rows = np.flatnonzero(w > 0.0)
            value = torch.as_tensor(w[rows] / total[rows], dtype=Xs.dtype, device=Xs.device)
            out[key] = (torch.as_tensor(rows, device=Xs.device), value)
        return out

    def _single_tile(self, Xs: Tensor, weights: Weights) -> ModelPosterior | None:
        """The tile whose weight is 1 at every point of Xs (``weights``: their
        :meth:`_weights`), if one is (its own prediction is the map's there); None otherwise."""
        if len(weights) == 1:
            key, (rows, _) = next(iter(weights.items()))
            if len(rows) == Xs.shape[0]:
                return self.tiles[key]
        return None

    def _parts(
        self,
        Xs: Tensor,
        weights: Weights,
        predict: Callable[[ModelPosterior, Tensor], tuple[Tensor, ...]],
    ) -> tuple[list[tuple[Tensor, ...]], Tensor, tuple[Tensor, ...] | None]:
        """Each reaching tile's ``(rows, weights, *predict(tile, Xs[rows]))``, the rows some
        tile reaches, and the reference tile's prediction of the others (None if none)."""
        covered = torch.zeros(Xs.shape[0], dtype=torch.bool, device=Xs.device)
        parts = []
        for key, (rows, w) in weights.items():
            parts.append((rows, w, *predict(self.tiles[key], Xs[rows])))
            covered[rows] = True
        rest = None
        if not bool(covered.all()):  # where no tile reaches: the reference tile's
            rest = predict(self.tiles[self.reference], Xs[~covered])
        return parts, covered, rest

    def _check_vector(self) -> None:
        if self.target != "vector":
            raise NotSupportedError("the tiles map one scalar, not the field vector")

    def _mixture(
        self, Xs: Tensor, predict: Callable[[ModelPosterior, Tensor], tuple[Tensor, Tensor]]
    ) -> tuple[Tensor, Tensor]:
        weights = self._weights(Xs)
        single = self._single_tile(Xs, weights)
        if single is not None:
            return predict(single, Xs)
        return _scalar_mixture(Xs, *self._parts(Xs, weights, predict))


def _scalar_mixture(
    Xs: Tensor,
    parts: list[tuple[Tensor, ...]],
    covered: Tensor,
    rest: tuple[Tensor, ...] | None,
) -> tuple[Tensor, Tensor]:
    """Mean and variance [S] of the mixture of the tiles' ``(rows, w, mean, variance)``."""
    mean = torch.zeros(Xs.shape[0], dtype=Xs.dtype, device=Xs.device)
    for rows, w, m, _ in parts:
        mean[rows] += w * m
    # Σ w (σ² + (μ_k − μ)²): the mixture variance without the cancellation of Σ w μ² − μ².
    var = torch.zeros_like(mean)
    for rows, w, m, v in parts:
        var[rows] += w * (v + (m - mean[rows]) ** 2)
    if rest is not None:
        mean[~covered], var[~covered] = rest
    return mean, var


def _field_mixture(
    Xs: Tensor,
    parts: list[tuple[Tensor, ...]],
    covered: Tensor,
    rest: tuple[Tensor, ...] | None,
) -> tuple[Tensor, Tensor]:
    """Mean [S, 3] and covariance [S, 3, 3] of the mixture of the tiles' ``(rows, w, mean,
    covariance)``."""
    mean = torch.zeros(Xs.shape[0], 3, dtype=Xs.dtype, device=Xs.device)
    for rows, w, m, _ in parts:
        mean[rows] += w[:, None] * m
    cov = torch.zeros(Xs.shape[0], 3, 3, dtype=Xs.dtype, device=Xs.device)
    for rows, w, m, c in parts:
        d = m - mean[rows]
        cov[rows] += w[:, None, None] * (c + d[:, :, None] * d[:, None, :])
    if rest is not None:
        mean[~covered], cov[~covered] = rest
    return mean, cov
