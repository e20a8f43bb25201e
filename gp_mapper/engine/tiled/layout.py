"""Square tiles over the plane, the readings each tile takes, and the weights that blend them.

Tile (i, j) owns the core ``[x0 + i·L, x0 + (i+1)·L) × [y0 + j·L, y0 + (j+1)·L)`` (L =
``size``, (x0, y0) = ``origin``, in the map frame's x and y; a third input, z, is not tiled: a
building's floors are separate maps) and takes every reading within ``overlap`` (m) of its
core. A map's grid is anchored where its first reading is (:meth:`TileLayout.centred_at`): tile
(0, 0) is centred there, so a room less than half a tile across is mapped by one tile wherever
the walk starts in it and wherever the map frame's origin is. A tile's weight at a point is a
product over x and y of smooth steps that rise from 0 at ``overlap`` outside the core's edge to 1 at
``overlap`` inside it. Across an edge the two neighbours' steps are ``S(t)`` and ``S(1 − t)``
of one ``t``, and ``S(t) + S(1 − t) = 1`` for the step used here (``3t² − 2t³``), so the
weights of all tiles sum to one everywhere (a partition of unity) and are continuously
differentiable: a blend of the tiles' predictions is as smooth as they are. Each tile has data
wherever its weight is non-zero (it took every reading there), which is what makes the blend
a fair one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

TileKey = tuple[int, int]
# The key of the one tile of an untiled layout (``size`` infinite).
ONE_TILE: TileKey = (0, 0)
# The origin of a layout not anchored yet: the map's first reading will place it.
UNANCHORED = (math.nan, math.nan)


def smooth_step(t: np.ndarray) -> np.ndarray:
    """``3t² − 2t³`` on [0, 1], 0 below, 1 above: C¹, and S(t) + S(1 − t) = 1."""
    t = np.clip(t, 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


class TileLayout(NamedTuple):
    """Tiles of ``size`` m with ``overlap`` m of shared readings each side of an edge, the
    corner of tile (0, 0) at ``origin`` (x0, y0) [m].

    ``size = inf`` is one tile over everything (an untiled map). An origin of
    :data:`UNANCHORED` is placed by :meth:`centred_at` before the first reading is routed.
    """

    size: float
    overlap: float
    origin: tuple[float, float] = (0.0, 0.0)

    def check(self) -> TileLayout:
        """Itself, checked.

        Raises:
            ValueError: a size that is not positive, or an overlap outside (0, size / 2].
        """
        if not self.size > 0.0:
            raise ValueError(f"the tile size must be positive, got {self.size}")
        if math.isfinite(self.size) and not 0.0 < self.overlap <= 0.5 * self.size:
            raise ValueError(
                f"the tile overlap must be in (0, size/2] = (0, {0.5 * self.size}], "
                f"got {self.overlap}"
            )
        return self

    @property
    def single(self) -> bool:
        return not math.isfinite(self.size)

    @property
    def anchored(self) -> bool:
        """Whether the origin is set (always, for one tile)."""
        return self.single or all(math.isfinite(v) for v in self.origin)

    def centred_at(self, xy: np.ndarray) -> TileLayout:
        """This layout with tile (0, 0) centred on the point ``xy`` [≥2] (itself for one
        tile)."""
        if self.single:
            return self
        half = 0.5 * self.size
        return self._replace(origin=(float(xy[0]) - half, float(xy[1]) - half))

    def _local(self, xy: np.ndarray) -> np.ndarray:
        """``xy`` [N, ≥2] relative to the origin [N, 2]."""
        if not self.anchored:
            raise ValueError("the tile layout has no origin yet: anchor it with centred_at()")
        return np.asarray(xy, dtype=np.float64)[:, :2] - np.asarray(self.origin)

    def route(self, xy: np.ndarray) -> dict[TileKey, np.ndarray]:
        """The rows of ``xy`` [N, ≥2] each tile takes (those within ``overlap`` of its core),
        by key, in key order; a row goes to one to four tiles."""
        n = len(xy)
        if self.single:
            return {ONE_TILE: np.arange(n)} if n else {}
        xy = self._local(xy)
        lo = np.floor((xy - self.overlap) / self.size).astype(np.int64)
        hi = np.floor((xy + self.overlap) / self.size).astype(np.int64)
        out: dict[TileKey, list[np.ndarray]] = {}
        rows = np.arange(n)
        for di in (0, 1):
            for dj in (0, 1):
                i, j = lo[:, 0] + di, lo[:, 1] + dj
                keep = (i <= hi[:, 0]) & (j <= hi[:, 1])
                for key in set(zip(i[keep].tolist(), j[keep].tolist(), strict=True)):
                    mask = keep & (i == key[0]) & (j == key[1])
                    out.setdefault(key, []).append(rows[mask])
        return {k: np.sort(np.concatenate(out[k])) for k in sorted(out)}

    def weight(self, key: TileKey, xy: np.ndarray) -> np.ndarray:
        """The tile's blending weight [S] at ``xy`` [S, ≥2] (0 outside its reach)."""
        if self.single:
            return np.ones(len(xy))
        xy = self._local(xy)
        width = 2.0 * self.overlap
        w = np.ones(len(xy))
        for axis, index in enumerate(key):
            lo = index * self.size - self.overlap
            hi = (index + 1) * self.size + self.overlap
            w *= smooth_step((xy[:, axis] - lo) / width) * smooth_step((hi - xy[:, axis]) / width)
        return w

    def reach(self, key: TileKey) -> tuple[float, float, float, float]:
        """(xmin, xmax, ymin, ymax) of the readings the tile takes [m]."""
        if self.single:
            return (-math.inf, math.inf, -math.inf, math.inf)
        i, j = key
        m, L = self.overlap, self.size
        x0, y0 = self.origin
        return (x0 + i * L - m, x0 + (i + 1) * L + m, y0 + j * L - m, y0 + (j + 1) * L + m)
