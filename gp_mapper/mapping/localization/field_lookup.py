"""The map as a localizer reads it: mean and variance of the mapped scalar on a fine grid.

A particle filter asks the map thousands of times per reading; the GP's own prediction
costs O(M) per point, so the map is predicted once on a grid of ``resolution_m`` (default
5 cm, a tenth of the lengthscales fitted on the Aalto and office data) and read by bilinear
interpolation between cell centres. Outside the grid, and in cells the map does not know
(latent variance above ``UNKNOWN_FRACTION`` of the prior variance, the grid's own rule), a
particle gets the map's prior: the level the map holds far from its data and the prior
variance, so an unmapped place neither attracts nor repels particles by a confident wrong
value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gp_mapper.engine.tiled import BlendedPosterior
from gp_mapper.mapping.errors import MapFileError
from gp_mapper.mapping.grid import GridSpec, grid_for, predict_grid_map_every
from gp_mapper.mapping.map_file import load_map, model_from_map

if TYPE_CHECKING:
    from gp_mapper.engine import Model

# Cell side of the lookup grid [m].
DEFAULT_RESOLUTION_M = 0.05
# The lookup grid reaches this far past the map's data [m] (the prior beyond).
DEFAULT_MARGIN_M = 0.5
# A cell is known where its latent variance is below this share of the prior variance.
UNKNOWN_FRACTION = 0.5
# At most this many cells in the lookup grid (a 200 x 100 m floor at 5 cm is 8 M cells; the
# grid coarsens beyond): 4 M cells of three float64 layers is 96 MB, and a map of the field
# vector holds 9 more (its mean and covariance's entries): 384 MB.
MAX_LOOKUP_CELLS = 4_000_000
# A map of the field vector is predicted this share of its shortest lengthscale apart and
# interpolated between (``FieldLookup.from_model``): its prediction costs three derivative rows
# of the kernel and a 3 x 3 covariance per point (a 60 x 40 m floor at every 5 cm cell: ~40
# min on one core). On the validation floor (ℓ 1.3 m: every third cell) the interpolated mean
# is within 0.02 µT of the predicted one at the median cell, 0.36 µT at the 99th percentile
# (0.3 of the map's own sd there), at a tenth of the time.
FIELD_SPACING_PER_LENGTHSCALE = 0.125
# The six entries of a symmetric 3 x 3 covariance (xx, xy, xz, yy, yz, zz).
_UPPER = np.triu_indices(3)
# The known cells' centres, ‖B‖ mean and variance, field layer (``known_cell_layers``).
KnownLayers = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None"]


@dataclass(frozen=True)
class MapNoise:
    """What a reading adds to the map's latent variance [µT²].

    Attributes:
        white: the sensor's white noise σ²: averages away over a batch of readings.
        shared: σ²_pass, the error that stays the same along a pass: a batch of readings of
            one pass keeps it whole (per component of a field vector: its isotropic part).
        along: for a map of the field vector, the part of the shared error that lies along
            the field (b of ``a I + b u uᵀ``, ``engine.core.pass_record``; 0: isotropic).
        unresolved: the rest of the map's fitted noise: field its kernel does not resolve
            (features shorter than its lengthscale), which readings a few centimetres apart
            share, so a batch keeps it whole too (0 where the sensor's noise was not measured:
            all of the fitted noise is then taken as white).
    """

    white: float
    shared: float
    along: float = 0.0
    unresolved: float = 0.0

    def of_mean(self, count: int | np.ndarray) -> float | np.ndarray:
        """The noise of the mean of ``count`` readings of one pass: ‖B‖'s (the shared error
        along the field included)."""
        return self.component_of_mean(count) + self.along

    def component_of_mean(self, count: int | np.ndarray) -> float | np.ndarray:
        """The same per component of the field vector, less the part along the field."""
        return self.white / np.maximum(count, 1) + self.shared + self.unresolved

    @classmethod
    def from_hyperparameters(
        cls, theta: Mapping[str, Any], along_share: float = 0.0, sensor_white: float = math.nan
    ) -> MapNoise:
        """From a model's ``hyperparameters()``: ``noise_variance`` is the whole noise and
        ``pass_noise_variance`` (where the model has one) its shared part, of which a map of
        the field vector measured ``along_share`` along the field (3 · share · σ²_pass along
        it, the rest isotropic: ``PassCounts.along_share``). Of the rest, the sensor's white
        noise where measured (``sensor_white``, ``PassCounts.white``) averages over a batch
        and what lies above it is ``unresolved``."""
        total = float(theta.get("noise_variance", 0.0))
        shared = float(theta.get("pass_noise_variance", 0.0) or 0.0)
        if not (math.isfinite(total) and total > 0.0):
            raise ValueError(f"the map's noise variance must be positive; got {total}")
        if not 0.0 <= along_share <= 1.0:
            raise ValueError(f"along_share must lie in [0, 1]; got {along_share}")
        shared = min(max(shared, 0.0), total)
        white = total - shared
        unresolved = 0.0
        if math.isfinite(sensor_white) and sensor_white > 0.0:
            white, unresolved = min(sensor_white, white), max(white - sensor_white, 0.0)
        return cls(white=white, shared=shared * (1.0 - along_share),
                   along=3.0 * along_share * shared, unresolved=unresolved)  # fmt: skip


class FieldLookup:
    """The map's latent mean and variance on a grid, read by bilinear interpolation.

    Args:
        grid: the lookup grid.
        mean, variance, prior_variance: [H, W] latent mean [µT], variance and prior variance
            [µT²] at the cell centres (``grid.predict_grid``).
        noise: the map's noise model.
        lengthscale_m: the map kernel's shortest lengthscale (over which its errors are
            correlated along a path).
        field: for a map of the field vector (``target: vector``), the map-frame components'
            mean [H, W, 3] and their variances [H, W, 3] or covariances [H, W, 3, 3]; ``mean``
            and ``variance`` are then ‖B‖'s and decide which cells are known.
    """

    def __init__(
        self,
        grid: GridSpec,
        mean: np.ndarray,
        variance: np.ndarray,
        prior_variance: np.ndarray,
        noise: MapNoise,
        lengthscale_m: float,
        field: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        if mean.shape != grid.shape or variance.shape != grid.shape:
            raise ValueError(f"layers {mean.shape} / {variance.shape} != grid {grid.shape}")
        if not np.isfinite(mean).all() or not np.isfinite(variance).all():
            raise ValueError("the map's mean and variance must be finite on the lookup grid")
        self.grid = grid
        self.known = variance < UNKNOWN_FRACTION * prior_variance
        if not self.known.any():
            raise ValueError("the map knows no cell of its grid: nothing to localize against")
        # The map far from its data: the mean its unknown cells hold (the posterior of the
        # level), or the known cells' median when every cell is known; the prior variance.
        far = ~self.known
        self.far_mean = float(np.median(mean[far] if far.any() else mean))
        self.far_variance = float(np.max(prior_variance))
        # Unknown cells read as the far field (the module docstring).
        self._mean = np.where(self.known, mean, self.far_mean)
        self._variance = np.where(self.known, np.maximum(variance, 0.0), self.far_variance)
        self.noise = noise
        self.lengthscale_m = float(lengthscale_m)
        self._known_cells = np.flatnonzero(self.known.ravel())
        self._known_layers: KnownLayers | None = None
        self._field: np.ndarray | None = None
        if field is not None:
            f_mean, f_cov = (np.asarray(a, dtype=np.float64) for a in field)
            if f_cov.shape == f_mean.shape:  # variances only: a diagonal covariance
                f_cov = f_cov[..., None] * np.eye(3)
            if f_mean.shape != (*grid.shape, 3) or f_cov.shape != (*grid.shape, 3, 3):
                raise ValueError(
                    f"field layers {f_mean.shape} / {f_cov.shape} != grid x 3 / grid x 3 x 3"
                )
            if not np.isfinite(f_mean).all() or not np.isfinite(f_cov).all():
                raise ValueError("the map's field must be finite on the lookup grid")
            unknown = ~self.known[..., None]
            far_field = np.median(f_mean[~self.known] if far.any() else f_mean.reshape(-1, 3), 0)
            self.far_field = far_field
            # Covariances kept as their six entries [H, W, 6] (bilinear weights apply entry by
            # entry); an unknown cell has the prior's, independent components of the far
            # variance.
            self._far_covariance = (self.far_variance * np.eye(3))[_UPPER]
            # One [H, W, 9] layer (mean, then the covariance's entries): one gather per read.
            self._field = np.concatenate([
                np.where(unknown, far_field, f_mean),
                np.where(unknown, self._far_covariance, f_cov[..., _UPPER[0], _UPPER[1]]),
            ], axis=-1)  # fmt: skip
            self._far_stack = np.concatenate([far_field, self._far_covariance])

    @property
    def has_field(self) -> bool:
        """Whether the map holds the field vector (a heading can be read from it)."""
        return self._field is not None

    @classmethod
    def from_model(
        cls,
        model: Model,
        box: tuple[float, float, float, float],
        *,
        resolution_m: float = DEFAULT_RESOLUTION_M,
        margin_m: float = DEFAULT_MARGIN_M,
        z: float = 0.0,
        field_spacing_m: float | None = None,
    ) -> FieldLookup:
        """Predict ``model`` over ``box`` (xmin, xmax, ymin, ymax) [m] plus ``margin_m``: ‖B‖,
        and the field vector where the model maps it.

        A map of the field vector is predicted every ``field_spacing_m`` (None: an eighth of its
        shortest lengthscale, ``FIELD_SPACING_PER_LENGTHSCALE``; never finer than the grid)
        and interpolated onto the grid's cells; a scalar map at every cell.
        """
        posterior = model.posterior
        if posterior is None:
            raise ValueError("the model has no posterior yet: map some readings first")
        grid = grid_for(box, resolution_m, MAX_LOOKUP_CELLS, margin_m=margin_m)
        theta = model.hyperparameters()
        stride = 1
        if posterior.target == "vector":
            if field_spacing_m is None:
                field_spacing_m = FIELD_SPACING_PER_LENGTHSCALE * _shortest_lengthscale_of(model)
            stride = max(1, math.floor(field_spacing_m / grid.resolution_m + 1e-9))
        mean, variance, prior, field_mean, field_var = predict_grid_map_every(
            posterior, grid, stride, z=z, full_covariance=True
        )
        field = None if field_mean is None else (field_mean, field_var)  # None: a scalar map
        # A tiled map's pass record: how much of its pass error lies along the field, and the
        # sensor's white noise measured beside it.
        share, white = 0.0, math.nan
        if isinstance(posterior, BlendedPosterior):
            share, white = posterior.passes.along_share(), posterior.passes.white
        return cls(
            grid, mean, variance, prior, MapNoise.from_hyperparameters(theta, share, white),
            _shortest_lengthscale(theta), field,
        )  # fmt: skip

    @classmethod
    def from_map_file(
        cls,
        path: str | Path,
        *,
        resolution_m: float = DEFAULT_RESOLUTION_M,
        margin_m: float = DEFAULT_MARGIN_M,
        device: str = "cpu",
    ) -> FieldLookup:
        """Read a map file written by ``gp_mapper`` (any scalar model, tiled or not).

        Raises:
            MapFileError: the file is faulty, or holds no map a localizer can read (a vector
                map, no data); the message names the path.
        """

        path = Path(path).expanduser()
        data = load_map(path)
        if data.config.get("target") not in (None, "norm", "vector"):
            raise MapFileError(
                f"{path}: maps target {data.config.get('target')!r}; the localizer reads a "
                "map of the field's norm (target: norm) or of the whole vector (target: vector)"
            )
        if data.explored_box is None:
            raise MapFileError(f"{path}: the map holds no data")
        model = model_from_map(data, path, device=device)
        try:
            return cls.from_model(
                model, data.explored_box, resolution_m=resolution_m, margin_m=margin_m
            )
        except ValueError as err:
            raise MapFileError(f"{path}: {err}") from err

    @property
    def mean_grid(self) -> np.ndarray:
        """[H, W] ‖B‖ at the cell centres as the particles read it (unknown cells: the far
        field)."""
        return self._mean

    def at(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Latent mean [P] and variance [P] of ‖B‖ at points ``xy`` [P, 2] (m); the far field
        outside the grid."""
        mean, variance = self._interpolate(
            ((self._mean, self.far_mean), (self._variance, self.far_variance)), xy
        )
        return mean, variance

    def field_at(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Map-frame field mean [P, 3] and component variances [P, 3] at ``xy`` [P, 2].

        Raises:
            ValueError: the map holds ‖B‖ only (``has_field`` is False).
        """
        mean, covariance = self.field_covariance_at(xy)
        return mean, np.diagonal(covariance, axis1=1, axis2=2).copy()

    def field_covariance_at(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Map-frame field mean [P, 3] and its covariance [P, 3, 3] at ``xy`` [P, 2] (latent
        field, no noise; bilinear between cell centres, the prior's outside the grid).

        Raises:
            ValueError: the map holds ‖B‖ only (``has_field`` is False).
        """
        if self._field is None:
            raise ValueError("this map holds |B| only (target: norm), not the field vector")
        (stack,) = self._interpolate(((self._field, self._far_stack),), xy)
        out_mean, entries = stack[:, :3], stack[:, 3:]
        out_cov = np.empty((entries.shape[0], 3, 3))
        out_cov[:, _UPPER[0], _UPPER[1]] = entries
        out_cov[:, _UPPER[1], _UPPER[0]] = entries
        return out_mean, out_cov

    def _interpolate(
        self, layers: tuple[tuple[np.ndarray, Any], ...], xy: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Bilinear interpolation of ([H, W] or [H, W, K] layer, far value) pairs between cell
        centres; the far value outside the grid."""
        xy = np.asarray(xy, dtype=np.float64)
        H, W = self.grid.shape
        res = self.grid.resolution_m
        u = (xy[:, 0] - self.grid.origin_m[0]) / res - 0.5  # column, between cell centres
        v = (xy[:, 1] - self.grid.origin_m[1]) / res - 0.5  # row
        inside = (u >= -0.5) & (u <= W - 0.5) & (v >= -0.5) & (v <= H - 0.5)
        u = np.clip(u, 0.0, max(W - 1, 0))
        v = np.clip(v, 0.0, max(H - 1, 0))
        i0 = np.minimum(np.floor(u).astype(np.int64), max(W - 2, 0))
        j0 = np.minimum(np.floor(v).astype(np.int64), max(H - 2, 0))
        i1, j1 = np.minimum(i0 + 1, W - 1), np.minimum(j0 + 1, H - 1)
        tu, tv = u - i0, v - j0
        weights = [(1 - tu) * (1 - tv), tu * (1 - tv), (1 - tu) * tv, tu * tv]
        out = []
        for layer, far in layers:
            w = [x[:, None] for x in weights] if layer.ndim == 3 else weights
            value = (
                layer[j0, i0] * w[0] + layer[j0, i1] * w[1]
                + layer[j1, i0] * w[2] + layer[j1, i1] * w[3]
            )  # fmt: skip
            out.append(np.where(inside.reshape((-1,) + (1,) * (layer.ndim - 2)), value, far))
        return tuple(out)

    def is_known(self, xy: np.ndarray) -> np.ndarray:
        """[P] whether the cell under each point is known."""
        cols, rows, inside = self.grid.world_to_cell(np.asarray(xy, dtype=np.float64))
        known = np.zeros(inside.shape, dtype=bool)
        known[inside] = self.known[rows[inside], cols[inside]]
        return known

    def sample_known(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` points [count, 2] uniform over the known cells."""
        cells = rng.choice(self._known_cells, size=count)
        rows, cols = np.divmod(cells, self.grid.width)
        res = self.grid.resolution_m
        x = self.grid.origin_m[0] + (cols + rng.uniform(size=count)) * res
        y = self.grid.origin_m[1] + (rows + rng.uniform(size=count)) * res
        return np.column_stack([x, y])

    def known_cell_layers(self) -> KnownLayers:
        """The known cells' centres [K, 2] (m), ‖B‖ mean [K] and variance [K], and for a map of
        the field vector its [K, 9] layer (mean, then the covariance's upper entries xx, xy,
        xz, yy, yz, zz), else None: what a proposal weighs (``proposal``). Made once."""
        if getattr(self, "_known_layers", None) is None:  # a lookup pickled before it had them
            rows, cols = np.divmod(self._known_cells, self.grid.width)
            res = self.grid.resolution_m
            centres = np.column_stack([self.grid.origin_m[0] + (cols + 0.5) * res,
                                       self.grid.origin_m[1] + (rows + 0.5) * res])  # fmt: skip
            field = None if self._field is None else self._field[rows, cols]
            self._known_layers = (centres, self._mean[rows, cols], self._variance[rows, cols],
                                  field)  # fmt: skip
        return self._known_layers

    @property
    def known_area_m2(self) -> float:
        return float(self._known_cells.size * self.grid.resolution_m**2)


def _shortest_lengthscale_of(model: Model) -> float:
    """The shortest lengthscale of a model, or of any of its tiles (a tiled map fits its own
    per tile) [m]."""
    shortest = _shortest_lengthscale(model.hyperparameters())
    for tile in getattr(model, "tiles", {}).values():
        shortest = min(shortest, _shortest_lengthscale(tile.hyperparameters()))
    return shortest


def _shortest_lengthscale(theta: Mapping[str, Any]) -> float:
    """The shortest lengthscale among a model's hyperparameters [m] (1 m if it names none)."""
    values = []
    for name, value in theta.items():
        if "lengthscale" in name:
            values.extend(np.atleast_1d(np.asarray(value, dtype=np.float64)).tolist())
    finite = [v for v in values if math.isfinite(v) and v > 0.0]
    return min(finite) if finite else 1.0
