"""The model interface every method of the engine meets, streaming or batch.

A **streaming** model absorbs one window at a time (``update(X, y)``) and never keeps old data:
the VIPS engine on the Bui bound. A **batch** model is fitted once on a whole log
(``fit(X, y)``): the exact GP, ACGP and, later, SOLVE-GP, CaGP and the additive GAM's coupled
posterior. Both hand the mapping layer the same things:

- ``posterior``: a :class:`ModelPosterior` the grid predicts from (latent mean and variance),
  with the inputs it rests on as ``support`` (inducing points, kept data points, ...);
- ``report``: the last update or fit, a :class:`Report` (a common core plus the model's own
  details);
- ``state_dict()`` / ``from_state()``: everything needed to predict and resume, as numpy arrays
  with the model's registered ``name`` under the key ``"model"``;
- ``device`` and ``hyperparameters()``: the latter in the node's parameter names (``kernel``,
  ``kernel_variance``, ``lengthscale``, ``constant_variance``, ``noise_variance``), so a fitted
  model can be written out as a parameter file the node takes.

These are structural protocols (as tinygp's ``Solver``): a model does not inherit from them.
Every member the mapping layer, the grid or the command line uses is declared here, so a caller
never asks a model what it has; where a model lacks a capability its member says so (an empty
``layers``, ``predict_field`` raising :class:`NotSupportedError`). :class:`ScalarOutputs`,
:class:`ChangesEverywhere` and :class:`PlainInputs` hold those defaults for a model or
posterior to mix in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from .errors import NotSupportedError

ModelKind = Literal["streaming", "batch"]
# What a posterior predicts: one scalar (‖B‖ or one component) or the field vector (3 components).
Target = Literal["scalar", "vector"]
Hyperparameters = dict[str, float | list[float] | str | bool]
# Called with (fraction done in [0, 1], a short status) during long fits.
ProgressCallback = Callable[[float, str], None]


@runtime_checkable
class ModelPosterior(Protocol):
    """What the grid needs: latent predictions and the inputs the posterior rests on."""

    @property
    def support(self) -> Tensor:
        """[M, D] the inputs the posterior is built on (inducing points, kept data, ...)."""
        ...

    @property
    def noise_variance(self) -> float:
        """σ² of the observations (add it to the latent variance for y)."""
        ...

    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at Xs [S, D]."""
        ...

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` for a compact tile of the grid (may skip far-away support)."""
        ...

    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] latent variance with no local data (what "unknown" is measured against)."""
        ...

    @property
    def target(self) -> Target:
        """What it predicts: "scalar", or "vector" for the field vector (``predict_field``)."""
        ...

    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        """The model's extra map layers at Xs, name -> [S] (e.g. SOLVE-GP's coarse and detail
        means, CaGP's computational variance); {} for a model without."""
        ...

    def predict_field(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """The field vector at Xs: mean [S, 3] and covariance [S, 3, 3] (latent, no noise).

        Raises:
            NotSupportedError: a posterior of one scalar (``target == "scalar"``).
        """
        ...

    def predict_block_with_field(self, Xs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`predict_block` and :meth:`predict_field` at once: ‖B‖'s mean and variance
        [S], the field's mean [S, 3] and covariance [S, 3, 3]. A vector posterior predicts
        ‖B‖ from the field, so the map products, which want both, pay for the field once.

        Raises:
            NotSupportedError: a posterior of one scalar (``target == "scalar"``).
        """
        ...

    def changed_since(self, previous: ModelPosterior, xy: np.ndarray) -> np.ndarray | None:
        """Which of the points ``xy`` [S, 2] (x, y) this posterior may predict otherwise than
        ``previous`` did, as a bool mask [S]; None: all of them. A map redraws only those (a
        tiled map's update changes the tiles it touched, not the building)."""
        ...


class ChangesEverywhere:
    """A posterior's :meth:`ModelPosterior.changed_since` for a model that is one whole: any
    update may change it anywhere. Mixed in."""

    def changed_since(self, previous: ModelPosterior, xy: np.ndarray) -> np.ndarray | None:
        return None


@runtime_checkable
class Report(Protocol):
    """The common core of every model's report of an update or a fit."""

    accepted: bool
    reason: str
    n: int
    m_before: int
    m_after: int
    hyperparameters: dict[str, Any]
    seconds_total: float
    num_outliers: int  # readings dropped as outliers before the fit (0 where none are screened)
    bound_after_fit: float | None  # the model's bound at the fitted θ [nats], where it has one
    nuisance: dict[str, float]  # flat nuisance estimates (heading curve, drift, run offset)

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        """Flat scalars for logs, diagnostics and ``fit_report.json``."""
        ...


@runtime_checkable
class Model(Protocol):
    """What every model has, streaming or batch."""

    name: ClassVar[str]
    kind: ClassVar[ModelKind]
    device: torch.device
    # Columns after the map inputs that X must carry ("yaw", "run", "time"), in this order.
    auxiliary_inputs: tuple[str, ...]

    @property
    def posterior(self) -> ModelPosterior | None:
        """The prediction cache of the last committed update or fit (None before)."""
        ...

    @property
    def report(self) -> Report | None:
        """The report of the last update or fit (None before)."""
        ...

    @property
    def num_updates(self) -> int:
        """Committed updates (a batch model: 1 once fitted)."""
        ...

    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]: ...

    def hyperparameters(self) -> Hyperparameters: ...

    def nuisance_summary(self) -> dict[str, float | list[float]]:
        """What the model holds of the nuisance (heading curve, drift, run offsets) [µT], as
        flat values; {} for a model without nuisance components, or one that reports them in
        its fit report's details instead (the batch ``gam``)."""
        ...

    def state_dict(self) -> dict[str, np.ndarray]: ...

    @classmethod
    def from_state(cls, state: Mapping[str, Any], device: str | torch.device = "auto") -> Model: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that absorbs one window at a time; atomic: a rejected window changes nothing."""

    # The most inducing points the model holds; at the cap a window adds none.
    max_inducing: int

    @property
    def awaits_first_fit(self) -> bool:
        """True while the model fits θ and no fit has been accepted yet (θ is the configured
        guess): a caller then gives the first window more readings."""
        ...

    def update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[ModelPosterior], None] | None = None,
        *,
        fit: bool = True,
        theta_of: StreamingModel | None = None,
    ) -> Report:
        """Absorb a batch X [N, D], y [N]; ``on_selected`` may show a provisional posterior;
        ``fit=False`` commits under the current θ (a caller that fits on a schedule);
        ``theta_of``, a model of the same kind and settings, gives the θ to start from (and,
        unfitted, to commit under) instead of this model's own: a tiled map's shared θ."""
        ...

    def empty_copy(self) -> StreamingModel:
        """A model of the same settings at this θ (fitted or not) holding no data: where a
        tiled map starts a new tile, so the building's θ carries over."""
        ...

    @property
    def pass_noise_variance(self) -> float:
        """σ²_pass [µT²]: the noise variance added to the fitted one for what stays the same
        along a pass (``core/noise.py``)."""
        ...

    def release_caches(self) -> None:
        """Drop what the model holds beyond its state (its prediction cache's large
        matrices); the next prediction computes them again, the same numbers. A tiled map
        calls it on the tiles far from where it has been updated lately."""
        ...

    def set_pass_noise_variance(self, variance: float) -> None:
        """Set σ²_pass for the windows to come (a map that measures it from its data)."""
        ...

    def record_passes(
        self,
        xy: np.ndarray,
        t_s: np.ndarray,
        length_m: float = math.nan,
        along_variance: float = math.nan,
        white_variance: float = math.nan,
    ) -> None:
        """Record where (xy [N, 2], m) and when (t_s [N], s) an accepted window's readings
        were taken, the pass error's correlation length along the path and, for a map of the
        field vector, its variance along the field, and the sensor's white noise measured
        beside them (NaN: not measured): a tiled map's
        variance then holds what the passes' shared offsets leave (``core/pass_record.py``).
        A map of one model keeps no record."""
        ...


@runtime_checkable
class BatchModel(Model, Protocol):
    """A model fitted on a whole log; atomic: a failed fit leaves the previous one."""

    def fit(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        *,
        progress: ProgressCallback | None = None,
    ) -> Report:
        """Fit on X [N, D], y [N] (hyperparameters and posterior)."""
        ...


class ScalarOutputs(ChangesEverywhere):
    """A posterior's members for one scalar output and no extra layers (and a map redrawn
    whole); mixed in, overridden where a posterior has more."""

    target: ClassVar[Target] = "scalar"

    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        return {}

    def predict_field(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        raise NotSupportedError(f"{type(self).__name__} predicts one scalar, not the field vector")

    def predict_block_with_field(self, Xs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        raise NotSupportedError(f"{type(self).__name__} predicts one scalar, not the field vector")


class PlainInputs:
    """A model's members for the map inputs alone and no nuisance components; mixed in."""

    auxiliary_inputs: tuple[str, ...] = ()

    def nuisance_summary(self) -> dict[str, float | list[float]]:
        return {}

    def record_passes(
        self,
        xy: np.ndarray,
        t_s: np.ndarray,
        length_m: float = math.nan,
        along_variance: float = math.nan,
        white_variance: float = math.nan,
    ) -> None:
        """A map of one model keeps no pass record: its variance is the model's own."""
