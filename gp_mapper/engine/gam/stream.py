"""The additive map streamed window by window: the VIPS stream over the block kernel.

A reading is one observation of ρ = map (with its offset) + heading + run + drift
(``block_kernel.py``); the stream (``vips.OnlineSparseGP``: the Bui bound, L*, the
selection, the fit, atomic commits, the state) runs over the tagged rows unchanged, with
:class:`~.block_selector.AdditiveVips` choosing each component's inducing variables. This class
turns the model's inputs into tagged rows and the coupled posterior back into the map layer
(offset + map, the nuisance removed: what the grids publish) and the nuisance estimates (the
heading-correction curve, the drift, the current run's offset, each with its sd).

Inputs are ``[position (d), yaw [rad] if heading, time [s] if run or drift]``
(:attr:`StreamingAdditiveGP.auxiliary_inputs`). Run labels come from the time: a gap of at
least ``run_gap`` seconds between consecutive readings starts a new run, as
``engine.auxiliary.run_labels`` splits a log for the batch model; the clock (first time, last
time, current run) is part of the state, so a resumed map continues the count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..core.hyperparameters import node_hyperparameters
from ..errors import StateError
from ..model import Hyperparameters, ModelKind
from ..state import StateSetting
from ..vips import OnlineSparseGP, Posterior, UpdateReport
from ..vips.options import StreamOptions
from ..vips.posterior import BLOCK_CUTOFF, RebuiltMatrix
from ..vips.selectors import Selector
from ..vips.wrapped import EngineViews
from .block_kernel import COMPONENT_TAGS, OBSERVATION, BlockKernel, tagged_rows, tags_of
from .block_selector import AdditiveVips
from .heading import deviation_features
from .settings import check, default

# The heading curve in the report: every 10° of a turn (as the batch model's fit report).
REPORT_HEADINGS = 36


class Clock(NamedTuple):
    """Where the stream's time stands: the origin of the time rows, the last reading, the run.

    Attributes:
        origin_s: the first reading's time [s]; rows hold time since it.
        last_s: the newest reading's time [s].
        run: the current run's label (0, 1, ...).
    """

    origin_s: float
    last_s: float
    run: int


@dataclass(frozen=True)
class AdditiveUpdateReport(UpdateReport):
    """The stream's report plus what the update learnt of the nuisance.

    Attributes:
        nuisance: flat scalars [µT]: ``heading_B`` .. ``heading_E`` (the compass-deviation
            coefficients of B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ) and ``heading_sd_max``
            (the curve's largest sd), ``drift`` and ``drift_sd`` at the newest reading,
            ``run_offset`` and ``run_offset_sd`` of the current run and ``run``, its label.
    """


class StreamingAdditiveGP(EngineViews):
    """Streaming additive map: offset + map, heading, run, drift (module docstring).

    Args:
        kernel: the block kernel at the initial θ (its parts are the components).
        noise_variance: initial noise variance [µT²].
        selector: :class:`~.block_selector.AdditiveVips` by default.
        run_gap: a time gap [s] of at least this long starts a new run.
        options: the options of the :class:`~..vips.OnlineSparseGP` that runs the update
            (``max_inducing`` counts every component's inducing variables).
    """

    name: ClassVar[str] = "gam_stream"
    kind: ClassVar[ModelKind] = "streaming"
    # This model's own setting in a state, beside the stream's; its clock is an array, by hand.
    STATE_SETTINGS: ClassVar[tuple[StateSetting, ...]] = (
        StateSetting("run_gap", float, key="gam_stream.run_gap"),
    )

    def __init__(
        self,
        kernel: BlockKernel,
        noise_variance: float = 0.1,
        selector: Selector | None = None,
        *,
        run_gap: float = default("gam.run_gap"),
        options: StreamOptions | None = None,
    ) -> None:
        if not isinstance(kernel, BlockKernel):
            raise TypeError(f"the streaming additive model needs a BlockKernel; got {type(kernel)}")
        self.run_gap = float(check("gam.run_gap", run_gap))
        self._stream = OnlineSparseGP(
            kernel,
            noise_variance,
            selector if selector is not None else AdditiveVips(),
            **(options if options is not None else StreamOptions()).as_kwargs(),
        )
        self._clock: Clock | None = None
        self._posterior: Posterior | None = None
        self._inner: Posterior | None = None
        self._report: AdditiveUpdateReport | None = None

    @classmethod
    def _wrap(
        cls, stream: OnlineSparseGP, run_gap: float, clock: Clock | None
    ) -> StreamingAdditiveGP:
        model = cls.__new__(cls)
        model.run_gap = run_gap
        model._stream = stream
        model._clock = clock
        model._posterior = None
        model._inner = None
        model._report = None
        return model

    def empty_copy(self) -> StreamingAdditiveGP:
        """The same model at this θ and clock holding no inducing points (a new map tile)."""
        return self._wrap(self._stream.empty_copy(), self.run_gap, self._clock)

    # ------------------------------------------------------------------ read-only views
    @property
    def kernel(self) -> BlockKernel:
        kernel = self._stream.kernel
        assert isinstance(kernel, BlockKernel)
        return kernel

    @property
    def input_dim(self) -> int:
        """d: the position columns (the map's inputs)."""
        return self.kernel.input_dim

    @property
    def components(self) -> tuple[str, ...]:
        """The components' names (the offset is the map's constant part)."""
        return self.kernel.names

    @property
    def auxiliary_inputs(self) -> tuple[str, ...]:
        """The input columns after the position: ``yaw`` [rad] if heading, ``time`` [s] if run
        or drift (the names of ``engine.auxiliary``)."""
        names = self.components
        return (("yaw",) if "heading" in names else ()) + (
            ("time",) if "run" in names or "drift" in names else ()
        )

    @property
    def clock(self) -> Clock | None:
        return self._clock

    @property
    def posterior(self) -> Posterior | None:
        """The map layer's posterior (offset + map) at positions [S, d]."""
        inner = self._stream.posterior
        if inner is None:
            return None
        if self._posterior is None or self._inner is not inner:
            self._posterior = _map_layer(inner)
            self._inner = inner
        return self._posterior

    def release_caches(self) -> None:
        """The stream's cache and the map layer's block of it."""
        self._stream.release_caches()
        if self._posterior is not None:
            self._posterior.release()

    @property
    def full_posterior(self) -> Posterior | None:
        """The posterior over the tagged rows (any component at its own inputs)."""
        return self._stream.posterior

    @property
    def num_inducing(self) -> int:
        return self._stream.num_inducing

    def num_inducing_of(self, name: str) -> int:
        """Inducing variables of one component."""
        carried = self._stream.carried
        if carried is None:
            return 0
        return int((tags_of(carried.Z) == COMPONENT_TAGS[name]).sum())

    @property
    def report(self) -> AdditiveUpdateReport | None:
        return self._report

    def hyperparameters(self) -> Hyperparameters:
        """The map's θ in the node's names (``constant_variance`` is the offset's), each other
        component's under its own name (``heading_compass_deviation_variance``, ...)."""
        kernel = self.kernel
        out: Hyperparameters = dict(node_hyperparameters(kernel.part("map"), self.noise_variance))
        for name in kernel.names[1:]:
            out.update({f"{name}_{k}": v for k, v in kernel.part(name).describe().items()})
        out["pass_noise_variance"] = self._stream.pass_noise_variance  # within noise_variance
        return out

    # ------------------------------------------------------------------ operations
    def update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[Posterior], None] | None = None,
        *,
        fit: bool = True,
        theta_of: StreamingAdditiveGP | None = None,
    ) -> AdditiveUpdateReport:
        """Absorb a window: X [N, d + len(auxiliary_inputs)], y [N] [µT]; atomic.
        ``theta_of``: start from that model's θ (``OnlineSparseGP.update``).

        Raises:
            ValueError: wrong shapes, no rows, NaN or inf.
        """
        X_t, y_t = self._validate(X, y)
        rows, clock = self._rows(X_t, OBSERVATION)
        hook = None
        if on_selected is not None:

            def hook(inner: Posterior) -> None:
                on_selected(_map_layer(inner))

        stream = None if theta_of is None else theta_of._stream
        report = self._stream.update(rows, y_t, hook, fit=fit, theta_of=stream)
        if report.accepted:
            self._clock = clock
        nuisance = self.nuisance_summary() if report.accepted else {}
        fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
        self._report = AdditiveUpdateReport(
            **{
                **fields,
                "hyperparameters": self.hyperparameters(),
                "nuisance": {k: v for k, v in nuisance.items() if not isinstance(v, list)},
            }
        )
        return self._report

    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """The map layer's latent mean and variance [S] at positions Xs [S, d]."""
        posterior = self.posterior
        if posterior is None:
            raise RuntimeError("the model has no data yet: call update() first")
        Xs_t = torch.as_tensor(Xs, dtype=self.dtype, device=self.device)
        if Xs_t.ndim != 2 or Xs_t.shape[1] != self.input_dim:
            raise ValueError(f"positions must be [S, {self.input_dim}]; got {tuple(Xs_t.shape)}")
        return posterior.predict(Xs_t)

    def predict_reading(self, X: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """The whole predictor's latent mean and variance [S] at model inputs X [S, d + aux]:
        what a reading there would be, nuisance included (the coupled posterior, cross-terms
        and all; add ``noise_variance`` for y). Times continue the stream's clock: a gap of
        ``run_gap`` after the newest reading is a new run, whose offset is unknown."""
        inner = self._stream.posterior
        if inner is None:
            raise RuntimeError("the model has no data yet: call update() first")
        X_t, _ = self._validate(X, torch.zeros(len(X), dtype=self.dtype, device=self.device))
        rows, _ = self._rows(X_t, OBSERVATION)
        return inner.predict(rows)

    def predict_component(self, name: str, inputs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """One component's latent mean and variance [S] at its own inputs.

        Args:
            name: a component ("map", "heading", "run", "drift").
            inputs: positions [S, d] for map, yaw [S] rad for heading, run labels [S] for run,
                times [S] s (the model's own time, as given to ``update``) for drift.
        """
        inner = self._stream.posterior
        if inner is None:
            raise RuntimeError("the model has no data yet: call update() first")
        if name not in self.components:
            raise ValueError(f"no component {name!r}; the model has {self.components}")
        v = torch.as_tensor(inputs, dtype=self.dtype, device=self.device)
        if name == "map":
            return self.predict(v)
        v = v.reshape(-1)
        zero = torch.zeros_like(v)
        origin = 0.0 if self._clock is None else self._clock.origin_s
        aux = {
            "heading": (v, zero, zero),
            "run": (zero, v, zero),
            "drift": (zero, zero, v - origin),
        }
        positions = v.new_zeros((v.shape[0], self.input_dim))
        return inner.predict(tagged_rows(positions, *aux[name], COMPONENT_TAGS[name]))

    def nuisance_summary(self) -> dict[str, float | list[float]]:
        """What the model holds of the nuisance now [µT] (``AdditiveUpdateReport.nuisance``,
        plus ``heading_curve_yaw``/``_mean``/``_sd`` every 10° and ``drift_time_s``/``_mean``/
        ``_sd`` at the drift's inducing times)."""
        if self._stream.posterior is None:
            return {}
        out: dict[str, float | list[float]] = {}
        names = self.components
        if "heading" in names:
            yaw = torch.linspace(0.0, 2.0 * math.pi, REPORT_HEADINGS + 1, dtype=self.dtype)[:-1]
            mean, var = self.predict_component("heading", yaw)
            # The curve lies in the span of the four harmonics, orthogonal over the even grid
            # (FᵀF = 18 I): the normal equations are exact and, unlike lstsq, repeat bit for bit.
            features = deviation_features(yaw.to(mean))
            coefficients = torch.linalg.solve(features.mT @ features, features.mT @ mean)
            out.update(zip(("heading_B", "heading_C", "heading_D", "heading_E"),
                           coefficients.cpu().tolist(), strict=True))  # fmt: skip
            out["heading_sd_max"] = float(var.max().sqrt())
            out["heading_curve_yaw"] = yaw.tolist()
            out["heading_curve_mean"] = mean.cpu().tolist()
            out["heading_curve_sd"] = var.sqrt().cpu().tolist()
        clock = self._clock
        if clock is not None and "drift" in names:
            mean, var = self.predict_component("drift", [clock.last_s])
            out["drift"], out["drift_sd"] = float(mean[0]), float(var[0].sqrt())
            Z = self._stream.carried.Z
            times = Z[tags_of(Z) == COMPONENT_TAGS["drift"], self.input_dim + 2] + clock.origin_s
            times = torch.sort(times).values
            mean, var = self.predict_component("drift", times)
            out["drift_time_s"] = times.cpu().tolist()
            out["drift_mean"] = mean.cpu().tolist()
            out["drift_curve_sd"] = var.sqrt().cpu().tolist()
        if clock is not None and "run" in names:
            mean, var = self.predict_component("run", [float(clock.run)])
            out["run"] = float(clock.run)
            out["run_offset"], out["run_offset_sd"] = float(mean[0]), float(var[0].sqrt())
        return out

    # ------------------------------------------------------------------ inputs
    def _rows(self, X: Tensor, tag: int) -> tuple[Tensor, Clock | None]:
        """Tagged rows of the inputs X [N, d + aux] and the clock after them."""
        d = self.input_dim
        n = X.shape[0]
        zero = X.new_zeros(n)
        aux = self.auxiliary_inputs
        yaw = X[:, d + aux.index("yaw")] if "yaw" in aux else zero
        if "time" not in aux:
            return tagged_rows(X[:, :d], yaw, zero, zero, tag), self._clock
        t = X[:, d + aux.index("time")]
        t_np = t.detach().cpu().numpy()
        clock = self._clock
        if clock is None:
            clock = Clock(float(t_np[0]), float(t_np[0]), 0)
        # A gap either way (a pause, or a clock that went back: another log) starts a run.
        steps = np.abs(np.diff(np.concatenate([[clock.last_s], t_np]))) >= self.run_gap
        runs = clock.run + np.cumsum(steps)
        run = torch.as_tensor(runs, dtype=X.dtype, device=X.device)
        rows = tagged_rows(X[:, :d], yaw, run, t - clock.origin_s, tag)
        return rows, Clock(clock.origin_s, float(t_np[-1]), int(runs[-1]))

    def _validate(self, X: Tensor | np.ndarray, y: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        X_t = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        y_t = torch.as_tensor(y, dtype=self.dtype, device=self.device)
        width = self.input_dim + len(self.auxiliary_inputs)
        if X_t.ndim != 2 or X_t.shape[1] != width or y_t.shape != (X_t.shape[0],):
            columns = ", ".join([f"position ({self.input_dim})", *self.auxiliary_inputs])
            raise ValueError(
                f"components {'+'.join(self.components)} need X [N, {width}] ({columns}) and "
                f"y [N]; got {tuple(X_t.shape)} and {tuple(y_t.shape)}"
            )
        if X_t.shape[0] == 0:
            raise ValueError("empty batch: X and y have no rows")
        if not torch.isfinite(X_t).all():
            raise ValueError(f"X has {int((~torch.isfinite(X_t)).any(1).sum())} rows with NaN/inf")
        if not torch.isfinite(y_t).all():
            raise ValueError(f"y has {int((~torch.isfinite(y_t)).sum())} NaN/inf values")
        return X_t, y_t

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """The stream's state over the tagged rows, under this model's name, and the clock."""
        out = {
            **self._stream.state_dict(),
            "model": np.array(self.name),
            **{f.field: np.array(f.read_from(self)) for f in self.STATE_SETTINGS},
        }
        if self._clock is not None:
            out["gam_stream.clock"] = np.array(
                [self._clock.origin_s, self._clock.last_s, float(self._clock.run)]
            )
        return out

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], device: str | torch.device = "auto"
    ) -> StreamingAdditiveGP:
        """Rebuild from :meth:`state_dict`.

        Raises:
            StateError: another model's state, or a malformed one.
        """
        saved = str(np.asarray(state.get("model", "")))
        if saved != cls.name:
            raise StateError(f"the state holds a {saved!r} model, not a {cls.name!r} one")
        try:
            (run_gap_setting,) = cls.STATE_SETTINGS
            run_gap = float(check("gam.run_gap", run_gap_setting.parse(state)))
            clock = None
            if "gam_stream.clock" in state:
                origin, last, run = np.asarray(state["gam_stream.clock"], dtype=np.float64)
                if not (math.isfinite(origin) and math.isfinite(last) and run >= 0):
                    raise StateError(f"gam_stream clock is not valid: {(origin, last, run)}")
                clock = Clock(float(origin), float(last), int(run))
        except (KeyError, TypeError, ValueError) as err:
            raise StateError(f"gam_stream state is malformed: {err}") from err
        inner = {k: v for k, v in state.items() if not str(k).startswith("gam_stream.")}
        inner["model"] = np.array(OnlineSparseGP.name)
        stream = OnlineSparseGP.from_state(inner, device)
        if not isinstance(stream.kernel, BlockKernel):
            raise StateError("gam_stream state does not hold an additive block kernel")
        return cls._wrap(stream, run_gap, clock)


def _map_layer(inner: Posterior) -> Posterior:
    """The posterior of offset + map at positions [S, d] from the one over tagged rows.

    The map layer is the map component's variable, uncorrelated a priori with every other
    component's inducing values, so its prediction needs only the map rows of α and W (the
    coupling with the nuisance is in W's map block already).
    """
    kernel = inner.kernel
    assert isinstance(kernel, BlockKernel)
    map_kernel = kernel.part("map")
    d = kernel.input_dim
    local = map_kernel.without_constant()
    radius = None if local is None else local.negligible_distance(BLOCK_CUTOFF)
    if kernel.single:  # every inducing variable is the map's: the stream's cache as it is
        Z = inner.Z[:, :d].contiguous()
        return dataclasses.replace(inner, kernel=map_kernel, Z=Z, block_radius=radius)
    idx = torch.nonzero(tags_of(inner.Z) == COMPONENT_TAGS["map"]).squeeze(-1)
    alpha = inner.alpha[idx]
    W = _map_block(inner, idx)
    W_ones = W.sum(1)
    return Posterior(
        map_kernel,
        inner.Z[idx][:, :d].contiguous(),
        inner.noise_variance,
        alpha,
        RebuiltMatrix(W, partial(_map_block, inner, idx)),
        W_ones,
        float(W_ones.sum()),
        float(alpha.sum()),
        radius,
    )


def _map_block(inner: Posterior, idx: Tensor) -> Tensor:
    """The map rows and columns of the tagged posterior's W."""
    return inner.W[idx][:, idx]
