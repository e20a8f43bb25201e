"""From a model's posterior to the map's arrays: the grid it covers and the values on it.

Shared by the streaming pipeline (each window) and a batch fit (once), so both draw the same
grid the same way.
"""

from __future__ import annotations

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


def map_grid(config: MapperConfig, explored_box: Box | None) -> GridSpec | None:
    """The fixed ``bounds`` grid, or the explored box plus the margin (None before any data)."""
    if config.bounds is not None:
        return grid_for(config.bounds, config.resolution, config.max_cells)
    if explored_box is None:
        return None
    return grid_for(explored_box, config.resolution, config.max_cells, config.margin)


def predict_products(
    posterior: ModelPosterior, grid: GridSpec, config: MapperConfig
) -> MapProducts:
    """Predict the map on ``grid`` (in tiles, see ``grid.predict_grid``); for a vector model
    also its components (``grid.predict_grid_field``)."""
    mean, variance, prior = predict_grid(posterior, grid, z=config.grid_z)
    layers = predict_grid_layers(posterior, grid, z=config.grid_z)
    field = predict_grid_field(posterior, grid, z=config.grid_z)
    field_mean, field_variance = (None, None) if field is None else field
    support = posterior.support.detach().to("cpu").double().numpy()
    return MapProducts(grid, mean, variance, prior, support, layers, field_mean, field_variance)
