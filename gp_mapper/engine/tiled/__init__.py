"""A map of any size as tiles of one streaming model: routing, blending, state (``model.py``,
``layout.py``, ``posterior.py``)."""

from .layout import ONE_TILE, TileKey, TileLayout, smooth_step
from .model import TiledModel, TiledReport, default_overlap, is_tiled_state
from .posterior import BlendedPosterior

__all__ = [
    "ONE_TILE",
    "BlendedPosterior",
    "TileKey",
    "TileLayout",
    "TiledModel",
    "TiledReport",
    "default_overlap",
    "is_tiled_state",
    "smooth_step",
]
