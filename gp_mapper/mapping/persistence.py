"""A map file to a model the pipeline can continue, checked against the pipeline's config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gp_mapper.engine.tiled import TiledModel, is_tiled_state
from gp_mapper.mapping.config import MapperConfig
from gp_mapper.mapping.errors import MapFileError
from gp_mapper.mapping.map_file import MapData, PathLike, load_map, model_from_map

if TYPE_CHECKING:
    from gp_mapper.engine import Model


def load_model_map(path: PathLike, config: MapperConfig) -> tuple[Model, MapData]:
    """Read a map file and rebuild its model, refusing one this config cannot continue. A
    tiled config continues a map saved without tiles as a map of one tile.

    Raises:
        MapFileError: the file is missing, corrupt or of another version; it holds another
            model than ``config.engine.model``, another target or input dimension; or the
            model refuses its saved state. The message names the path and the fault.
    """
    wanted = config.engine.model
    data = load_map(path, input_dims=config.input_dims, target=config.target, expected_model=wanted)
    model = model_from_map(data, path, device=config.engine.device, expected_model=wanted)
    posterior = model.posterior
    if posterior is not None and int(posterior.support.shape[1]) != config.input_dims:
        raise MapFileError(
            f"{path}: the map's inputs have {int(posterior.support.shape[1])} dimensions, "
            f"this mapper uses input_dims={config.input_dims}"
        )
    # A map saved before tiles, loaded by a tiled mapper: a one-tile map.
    if config.tile_layout() is not None and not is_tiled_state(data.engine_state):
        model = TiledModel.one_tile(model)
    return model, data
