"""From a model's posterior to the map's arrays: the grid it covers and the values on it.

Shared by the streaming pipeline (each window) and a batch fit (once), so both draw the same
grid the same way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from gp_mapper.mapping.config import MapperConfig
from gp_mapper.mapping.grid import (
    Box,
    GridSpec,
    grid_for,
    predict_grid,
    predict_grid_field,
    predict_grid_layers,
    skipped_cells,
)

if TYPE_CHECKING:
    from gp_mapper.engine import ModelPosterior


class MapProducts(NamedTuple):
    """The arrays of one map.

    Attributes:
        grid: the cells.
        mean, variance, prior_variance: [H, W] (µT, µT², µT²).
        support_m: [M, D] the posterior's support (m).
        layers: a model's extra [H, W] layers by name (empty for most models).
        field_mean, field_variance: [H, W, 3] the map-frame field components (µT) and their
            variances (µT²) of a vector model; None for a model of one scalar, whose mean and
            variance are the whole map (a vector model's are those of |B|).
    """

    grid: GridSpec
    mean: np.ndarray
    variance: np.ndarray
    prior_variance: np.ndarray
    support_m: np.ndarray
    layers: dict[str, np.ndarray]
    field_mean: np.ndarray | None = None
    field_variance: np.ndarray | None = None


def map_grid(
    config: MapperConfig, explored_box: Box | None, max_cells: int | None = None
) -> GridSpec | None:
    """The fixed ``bounds`` grid, or the explored box plus the margin (None before any data),
    within ``max_cells`` (the config's by default)."""
    cap = config.max_cells if max_cells is None else max_cells
    if config.bounds is not None:
        return grid_for(config.bounds, config.resolution, cap)
    if explored_box is None:
        return None
    return grid_for(explored_box, config.resolution, cap, config.margin)


def full_resolution_grid(config: MapperConfig, explored_box: Box | None) -> GridSpec | None:
    """The grid of the full-resolution products (``full_resolution_cells``; None when off)."""
    if config.full_resolution_cells <= 0:
        return None
    return map_grid(config, explored_box, config.full_resolution_cells)


def predict_products(
    posterior: ModelPosterior,
    grid: GridSpec,
    config: MapperConfig,
    previous: tuple[ModelPosterior, MapProducts] | None = None,
) -> MapProducts:
    """Predict the map on ``grid`` (in tiles, see ``grid.predict_grid``); for a vector model
    also its components (``grid.predict_grid_field``).

    With ``previous`` (the last map's posterior and products) only the cells the posterior
    may predict otherwise (its ``changed_since``) or that the last grid did not hold are
    predicted; the rest keep their values. A tiled map so redraws the tiles an update touched,
    not the building; a map of one model is redrawn whole, as without ``previous``.
    """
    keep = _kept_cells(posterior, grid, previous)
    mean, variance, prior = predict_grid(posterior, grid, z=config.grid_z, skip=keep)
    layers = predict_grid_layers(posterior, grid, z=config.grid_z, skip=keep)
    field = predict_grid_field(posterior, grid, z=config.grid_z, skip=keep)
    field_mean, field_variance = (None, None) if field is None else field
    if keep is not None and previous is not None:
        old = previous[1]
        kept = skipped_cells(keep)
        arrays = ((mean, old.mean), (variance, old.variance), (prior, old.prior_variance))
        for new, before in arrays:
            new[kept] = _aligned(before, old.grid, grid)[kept]
        for name, before in old.layers.items():
            layer = layers.setdefault(name, np.full(grid.shape, np.nan))
            layer[kept] = _aligned(before, old.grid, grid)[kept]
        if field_mean is not None and old.field_mean is not None:
            field_mean[kept] = _aligned(old.field_mean, old.grid, grid)[kept]
            field_variance[kept] = _aligned(old.field_variance, old.grid, grid)[kept]
    support = posterior.support.detach().to("cpu").double().numpy()
    return MapProducts(grid, mean, variance, prior, support, layers, field_mean, field_variance)


def _offset(old: GridSpec, grid: GridSpec) -> tuple[int, int] | None:
    """(columns, rows) from the old grid's cell (0, 0) to the same cell in ``grid``; None if
    their cells are not the same cells (another resolution or a misaligned origin)."""
    if not math.isclose(old.resolution_m, grid.resolution_m, rel_tol=1e-12):
        return None
    shift = (np.asarray(old.origin_m) - np.asarray(grid.origin_m)) / grid.resolution_m
    whole = np.rint(shift)
    if np.abs(shift - whole).max() > 1e-6:
        return None
    return int(whole[0]), int(whole[1])


def _aligned(values: np.ndarray, old: GridSpec, grid: GridSpec) -> np.ndarray:
    """``values`` [H0, W0, ...] of the old grid placed on ``grid`` [H, W, ...] (NaN where the
    old grid had no cell); the grids share their cells (:func:`_offset`)."""
    offset = _offset(old, grid)
    assert offset is not None
    di, dj = offset
    out = np.full(grid.shape + values.shape[2:], np.nan)
    (H, W), (H0, W0) = grid.shape, old.shape
    r0, r1, c0, c1 = max(0, dj), min(H, dj + H0), max(0, di), min(W, di + W0)
    if r0 < r1 and c0 < c1:
        out[r0:r1, c0:c1] = values[r0 - dj : r1 - dj, c0 - di : c1 - di]
    return out


def _kept_cells(
    posterior: ModelPosterior,
    grid: GridSpec,
    previous: tuple[ModelPosterior, MapProducts] | None,
) -> np.ndarray | None:
    """[H, W] the cells whose last values stand; None: predict every cell."""
    if previous is None:
        return None
    before, old = previous
    if _offset(old.grid, grid) is None:
        return None
    changed = posterior.changed_since(before, grid.cell_points())
    if changed is None:
        return None
    held = np.isfinite(_aligned(old.mean, old.grid, grid))
    return held & ~np.asarray(changed, dtype=bool).reshape(grid.shape)
