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
    predict_grid_layers,
    predict_grid_map,
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
    also its components, in the same pass (``grid.predict_grid_with_field``).

    With ``previous`` (the last map's posterior and products) only the cells the posterior
    may predict otherwise (its ``changed_since``) or that the last grid did not hold are
    predicted; the rest keep their values. A tiled map so redraws the tiles an update touched,
    not the building; a map of one model is redrawn whole, as without ``previous``.
    """
    placed = None if previous is None else _placement(previous[1].grid, grid)
    keep = None if placed is None else _kept_cells(posterior, grid, previous[0], placed)
    mean, variance, prior, field_mean, field_variance = predict_grid_map(
        posterior, grid, z=config.grid_z, skip=keep
    )
    layers = predict_grid_layers(posterior, grid, z=config.grid_z, skip=keep)
    if keep is not None and placed is not None and previous is not None:
        old = previous[1]
        kept = skipped_cells(keep)
        pairs = [(mean, old.mean), (variance, old.variance), (prior, old.prior_variance)]
        pairs += [(layers.setdefault(name, np.full(grid.shape, np.nan)), before)
                  for name, before in old.layers.items()]  # fmt: skip
        if field_mean is not None and old.field_mean is not None:
            pairs += [(field_mean, old.field_mean), (field_variance, old.field_variance)]
        new_cells, old_cells = placed
        for new, before in pairs:  # the kept cells are all on the old grid
            region = new[new_cells]
            region[kept[new_cells]] = before[old_cells][kept[new_cells]]
    support = posterior.support.detach().to("cpu").double().numpy()
    return MapProducts(grid, mean, variance, prior, support, layers, field_mean, field_variance)


Placement = tuple[tuple[slice, slice], tuple[slice, slice]]


def _placement(old: GridSpec, grid: GridSpec) -> Placement | None:
    """Where the old grid's cells stand on ``grid``: (rows, columns) on ``grid`` and the same
    cells' (rows, columns) on the old grid; None if the grids do not share their cells
    (another resolution, a misaligned origin) or none at all."""
    if not math.isclose(old.resolution_m, grid.resolution_m, rel_tol=1e-12):
        return None
    shift = (np.asarray(old.origin_m) - np.asarray(grid.origin_m)) / grid.resolution_m
    whole = np.rint(shift)
    if np.abs(shift - whole).max() > 1e-6:
        return None
    di, dj = int(whole[0]), int(whole[1])  # columns, rows from the old cell (0, 0)
    (H, W), (H0, W0) = grid.shape, old.shape
    r0, r1, c0, c1 = max(0, dj), min(H, dj + H0), max(0, di), min(W, di + W0)
    if not (r0 < r1 and c0 < c1):
        return None
    return (slice(r0, r1), slice(c0, c1)), (slice(r0 - dj, r1 - dj), slice(c0 - di, c1 - di))


def _kept_cells(
    posterior: ModelPosterior, grid: GridSpec, before: ModelPosterior, placed: Placement
) -> np.ndarray | None:
    """[H, W] the cells on the old grid that ``posterior`` predicts as ``before`` did: their
    last values stand; None: predict every cell."""
    changed = posterior.changed_since(before, grid.cell_points())
    if changed is None:
        return None
    keep = np.zeros(grid.shape, dtype=bool)
    keep[placed[0]] = True
    return keep & ~np.asarray(changed, dtype=bool).reshape(grid.shape)
