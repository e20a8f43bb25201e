"""The immutable map snapshot the worker publishes and every reader shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gp_mapper.engine.registry import LEGACY_MODEL
from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.map_products import MapProducts
from gp_mapper.mapping.occupancy import unknown_mask


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)  # a private copy: nobody else holds a reference
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class MapSnapshot:
    """The map after one engine update. Its arrays are read-only copies.

    A provisional snapshot shows a window under the previous hyperparameters before the fit;
    the fitted one follows, or, if the window is then rejected, the committed map again.

    Attributes:
        seq: Increases by one with each snapshot (across resets and loads).
        stamp_ns: Stamp of the newest sample in the map (ns).
        grid: The grid of `mean`, `variance` and `prior_variance`.
        mean: [H, W] posterior mean of the target (µT); |B| for a vector model.
        variance: [H, W] posterior variance of the latent field (µT², no noise).
        prior_variance: [H, W] variance with no data (µT²); `variance / prior_variance`
            says how much the data has taught.
        support_m: [M, D] the inputs the model's posterior rests on (m): inducing points of
            a sparse model, the kept data points of an exact one.
        trajectory_m: [K, 2] (x, y) path of the samples (m), thinned and capped.
        layers: Extra [H, W] layers a model adds (e.g. the coarse and detail parts of
            SOLVE-GP, the computational share of CaGP's variance), by name.
        model: The registered name of the model that made the map.
        field_mean: [H, W, 3] posterior mean of the map-frame field components (x, y, z)
            (µT) for a vector model (target "vector"); None for a map of one scalar.
        field_variance: [H, W, 3] their posterior variances (µT², latent field, no noise);
            None exactly when `field_mean` is.
        report: The engine's report of the update (`UpdateReport.as_dict()`), plus the
            window's "window_start_ns" and "window_end_ns"; {"reason": "provisional",
            "provisional": 1} for a provisional snapshot; {"loaded_from": path} for the
            snapshot a loaded map starts with.
        num_samples: Samples the map has been trained on.
        fine: The map at full resolution over the explored area (``full_resolution_cells``),
            for the ``~/field`` cloud and ``grids.npz``; None when off (they hold `grid`).
    """

    seq: int
    stamp_ns: int
    grid: GridSpec
    mean: np.ndarray
    variance: np.ndarray
    prior_variance: np.ndarray
    support_m: np.ndarray
    trajectory_m: np.ndarray
    report: dict[str, Any] = field(default_factory=dict)
    num_samples: int = 0
    layers: dict[str, np.ndarray] = field(default_factory=dict)
    model: str = LEGACY_MODEL
    field_mean: np.ndarray | None = None
    field_variance: np.ndarray | None = None
    fine: MapProducts | None = None

    def __post_init__(self) -> None:
        for name in ("mean", "variance", "prior_variance"):
            array = _frozen(getattr(self, name))
            if array.shape != self.grid.shape:
                raise ValueError(f"{name} has shape {array.shape}; the grid is {self.grid.shape}")
            object.__setattr__(self, name, array)
        support = _frozen(self.support_m)
        if support.ndim != 2:
            raise ValueError(f"support_m must be [M, D]; got shape {support.shape}")
        object.__setattr__(self, "support_m", support)
        layers = {}
        for name, layer in self.layers.items():
            layers[name] = _frozen(layer)
            if layers[name].shape != self.grid.shape:
                raise ValueError(
                    f"layer {name!r} has shape {layers[name].shape}; the grid is {self.grid.shape}"
                )
        object.__setattr__(self, "layers", layers)
        if (self.field_mean is None) != (self.field_variance is None):
            raise ValueError("field_mean and field_variance come together (or neither)")
        for name in ("field_mean", "field_variance"):
            if getattr(self, name) is None:
                continue
            array = _frozen(getattr(self, name))
            if array.shape != (*self.grid.shape, 3):
                raise ValueError(
                    f"{name} has shape {array.shape}; the grid needs {(*self.grid.shape, 3)}"
                )
            object.__setattr__(self, name, array)
        trajectory = _frozen(np.asarray(self.trajectory_m, dtype=np.float64).reshape(-1, 2))
        object.__setattr__(self, "trajectory_m", trajectory)
        object.__setattr__(self, "report", dict(self.report))
        if self.fine is not None:
            fine = self.fine
            frozen = {n: _frozen(a) for n in ("mean", "variance", "prior_variance", "support_m")
                      if (a := getattr(fine, n)) is not None}  # fmt: skip
            layers = {name: _frozen(layer) for name, layer in fine.layers.items()}
            vector = {n: _frozen(a) for n in ("field_mean", "field_variance")
                      if (a := getattr(fine, n)) is not None}  # fmt: skip
            object.__setattr__(self, "fine", fine._replace(**frozen, **vector, layers=layers))

    @classmethod
    def from_products(
        cls,
        products: MapProducts,
        *,
        seq: int,
        stamp_ns: int,
        trajectory_m: np.ndarray,
        model: str,
        report: dict[str, Any] | None = None,
        num_samples: int = 0,
        fine: MapProducts | None = None,
    ) -> MapSnapshot:
        """The snapshot of a map drawn as ``products`` (``map_products.predict_products``):
        the one way the pipeline and a batch fit make one."""
        return cls(
            seq=seq,
            stamp_ns=stamp_ns,
            grid=products.grid,
            mean=products.mean,
            variance=products.variance,
            prior_variance=products.prior_variance,
            support_m=products.support_m,
            layers=products.layers,
            model=model,
            field_mean=products.field_mean,
            field_variance=products.field_variance,
            fine=fine,
            trajectory_m=trajectory_m,
            report=report or {},
            num_samples=num_samples,
        )

    @property
    def exact(self) -> MapProducts:
        """The arrays of the exact values (the ``~/field`` cloud, ``grids.npz``): the
        full-resolution map where there is one, else this snapshot's grid."""
        if self.fine is not None:
            return self.fine
        return MapProducts(
            self.grid, self.mean, self.variance, self.prior_variance, self.support_m,
            self.layers, self.field_mean, self.field_variance,
        )  # fmt: skip

    @property
    def is_vector(self) -> bool:
        """True for a map of the field vector (its components are in `field_mean`)."""
        return self.field_mean is not None

    @property
    def num_support(self) -> int:
        """M, the size of the posterior's support."""
        return int(self.support_m.shape[0])

    @property
    def inducing_m(self) -> np.ndarray:
        """The support under the streaming model's name for it: its inducing points."""
        return self.support_m

    @property
    def num_inducing(self) -> int:
        """M (the streaming model's name for :attr:`num_support`)."""
        return self.num_support

    def unknown(self, ratio: float) -> np.ndarray:
        """[H, W] bool: cells whose variance exceeds `ratio` times the prior variance."""
        return unknown_mask(self.variance, self.prior_variance, ratio)
