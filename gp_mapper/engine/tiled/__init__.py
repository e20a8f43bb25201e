"""A map of any size as tiles of one model (streaming; batch offline): routing, blending,
state (``model.py``, ``layout.py``, ``posterior.py``)."""

from .layout import ONE_TILE, UNANCHORED, TileKey, TileLayout, smooth_step
from .model import TiledModel, TiledReport, is_tiled_state
from .posterior import BlendedPosterior

__all__ = [
    "ONE_TILE",
    "UNANCHORED",
    "BlendedPosterior",
    "TileKey",
    "TileLayout",
    "TiledModel",
    "TiledReport",
    "is_tiled_state",
    "smooth_step",
]
