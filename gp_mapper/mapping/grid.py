"""The map grid: its geometry, how it grows with the explored area, and prediction on it.

Conventions follow the `nav_msgs/OccupancyGrid` message definition: `origin_m` is the outer corner
of cell (0, 0); column i runs along +x, row j along +y; cell (i, j) has its centre at
origin + ((i + 0.5) res, (j + 0.5) res); arrays are [H, W] = [rows (y), columns (x)], so
`grid[j, i]` and C-order `ravel()` match the message's `data`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from gp_mapper.engine import ModelPosterior

logger = logging.getLogger(__name__)

Box = tuple[float, float, float, float]  # (xmin, xmax, ymin, ymax), m

# Cells predicted per call to the posterior. The posterior's cross-covariance block is
# [M, tile]: at M = 2000 inducing points (the default cap) and float64 that is 33 MB.
DEFAULT_TILE_CELLS = 2048

# Edges are snapped to multiples of the resolution; this slack (in cells) keeps a box edge that
# already sits on a multiple from rounding out to one more cell.
SNAP_TOLERANCE_CELLS = 1e-9


@dataclass(frozen=True)
class GridSpec:
    """A regular 2-D grid in the map frame.

    Attributes:
        origin_m: (x, y) of the outer corner of cell (0, 0) (m).
        resolution_m: Cell size (m/cell).
        shape: (H, W): rows along y, columns along x (cells).
    """

    origin_m: tuple[float, float]
    resolution_m: float
    shape: tuple[int, int]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.resolution_m) and self.resolution_m > 0.0):
            raise ValueError(f"resolution_m must be positive; got {self.resolution_m}")
        if len(self.shape) != 2 or min(self.shape) < 1:
            raise ValueError(f"shape must be (H, W) with H, W >= 1; got {self.shape}")
        if len(self.origin_m) != 2 or not all(math.isfinite(v) for v in self.origin_m):
            raise ValueError(f"origin_m must be finite (x, y); got {self.origin_m}")
        object.__setattr__(self, "origin_m", (float(self.origin_m[0]), float(self.origin_m[1])))
        object.__setattr__(self, "resolution_m", float(self.resolution_m))
        object.__setattr__(self, "shape", (int(self.shape[0]), int(self.shape[1])))

    @property
    def height(self) -> int:
        """Rows (cells along y)."""
        return self.shape[0]

    @property
    def width(self) -> int:
        """Columns (cells along x)."""
        return self.shape[1]

    @property
    def num_cells(self) -> int:
        """H * W."""
        return self.shape[0] * self.shape[1]

    @property
    def extent(self) -> Box:
        """Outer edges (xmin, xmax, ymin, ymax) (m), e.g. for matplotlib's `imshow`."""
        x0, y0 = self.origin_m
        r = self.resolution_m
        return (x0, x0 + self.width * r, y0, y0 + self.height * r)

    def cell_centres(self) -> tuple[np.ndarray, np.ndarray]:
        """Cell-centre coordinates: x [W] of the columns and y [H] of the rows (m)."""
        x0, y0 = self.origin_m
        r = self.resolution_m
        return (
            x0 + (np.arange(self.width) + 0.5) * r,
            y0 + (np.arange(self.height) + 0.5) * r,
        )

    def cell_points(self) -> np.ndarray:
        """Every cell centre as [H * W, 2] (x, y) (m), in C order: cell (i, j) at j * W + i."""
        x, y = self.cell_centres()
        xx, yy = np.meshgrid(x, y)  # [H, W] each
        return np.column_stack([xx.ravel(), yy.ravel()])

    def world_to_cell(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cells holding some points.

        Args:
            xy: [N, 2] (x, y) (m) in the map frame.

        Returns:
            i [N] column indices, j [N] row indices (int64; out of range where `valid` is
            False) and valid [N] bool (the point lies on the grid).
        """
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        x0, y0 = self.origin_m
        i = np.floor((xy[:, 0] - x0) / self.resolution_m)
        j = np.floor((xy[:, 1] - y0) / self.resolution_m)
        valid = np.isfinite(i) & np.isfinite(j)
        valid &= (i >= 0) & (i < self.width) & (j >= 0) & (j < self.height)
        i = np.where(np.isfinite(i), i, -1).astype(np.int64)
        j = np.where(np.isfinite(j), j, -1).astype(np.int64)
        return i, j, valid


def extend_box(box: Box | None, xy: np.ndarray) -> Box | None:
    """The smallest box holding `box` and the points `xy` [N, 2] (m); None if both are empty."""
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if xy.shape[0] == 0:
        return box
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    if box is not None:
        lo = np.minimum(lo, (box[0], box[2]))
        hi = np.maximum(hi, (box[1], box[3]))
    return (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))


def _snapped(box: Box, resolution_m: float) -> GridSpec:
    xmin, xmax, ymin, ymax = box
    r = resolution_m
    i0 = math.floor(xmin / r + SNAP_TOLERANCE_CELLS)
    i1 = math.ceil(xmax / r - SNAP_TOLERANCE_CELLS)
    j0 = math.floor(ymin / r + SNAP_TOLERANCE_CELLS)
    j1 = math.ceil(ymax / r - SNAP_TOLERANCE_CELLS)
    return GridSpec((i0 * r, j0 * r), r, (max(1, j1 - j0), max(1, i1 - i0)))


def grid_for(box: Box, resolution_m: float, max_cells: int, margin_m: float = 0.0) -> GridSpec:
    """The grid covering a box plus a margin, coarsened if it would exceed `max_cells`.

    Edges snap to multiples of the resolution, so the grid of a growing box keeps its cells
    where they were. If the box needs more than `max_cells` cells, the resolution becomes the
    smallest integer multiple of `resolution_m` that fits (the caller should log the change).

    Args:
        box: (xmin, xmax, ymin, ymax) (m), e.g. the explored area or fixed bounds.
        resolution_m: Wanted cell size (m).
        max_cells: Cap on H * W.
        margin_m: Added on every side of the box (m).

    Returns:
        The grid.
    """
    if resolution_m <= 0.0:
        raise ValueError(f"resolution_m must be positive; got {resolution_m}")
    if max_cells < 1:
        raise ValueError(f"max_cells must be at least 1; got {max_cells}")
    xmin, xmax, ymin, ymax = box
    if not (xmin <= xmax and ymin <= ymax):
        raise ValueError(f"box must be (xmin, xmax, ymin, ymax) with min <= max; got {box}")
    padded = (xmin - margin_m, xmax + margin_m, ymin - margin_m, ymax + margin_m)
    grid = _snapped(padded, resolution_m)
    if grid.num_cells <= max_cells:
        return grid
    factor = max(2, math.ceil(math.sqrt(grid.num_cells / max_cells)))
    while (grid := _snapped(padded, resolution_m * factor)).num_cells > max_cells:
        factor += 1
    logger.debug(
        "grid coarsened from %g m to %g m to stay within %d cells",
        resolution_m,
        grid.resolution_m,
        max_cells,
    )
    return grid


def predict_grid(
    posterior: ModelPosterior,
    grid: GridSpec,
    *,
    z: float = 0.0,
    tile: int = DEFAULT_TILE_CELLS,
    skip: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predict the latent field at every cell centre, in square tiles of about `tile` cells.

    Args:
        posterior: The engine's posterior (inputs of dimension 2, or 3 with `z` appended).
        grid: The cells to predict.
        z: Height (m) of the grid plane when the posterior has 3-D inputs.
        tile: Cells per call to the posterior (bounds peak memory).
        skip: [H, W] cells the caller has values for: a tile of cells all skipped is not
            predicted and left NaN (:func:`skipped_cells`).

    Returns:
        mean [H, W] (µT), variance [H, W] (µT², latent f, no noise) and the prior variance
        [H, W] (µT², the variance with no data), float64 numpy arrays.
    """
    H, W = grid.shape
    mean, var, prior = np.full((H, W), np.nan), np.full((H, W), np.nan), np.full((H, W), np.nan)
    with torch.no_grad():
        for rows, cols, Xs in _tiles(posterior, grid, z, tile, skip):
            m, v = posterior.predict_block(Xs)
            h, w = rows.stop - rows.start, cols.stop - cols.start
            mean[rows, cols] = _host(m).reshape(h, w)
            var[rows, cols] = _host(v).reshape(h, w)
            prior[rows, cols] = _host(posterior.prior_variance(Xs)).reshape(h, w)
    return mean, var, prior


def predict_grid_layers(
    posterior: ModelPosterior,
    grid: GridSpec,
    *,
    z: float = 0.0,
    tile: int = DEFAULT_TILE_CELLS,
    skip: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """A model's extra layers on the grid (e.g. SOLVE-GP's coarse and detail means, CaGP's
    computational variance): ``posterior.layers(Xs)`` per tile; {} for a posterior without.
    ``skip`` as in :func:`predict_grid`.

    Returns:
        name -> [H, W] float64 numpy array.
    """
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for rows, cols, Xs in _tiles(posterior, grid, z, tile, skip):
            h, w = rows.stop - rows.start, cols.stop - cols.start
            layers = posterior.layers(Xs)
            if not layers:  # a model without extra layers has none on any tile
                return {}
            for name, values in layers.items():
                layer = out.setdefault(name, np.full(grid.shape, np.nan))
                layer[rows, cols] = _host(values).reshape(h, w)
    return out


def predict_grid_with_field(
    posterior: ModelPosterior,
    grid: GridSpec,
    *,
    z: float = 0.0,
    tile: int = DEFAULT_TILE_CELLS,
    skip: np.ndarray | None = None,
    full_covariance: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`predict_grid` of a vector posterior and its field vector, in one pass: each tile's
    field is predicted once (``posterior.predict_block_with_field``), ‖B‖ being a function of
    it. ``skip`` as in :func:`predict_grid`.

    Returns:
        mean, variance, prior variance [H, W] as :func:`predict_grid`; the mean [H, W, 3] (µT)
        of the map-frame components (x, y, z) and their variances [H, W, 3] (µT², latent
        field, no noise: the diagonal of each cell's 3 x 3 covariance), or with
        ``full_covariance`` each cell's whole covariance [H, W, 3, 3]; float64 numpy arrays.

    Raises:
        NotSupportedError: a posterior of one scalar.
    """
    H, W = grid.shape
    mean, var, prior = np.full((H, W), np.nan), np.full((H, W), np.nan), np.full((H, W), np.nan)
    field_mean = np.full((H, W, 3), np.nan)
    field_var = np.full((H, W, 3, 3) if full_covariance else (H, W, 3), np.nan)
    with torch.no_grad():
        for rows, cols, Xs in _tiles(posterior, grid, z, tile, skip):
            m, v, fm, cov = posterior.predict_block_with_field(Xs)
            h, w = rows.stop - rows.start, cols.stop - cols.start
            mean[rows, cols] = _host(m).reshape(h, w)
            var[rows, cols] = _host(v).reshape(h, w)
            prior[rows, cols] = _host(posterior.prior_variance(Xs)).reshape(h, w)
            field_mean[rows, cols] = _host(fm).reshape(h, w, 3)
            if full_covariance:
                field_var[rows, cols] = _host(cov).reshape(h, w, 3, 3)
            else:
                diagonal = torch.diagonal(cov, dim1=-2, dim2=-1)
                field_var[rows, cols] = _host(diagonal).reshape(h, w, 3)
    return mean, var, prior, field_mean, field_var


def predict_grid_map(
    posterior: ModelPosterior,
    grid: GridSpec,
    *,
    z: float = 0.0,
    tile: int = DEFAULT_TILE_CELLS,
    skip: np.ndarray | None = None,
    full_covariance: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """What a map holds on the grid: :func:`predict_grid`'s mean, variance and prior variance,
    and for a vector posterior its field's mean and variances, or covariances with
    ``full_covariance`` (:func:`predict_grid_with_field`, one pass); (None, None) for a
    posterior of one scalar."""
    if posterior.target == "vector":
        return predict_grid_with_field(
            posterior, grid, z=z, tile=tile, skip=skip, full_covariance=full_covariance
        )
    return (*predict_grid(posterior, grid, z=z, tile=tile, skip=skip), None, None)


def predict_grid_map_every(
    posterior: ModelPosterior,
    grid: GridSpec,
    stride: int,
    *,
    z: float = 0.0,
    tile: int = DEFAULT_TILE_CELLS,
    full_covariance: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`predict_grid_map` predicted at every ``stride``-th cell centre (the first and
    last included: a grid of ``stride`` times the cell side, centred on them) and interpolated
    bilinearly onto ``grid``'s other cell centres: for a map that varies slowly over the cells
    and costs much per point (a field vector's 3 x 3 covariance). Covariances so interpolated
    stay positive semi-definite (convex combinations). ``stride`` 1 is
    :func:`predict_grid_map` itself."""
    if stride < 1:
        raise ValueError(f"stride must be at least 1 cell; got {stride}")
    if stride == 1:
        return predict_grid_map(posterior, grid, z=z, tile=tile, full_covariance=full_covariance)
    H, W = grid.shape
    shift = 0.5 * (stride - 1) * grid.resolution_m  # coarse centre j on fine centre j * stride
    coarse = GridSpec(
        (grid.origin_m[0] - shift, grid.origin_m[1] - shift),
        grid.resolution_m * stride,
        (-(-(H - 1) // stride) + 1, -(-(W - 1) // stride) + 1),
    )
    layers = predict_grid_map(posterior, coarse, z=z, tile=tile, full_covariance=full_covariance)
    return tuple(None if layer is None else _upsampled(layer, stride, grid.shape)
                 for layer in layers)  # type: ignore[return-value]  # fmt: skip


def _upsampled(layer: np.ndarray, stride: int, shape: tuple[int, int]) -> np.ndarray:
    """[H, W, ...] from a layer [Hc, Wc, ...] whose centre j lies on cell j * stride:
    bilinear between them."""

    def axis(n: int, coarse_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u = np.arange(n) / stride
        lo = np.minimum(np.floor(u).astype(np.int64), max(coarse_n - 2, 0))
        hi = np.minimum(lo + 1, coarse_n - 1)
        return lo, hi, u - lo

    r0, r1, tr = axis(shape[0], layer.shape[0])
    c0, c1, tc = axis(shape[1], layer.shape[1])
    tail = (1,) * (layer.ndim - 2)
    tr, tc = tr.reshape(-1, 1, *tail), tc.reshape(1, -1, *tail)
    rows = layer[r0] * (1.0 - tr) + layer[r1] * tr
    return rows[:, c0] * (1.0 - tc) + rows[:, c1] * tc


def skipped_cells(skip: np.ndarray, tile: int = DEFAULT_TILE_CELLS) -> np.ndarray:
    """[H, W] the cells of the tiles the predictors leave out for ``skip`` [H, W]: those whose
    every cell is skipped."""
    out = np.zeros(skip.shape, dtype=bool)
    for rows, cols in _blocks(skip.shape, tile):
        out[rows, cols] = bool(skip[rows, cols].all())
    return out


def _blocks(shape: tuple[int, int], tile: int) -> Iterator[tuple[slice, slice]]:
    """The square tiles of about ``tile`` cells a grid of ``shape`` is predicted in."""
    if tile < 1:
        raise ValueError(f"tile must be at least 1 cell; got {tile}")
    side = max(1, math.isqrt(tile))
    H, W = shape
    for r0 in range(0, H, side):
        for c0 in range(0, W, side):
            yield slice(r0, min(r0 + side, H)), slice(c0, min(c0 + side, W))


def _tiles(
    posterior: ModelPosterior,
    grid: GridSpec,
    z: float,
    tile: int,
    skip: np.ndarray | None = None,
) -> Iterator[tuple[slice, slice, torch.Tensor]]:
    """Square tiles of cell centres as posterior inputs: (rows, columns, Xs [h·w, D]), but
    those whose cells are all in ``skip`` [H, W].

    Square tiles make each a compact block whose far-away support can be skipped
    (`predict_block`), so the work grows with the map's area, not its square.
    """
    Z = posterior.support
    dims = int(Z.shape[1])
    points = grid.cell_points()
    if dims == 3:
        points = np.column_stack([points, np.full(points.shape[0], float(z))])
    elif dims != 2:
        raise ValueError(f"grid prediction needs 2-D or 3-D inputs; the posterior has {dims}")
    points = points.reshape(*grid.shape, dims)
    for rows, cols in _blocks(grid.shape, tile):
        if skip is not None and bool(skip[rows, cols].all()):
            continue
        block = points[rows, cols]
        Xs = torch.as_tensor(block.reshape(-1, dims), dtype=Z.dtype, device=Z.device)
        yield rows, cols, Xs


def _host(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()
