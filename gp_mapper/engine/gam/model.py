"""The additive sparse variational GP as a batch model: ``gp-mapper fit --model gam``.

The model of Adam, Durrande & John 2018 (Scalable GAM using sparse variational GPs):
``y_n = Σ_c f_c(x_n^(c)) + ε_n``, each f_c a GP on its own columns with its own inducing set,
and q(U) over all inducing values in one of the three forms the paper compares (Sec. 3.2, Sec. 4):

- ``coupled_precision`` (the paper's, Sec. 4 eq. 7): ``Σ_U⁻¹ = K_UU⁻¹ + BBᵀ``, B of rank R.
  With the Gaussian likelihood α has a closed form, independent of B (ours: fitted by gradient
  steps it stalls, as the unwhitened mean K_UU α is badly conditioned); B, θ and σ² are fitted
  by L-BFGS from a B away from 0 (B = 0 is a stationary point: the gradient in B vanishes).
- ``full_coupled``: a full Gaussian over all M_tot values (whitened); its optimum is closed
  form and the ELBO there is Titsias' collapsed bound, so L-BFGS fits θ and σ² only.
- ``mean_field``: independent Gaussians per component; also closed form at its optimum.

In every form the closed-form part is recomputed at each θ and held fixed while
differentiating: it is the optimum, so the ELBO's gradient in it is zero and the partial
derivative in θ is the total one.

A model may declare a map layer (our magnetometer design, not in the paper): the components
published as the map (offset + map) at map inputs [S, 2 or 3], the other components being nuisance
read from further input columns (``auxiliary_inputs``: yaw, run label, time). Its ``posterior`` and
``predict`` are then the map layer's; ``predict_subset`` and ``predict_components`` take the model's
full inputs.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ..batch import BatchModelBase, StateSetting
from ..core.device import resolve_device
from ..core.fit import CHANGE_TOLERANCE, GRADIENT_TOLERANCE, single_step_lbfgs
from ..core.hyperparameters import node_hyperparameters
from ..core.kernels import Constant, Kernel, Stationary, Sum
from ..core.linalg import Jitter, cholesky_with_jitter
from ..core.noise import GaussianNoise
from ..errors import NumericalError, StateError
from ..model import Hyperparameters, ModelKind, PlainInputs, ProgressCallback
from ..report import FitReport
from ..state import freeze_parameters, validate_data
from .blocks import Blocks, kernel_blocks
from .component import Component, check_components, component_kernel_from_spec
from .heading import CompassDeviation, deviation_features
from .posterior import (
    AdditivePosterior,
    MapLayerPosterior,
    PrecisionPosterior,
    WhitenedPosterior,
)
from .precision import default_rank, optimal_alpha, precision_core, precision_elbo
from .run_offset import RunOffset
from .settings import default as setting_default
from .whitened import optimal_whitened_q, whitened_elbo, whitened_features
from .zero_mean import ZeroMeanMatern32

PosteriorForm = Literal["coupled_precision", "full_coupled", "mean_field"]
POSTERIOR_FORMS: tuple[str, ...] = ("coupled_precision", "full_coupled", "mean_field")
# 2: the map layer, its input width and the auxiliary inputs; format 1 states still load.
DEFAULT_ITERATIONS = setting_default("gam.iterations")
# B starts at this scale times N(0, 1): never 0, where the gradient in B vanishes (B = 0 is a
# stationary point of the ELBO).
B_INIT_SCALE = 0.1
# Stop on a small change only after this many in a row: the joint fit of B and θ has stretches
# of tiny steps (one such step ended a Friedman fit of R = 113 45 nats short of R = 32's).
CHANGE_PATIENCE = 5
# Stop, too, when the line search has stalled: an iteration that needed more than this many
# evaluations (a working one takes 2: the trial and its acceptance) and moved the ELBO by less
# than STALL_NATS nats in all, STALL_PATIENCE times in a row. On Aalto runs 1-2 (N 17 794) the
# ELBO stopped moving at iteration 25 of 43 (under 1e-6 nats a datum) while each iteration
# spent 14-23 evaluations, 60 % of the fit's time. A stalled iteration is not the tiny steps
# above: those take two evaluations each.
STALLED_EVALUATIONS = 10
STALL_NATS = 0.05
STALL_PATIENCE = 3
# The heading curve in the fit report: every 10° of a turn.
REPORT_HEADINGS = 36
# The drift in the fit report: this many evenly spaced times over the log.
REPORT_TIMES = 64


class AdditiveGP(PlainInputs, BatchModelBase):
    """Additive sparse variational GP with declared components; a batch model (``"gam"``).

    Args:
        components: the additive terms (copied), each with its kernel and inducing inputs.
        noise_variance: initial σ².
        posterior: "coupled_precision", "full_coupled" or "mean_field".
        rank: R of the precision form; 0 = min(M_tot, 2 · max M_c) (the paper's R = M can
            leave the ELBO far from its optimum; see ``precision.default_rank``).
        iterations: L-BFGS iterations of a fit (B of the precision form, and θ, σ² if learnt).
        learn_hyperparameters: fit the kernels' parameters (else only q is fitted).
        learn_noise: fit σ² (with the hyperparameters).
        seed: seed of B's initial value and of inducing inputs drawn from the data.
        device, dtype: where the model lives (float64 by default).
        jitter: first rung of the Cholesky of each K_c (the whitened forms only).
        map_layer: the components published as the map (``posterior``, ``predict``); None:
            all of them, the whole predictor.
        map_input_dim: the width of the map inputs (the first columns of the model's); None:
            the model's full width.
        auxiliary_inputs: names of the model's columns after the map inputs ("yaw", "run",
            "time"), for whoever builds the inputs (``gp-mapper fit``).
    """

    name: ClassVar[str] = "gam"
    kind: ClassVar[ModelKind] = "batch"
    # 2: the map layer, its input width and the auxiliary inputs; format 1 states still load.
    STATE_VERSION = 2
    READABLE_VERSIONS = (1,)
    STATE_SETTINGS = (
        StateSetting("posterior", str, attr="posterior_form"),
        StateSetting("rank", int),
        StateSetting("iterations", int),
        StateSetting("learn_hyperparameters", bool),
        StateSetting("learn_noise", bool),
        StateSetting("seed", int),
    )

    def __init__(
        self,
        components: Sequence[Component],
        noise_variance: float = 0.1,
        *,
        posterior: PosteriorForm = "coupled_precision",
        rank: int = 0,
        iterations: int = DEFAULT_ITERATIONS,
        learn_hyperparameters: bool = True,
        learn_noise: bool = True,
        seed: int = 0,
        device: str | torch.device = "auto",
        dtype: torch.dtype = torch.float64,
        jitter: Jitter | None = None,
        map_layer: Sequence[str] | None = None,
        map_input_dim: int | None = None,
        auxiliary_inputs: Sequence[str] = (),
    ) -> None:
        check_components(components)
        names = [c.name for c in components]
        if map_layer is not None and (not map_layer or any(n not in names for n in map_layer)):
            raise ValueError(f"map_layer {list(map_layer)} must name components of {names}")
        if map_input_dim is not None and map_input_dim < 1:
            raise ValueError(f"map_input_dim must be positive, got {map_input_dim}")
        if posterior not in POSTERIOR_FORMS:
            raise ValueError(f"posterior must be one of {POSTERIOR_FORMS}, got {posterior!r}")
        if rank < 0 or iterations < 0:
            raise ValueError(f"rank and iterations must be non-negative, got {rank}, {iterations}")
        self.device = resolve_device(device)
        self.dtype = dtype
        self.posterior_form: str = posterior
        self.rank = rank
        self.iterations = iterations
        self.learn_hyperparameters = learn_hyperparameters
        self.learn_noise = learn_noise
        self.seed = seed
        self.jitter = jitter if jitter is not None else Jitter()
        self.map_layer = None if map_layer is None else tuple(map_layer)
        self.map_input_dim = map_input_dim
        self.auxiliary_inputs = tuple(auxiliary_inputs)
        self.components = nn.ModuleList(copy.deepcopy(list(components))).to(
            dtype=dtype, device=self.device
        )
        self.noise = GaussianNoise(noise_variance).to(dtype=dtype, device=self.device)
        freeze_parameters(self.components, self.noise)
        self._variational: dict[str, Tensor] = {}
        self._posterior: AdditivePosterior | None = None
        self._report: FitReport | None = None
        self._fitted = 0

    # ------------------------------------------------------------------ the model interface
    @property
    def posterior(self) -> AdditivePosterior | MapLayerPosterior | None:
        """The map's posterior: the map layer where one is declared, else the whole predictor."""
        if self._posterior is None or self.map_layer is None:
            return self._posterior
        width = self.map_input_dim or int(self.components[0].inducing.shape[1])
        return MapLayerPosterior(self._posterior, self.map_layer, width)

    @property
    def full_posterior(self) -> AdditivePosterior | None:
        """The posterior over every component (None before a fit)."""
        return self._posterior

    @property
    def num_updates(self) -> int:
        return self._fitted

    @property
    def noise_variance(self) -> float:
        return float(self.noise.variance.detach())

    @property
    def component_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.components)

    def effective_rank(self, components: Sequence[Component] | None = None) -> int:
        """R of the precision form (the default resolved) for ``components`` (default: the
        model's); count inducing inputs after they are drawn, not the number asked for (a run
        component asks for up to thousands of labels and gets one per run)."""
        sizes = [c.num_inducing for c in (self.components if components is None else components)]
        return self.rank or default_rank(sizes)

    def kernel(self) -> Kernel:
        """The sum of the component kernels (shares their parameters)."""
        total: Kernel = self.components[0].kernel
        for c in self.components[1:]:
            total = Sum(total, c.kernel)
        return total

    def hyperparameters(self) -> Hyperparameters:
        """θ in the node's names where the sum has that form (offset + map), else per component.

        With a map layer, the layer's θ in the node's names and each other component's under
        its own name (``heading_compass_deviation_variance``, ``drift_..._lengthscale``).
        """
        if self.map_layer is not None:
            layer = self._layer_hyperparameters()
            if layer is not None:
                return layer
        try:
            return dict(node_hyperparameters(self.kernel(), self.noise_variance))
        except ValueError:
            out: Hyperparameters = {}
            for c in self.components:
                out.update({f"{c.name}_{k}": v for k, v in c.kernel.describe().items()})
            out["noise_variance"] = self.noise_variance
            return out

    def _layer_hyperparameters(self) -> Hyperparameters | None:
        """The map layer as the node's Constant + stationary θ, plus the nuisance θ; None if the
        layer has another form."""
        layer = {c.name: c.kernel for c in self.components if c.name in self.map_layer}
        stationary = [k for k in layer.values() if isinstance(k, Stationary)]
        constant = [k for k in layer.values() if isinstance(k, Constant)]
        if len(stationary) != 1 or len(constant) + 1 != len(layer):
            return None
        kernel = stationary[0]
        lengthscale = kernel.lengthscale.detach().cpu().tolist()
        out: Hyperparameters = {
            "kernel": kernel.kind,
            "kernel_variance": float(kernel.variance.detach()),
            "lengthscale": lengthscale if kernel.ard else lengthscale[0],
            "ard": kernel.ard,
            "constant_variance": sum(float(k.variance.detach()) for k in constant),
            "noise_variance": self.noise_variance,
        }
        for c in self.components:
            if c.name not in self.map_layer:
                out.update({f"{c.name}_{k}": v for k, v in c.kernel.describe().items()})
        return out

    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] of the map: the map layer at map inputs Xs [S, d] where
        one is declared, else the whole predictor at Xs [S, D]."""
        self._fitted_posterior()
        return self.posterior.predict(self._as(Xs))

    def predict_subset(
        self, Xs: Tensor | np.ndarray, names: Sequence[str]
    ) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] of the sum of the named components (e.g. offset + map)."""
        return self._fitted_posterior().predict_subset(self._as(Xs), names)

    def predict_components(self, Xs: Tensor | np.ndarray) -> dict[str, tuple[Tensor, Tensor]]:
        """Each component's latent mean and variance [S] at Xs [S, D], by name."""
        return self._fitted_posterior().predict_components(self._as(Xs))

    # ------------------------------------------------------------------ fitting
    def elbo(self, X: Tensor | np.ndarray, y: Tensor | np.ndarray) -> float:
        """The ELBO [nats] of the committed q and θ on data X [N, D], y [N]."""
        X_t, y_t = validate_data(X, y, self.dtype, self.device)
        self._fitted_posterior()
        with torch.no_grad():
            return float(self._elbo(self.components, self.noise, X_t, y_t, self._variational))

    def fit(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        *,
        progress: ProgressCallback | None = None,
    ) -> FitReport:
        """Fit q, θ and σ² on X [N, D], y [N] by L-BFGS on the ELBO; atomic.

        Returns:
            The report; if not ``accepted`` the model is exactly as before.

        Raises:
            ValueError: wrong shapes or non-finite values.
        """
        start = time.perf_counter()
        X_t, y_t = validate_data(X, y, self.dtype, self.device)
        n = X_t.shape[0]
        m_before = 0 if self._posterior is None else sum(c.num_inducing for c in self.components)
        components = copy.deepcopy(self.components)
        noise = copy.deepcopy(self.noise)
        self._draw_inducing(components, X_t)
        try:
            iterations, reason, variational = self._optimise(components, noise, X_t, y_t, progress)
            with torch.no_grad():
                elbo = float(self._elbo(components, noise, X_t, y_t, variational))
                posterior = self._posterior_of(components, noise, variational)
        except NumericalError as err:
            return self._reject(f"fit failed: {err}", n, m_before, start)
        if not math.isfinite(elbo) or not all(
            bool(torch.isfinite(v).all()) for v in variational.values()
        ):
            return self._reject("fit gave non-finite values", n, m_before, start)
        freeze_parameters(components, noise)
        self.components, self.noise = components, noise
        self._variational, self._posterior = variational, posterior
        self._fitted += 1
        self._report = FitReport(
            True,
            reason,
            n,
            m_before,
            sum(c.num_inducing for c in components),
            self.hyperparameters(),
            time.perf_counter() - start,
            lower=elbo,
            details={
                "posterior": self.posterior_form,
                "rank": self.effective_rank() if self.posterior_form == "coupled_precision" else 0,
                "fit_iterations": iterations,
                "elbo": elbo,
                "components": ",".join(self.component_names),
                **self._nuisance_details(posterior),
            },
        )
        if progress is not None:
            progress(1.0, f"ELBO {elbo:.1f}")
        return self._report

    def _nuisance_details(self, posterior: AdditivePosterior) -> dict[str, Any]:
        """What the fit learnt of the nuisance, for the report (lists: JSON, not flat scalars).

        ``heading``: the curve every 10° with its sd and the compass-deviation coefficients
        (B, C, D, E of B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ) [µT]; ``drift``: the drift at
        evenly spaced times with its sd [µT]; ``run_offsets``: each run's offset and sd [µT].
        """

        out: dict[str, Any] = {}
        width = int(posterior.components[0].inducing.shape[1])
        for c in posterior.components:
            if self.map_layer is None or c.name in self.map_layer:
                continue
            column = c.kernel.active_dims[0]
            if isinstance(c.kernel, CompassDeviation):
                points = torch.linspace(0.0, 2.0 * math.pi, REPORT_HEADINGS + 1)[:-1]
            elif isinstance(c.kernel, ZeroMeanMatern32) and c.kernel.interval is not None:
                points = torch.linspace(*c.kernel.interval, REPORT_TIMES)
            elif isinstance(c.kernel, RunOffset):
                points = c.inducing[:, column].cpu()
            else:
                continue
            X = torch.zeros(points.shape[0], width, dtype=self.dtype, device=self.device)
            X[:, column] = points.to(X)
            mean, var = posterior.predict_subset(X, [c.name])
            entry = {
                "input": [float(v) for v in points],
                "mean": mean.cpu().tolist(),
                "sd": var.sqrt().cpu().tolist(),
            }
            if isinstance(c.kernel, CompassDeviation):
                # The curve lies in the span of the four harmonics: least squares is exact.
                features = deviation_features(X[:, column])
                coefficients = torch.linalg.lstsq(features, mean[:, None]).solution[:, 0]
                entry["coefficients_BCDE"] = coefficients.cpu().tolist()
            key = {"heading": "heading_curve", "run": "run_offsets", "drift": "drift"}
            out[key.get(c.name, f"{c.name}_curve")] = entry
        return out

    def _draw_inducing(self, components: nn.ModuleList, X: Tensor) -> None:
        generator = torch.Generator().manual_seed(self.seed)
        for c in components:
            if c.inducing is None:
                c.inducing = c.draw_inducing(X, generator)
            elif c.inducing.shape[1] != X.shape[1]:
                raise ValueError(
                    f"component {c.name}: inducing inputs have {c.inducing.shape[1]} columns, "
                    f"the data {X.shape[1]}"
                )

    def _initial_variational(self, components: nn.ModuleList) -> dict[str, Tensor]:
        if self.posterior_form != "coupled_precision":
            return {}
        R = self.effective_rank(components)
        generator = torch.Generator().manual_seed(self.seed)
        out = {}
        for c in components:
            B = B_INIT_SCALE * torch.randn(c.num_inducing, R, generator=generator, dtype=self.dtype)
            out[f"B.{c.name}"] = B.to(self.device)
        return out

    def _closed_form(
        self, components: nn.ModuleList, blocks: Blocks, W: Tensor | None, y: Tensor, noise: Tensor
    ) -> dict[str, Tensor]:
        """The optimal part of q at the current θ, as detached tensors."""
        with torch.no_grad():
            if self.posterior_form == "coupled_precision":
                detached = Blocks(*(tuple(t.detach() for t in part) for part in blocks))
                alpha = optimal_alpha(detached, y, noise.detach())
                return {f"alpha.{c.name}": a for c, a in zip(components, alpha, strict=True)}
            sizes = [c.num_inducing for c in components]
            mean, L_P = optimal_whitened_q(
                W.detach(), sizes, y, noise.detach(), self.posterior_form == "mean_field"
            )
            return {"mean": mean, "L_P": L_P}

    def _elbo(
        self,
        components: nn.ModuleList,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        variational: Mapping[str, Tensor],
    ) -> Tensor:
        blocks = kernel_blocks(components, X)
        if self.posterior_form == "coupled_precision":
            alpha = [variational[f"alpha.{c.name}"] for c in components]
            B = [variational[f"B.{c.name}"] for c in components]
            return precision_elbo(blocks, alpha, B, y, noise.variance)
        _, W = whitened_features(blocks, self.jitter)
        return whitened_elbo(
            W, blocks.kdiag, variational["mean"], variational["L_P"], y, noise.variance
        )

    def _optimise(
        self,
        components: nn.ModuleList,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        progress: ProgressCallback | None,
    ) -> tuple[int, str, dict[str, Tensor]]:
        """L-BFGS on −ELBO/N; returns (iterations, how it ended, the fitted q)."""
        n = X.shape[0]
        free = {k: v.clone().requires_grad_(True) for k, v in self._initial_variational(
            components).items()}  # fmt: skip
        params: list[Tensor] = list(free.values())
        if self.learn_hyperparameters:
            params += list(components.parameters())
            if self.learn_noise:
                params += list(noise.parameters())
        for p in params:
            p.requires_grad_(True)
        closed: dict[str, Tensor] = {}

        def loss() -> Tensor:
            blocks = kernel_blocks(components, X)
            W = None
            if self.posterior_form != "coupled_precision":
                _, W = whitened_features(blocks, self.jitter)
            closed.update(self._closed_form(components, blocks, W, y, noise.variance))
            if self.posterior_form == "coupled_precision":
                alpha = [closed[f"alpha.{c.name}"] for c in components]
                B = [free[f"B.{c.name}"] for c in components]
                value = precision_elbo(blocks, alpha, B, y, noise.variance)
            else:
                value = whitened_elbo(
                    W, blocks.kdiag, closed["mean"], closed["L_P"], y, noise.variance
                )
            return -value / n

        iterations, reason = 0, "no free parameters"
        if params and self.iterations > 0:
            iterations, reason = self._lbfgs(loss, params, progress, n)
        for p in params:
            p.requires_grad_(False)
        with torch.no_grad():
            loss()  # the closed-form part at the final θ
        variational = {k: v.detach().clone() for k, v in {**free, **closed}.items()}
        return iterations, reason, variational

    def _lbfgs(
        self, loss_fn: Any, params: list[Tensor], progress: ProgressCallback | None, n: int
    ) -> tuple[int, str]:
        """One L-BFGS iteration at a time with our own stop (``loss_fn`` is −ELBO/N over ``n``
        data); a failed step keeps the last good parameters (the line search can probe a θ
        where a factorisation fails)."""
        optimiser = single_step_lbfgs(params)
        # Near convergence one iteration's line search can take many evaluations (tens of
        # seconds on a large log): each evaluation reports, so a log shows the fit working.
        at = {"iteration": 1, "evaluations": 0}

        def closure() -> Tensor:
            optimiser.zero_grad()
            value = loss_fn()
            if not torch.isfinite(value):
                raise NumericalError("the ELBO became non-finite")
            value.backward()
            at["evaluations"] += 1
            if progress is not None:
                progress(
                    (at["iteration"] - 1) / self.iterations,
                    f"iteration {at['iteration']}: evaluation {at['evaluations']}",
                )
            return value

        good = [p.detach().clone() for p in params]
        previous, small, stalls = math.inf, 0, 0
        for it in range(1, self.iterations + 1):
            at["iteration"] = it
            evaluations_before = at["evaluations"]
            try:
                value = float(optimiser.step(closure).detach())
            except NumericalError as err:
                with torch.no_grad():
                    for p, g in zip(params, good, strict=True):
                        p.copy_(g)
                if it == 1:
                    raise
                return it - 1, f"stopped at a failed step: {err}"
            good = [p.detach().clone() for p in params]
            if progress is not None:
                progress(it / self.iterations, f"iteration {it}: −ELBO/N {value:.6f}")
            grad = max(float(p.grad.abs().max()) for p in params if p.grad is not None)
            if grad < GRADIENT_TOLERANCE:
                return it, "converged (gradient)"
            small = small + 1 if abs(previous - value) < CHANGE_TOLERANCE else 0
            if small >= CHANGE_PATIENCE:
                return it, "converged (change)"
            stalled = (at["evaluations"] - evaluations_before > STALLED_EVALUATIONS
                       and abs(previous - value) * n < STALL_NATS)  # fmt: skip
            stalls = stalls + 1 if stalled else 0
            if stalls >= STALL_PATIENCE:
                return it, "converged (the line search stalled)"
            previous = value
        return self.iterations, "iteration budget"

    def _posterior_of(
        self, components: nn.ModuleList, noise: GaussianNoise, variational: Mapping[str, Tensor]
    ) -> AdditivePosterior:
        comps = tuple(components)
        if self.posterior_form == "coupled_precision":
            B = tuple(variational[f"B.{c.name}"] for c in comps)
            L_A = precision_core([c.kernel.K(c.inducing) for c in comps], B)
            alpha = tuple(variational[f"alpha.{c.name}"] for c in comps)
            return PrecisionPosterior(comps, float(noise.variance), alpha, B, L_A)
        L = tuple(cholesky_with_jitter(c.kernel.K(c.inducing), self.jitter)[0] for c in comps)
        return WhitenedPosterior(
            comps, float(noise.variance), L, variational["mean"], variational["L_P"]
        )

    def _reject(self, reason: str, n: int, m_before: int, start: float) -> FitReport:
        self._report = FitReport(
            False, reason, n, m_before, m_before, self.hyperparameters(),
            time.perf_counter() - start,
        )  # fmt: skip
        return self._report

    def _fitted_posterior(self) -> AdditivePosterior:
        if self._posterior is None:
            raise RuntimeError("the additive model is not fitted: call fit(X, y) first")
        return self._posterior

    def _as(self, a: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    # ------------------------------------------------------------------ persistence
    def _parameter_modules(self) -> dict[str, nn.Module]:
        modules: dict[str, nn.Module] = {f"component.{c.name}.": c.kernel for c in self.components}
        return {**modules, "noise.": self.noise}

    def _state_model_args(self) -> dict[str, np.ndarray]:
        """The components (names, kernels, inducing inputs) the constructor takes, and the
        map layer's declaration."""
        out = {
            "components": np.array(json.dumps([c.to_spec() for c in self.components])),
            "map_layer": np.array(json.dumps(self.map_layer)),
            "map_input_dim": np.array(self.map_input_dim or 0),
            "auxiliary_inputs": np.array(json.dumps(list(self.auxiliary_inputs))),
        }
        for c in self.components:
            if c.inducing is not None:
                out[f"component.{c.name}.inducing"] = c.inducing.detach().cpu().numpy()
        return out

    @classmethod
    def _constructor_args(cls, state: Mapping[str, Any], dtype: torch.dtype) -> tuple[Any, ...]:
        components = []
        for spec in json.loads(str(np.asarray(state["components"]))):
            key = f"component.{spec['name']}.inducing"
            inducing = None
            if key in state:
                inducing = torch.as_tensor(np.asarray(state[key]), dtype=dtype)
            kernel = component_kernel_from_spec(spec["kernel"])
            draw = spec.get("draw", "random")
            components.append(Component(spec["name"], kernel, inducing, spec["from_data"], draw))
        return (components,)

    @classmethod
    def _versioned_settings(cls, state: Mapping[str, Any], version: int) -> dict[str, Any]:
        if version < 2:  # format 1: no map layer, all inputs are map inputs
            return {}
        return {
            "map_layer": json.loads(str(np.asarray(state["map_layer"]))),
            "map_input_dim": int(np.asarray(state["map_input_dim"])) or None,
            "auxiliary_inputs": json.loads(str(np.asarray(state["auxiliary_inputs"]))),
        }

    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        """q (α and B, or the whitened mean and precision factor); the posterior's factors
        are recomputed from it."""
        return {f"q.{k}": v.detach().cpu().numpy() for k, v in self._variational.items()}

    def _load_fitted(self, state: Mapping[str, Any], num_updates: int) -> None:
        self._fitted = num_updates
        variational = {
            k.removeprefix("q."): torch.as_tensor(np.asarray(v), dtype=self.dtype).to(self.device)
            for k, v in state.items()
            if k.startswith("q.")
        }
        if variational:
            if not all(bool(torch.isfinite(v).all()) for v in variational.values()):
                raise StateError("the state's posterior has non-finite values")
            self._variational = variational
            with torch.no_grad():
                self._posterior = self._posterior_of(self.components, self.noise, variational)
