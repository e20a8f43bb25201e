"""SOLVE-GP as a batch model: minibatch SVI of SVGP / SOLVE / ODVGP with Adam.

The method of Shi, Titsias & Mnih 2020; sections below are that paper's.

``fit`` splits off a validation set (early stopping, never the test data), scales the targets,
places Z and O (k-means or greedy), starts q at the prior and runs Adam on q, Z, O and θ over
epochs of shuffled minibatches (the paper's recipe, Sec. 6.3 and App. G.3: minibatch 1024, Adam
0.01, 100 epochs). It optionally replaces q by its closed-form optimum at the final θ, Z, O
(Gaussian likelihood, Sec. 3.3 eq. 9 and App. C), then freezes a :class:`~.predict.SolvePosterior`.

Target scaling: the targets are divided by their standard deviation s (``standardise="scale"``)
and the kernel and noise variances by s². That is the same model in other units, so the
posterior is exactly the GP's on the raw data, and a fitted map continues with the zero-mean
stream (``continuation.py``). ``"centre"`` also subtracts the mean (the UCI protocol; the prior mean
is then the data mean, which the stream cannot continue). ``"none"`` fits in the data's units.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from ..batch import CommittedFit, StateSetting
from ..core.kernels import Kernel, kernel_from_spec
from ..core.linalg import JITTER_LADDER, LOG_2PI, Jitter
from ..core.noise import GaussianNoise
from ..errors import NumericalError, StateError
from ..exact.prefit import prefit_theta
from ..model import ModelKind, PlainInputs, ProgressCallback
from ..report import FitReport
from ..state import (
    describe_hyperparameters,
)
from .adam import Adam
from .init import INIT_METHODS, InitMethod, initial_inducing
from .predict import PREDICT_CHUNK, SolvePosterior
from .settings import default as setting_default
from .svgp import (
    FAMILIES,
    PRIOR_DTYPE,
    Family,
    Variational,
    VariationalParameters,
    elbo,
    evaluate,
    full_elbo,
    marginals,
    optimal_q,
    prior_factors,
)

# 2: unwhitened odvgp stores its mean as the dual weights a (svgp.VariationalParameters); the
# other families read format 1 unchanged.
Standardise = Literal["none", "scale", "centre"]
STANDARDISE: tuple[str, ...] = ("none", "scale", "centre")
# Defaults: the paper's UCI recipe (App. G.3) at half its M, which a CPU affords on a map of
# 10⁵ samples: the settings table's (solvegp/settings.py), one default for API and node.
DEFAULT_INDUCING = setting_default("solvegp.inducing")
DEFAULT_ORTHOGONAL = setting_default("solvegp.orthogonal")
DEFAULT_BATCH_SIZE = setting_default("solvegp.batch_size")
DEFAULT_EPOCHS = setting_default("solvegp.epochs")
DEFAULT_LEARNING_RATE = setting_default("solvegp.learning_rate")
# The paper holds out 20 % of train as validation (App. G.3); a map needs its data more, 10 %.
DEFAULT_VALIDATION = setting_default("solvegp.validation")
# Epochs without a better validation log-likelihood before the fit stops.
DEFAULT_PATIENCE = setting_default("solvegp.patience")
# A standard deviation below this (a constant log) is not divided by.
MIN_SCALE = 1e-12
# The θ pre-fit on an exact GP over a random subset (the table's reason); the paper trains θ
# with q from the start (App. G): prefit_points=0.
DEFAULT_PREFIT_POINTS = setting_default("solvegp.prefit_points")
# Seconds between two progress reports within an epoch (an epoch of 20 000 readings takes
# ~7 s here; the CLI prints at most every 5 s).
STEP_REPORT_S = 2.0


@dataclass(frozen=True)
class _State:
    """Everything a fit leaves behind; replaced whole on each commit.

    ``kernel`` and ``noise`` are in the fitted units (the data's divided by ``scale``).
    """

    kernel: Kernel
    noise: GaussianNoise
    scale: float
    shift: float
    params: VariationalParameters | None
    posterior: SolvePosterior | None
    elbo_history: tuple[float, ...]
    validation_history: tuple[float, ...]
    num_updates: int
    # Count, mean [µT] and sum of squared deviations [µT²] of the training targets: what the
    # stream's running statistics start from when it continues this fit (continuation.py).
    target_stats: tuple[int, float, float] = (0, 0.0, 0.0)


class _Candidate:
    """A finished fit, not yet committed."""

    def __init__(self, state: _State, report: FitReport) -> None:
        self.state = state
        self.report = report


def rescaled_kernel(kernel: Kernel, factor: float) -> Kernel:
    """A copy of ``kernel`` with its covariance times ``factor`` (its variances, and limits).

    A sum scales both parts, a product its first factor only. ``factor == 1`` is a plain copy
    (bit for bit).
    """
    if factor == 1.0:
        return copy.deepcopy(kernel)

    def scaled(spec: dict[str, Any], k: float) -> dict[str, Any]:
        spec = dict(spec)
        if spec["type"] == "sum":
            spec["parts"] = [scaled(p, k) for p in spec["parts"]]
        elif spec["type"] == "product":
            spec["parts"] = [scaled(spec["parts"][0], k), spec["parts"][1]]
        else:
            spec["variance"] = spec["variance"] * k
            if spec.get("variance_max") is not None:
                spec["variance_max"] = spec["variance_max"] * k
        return spec

    ref = next(iter(kernel.parameters()), None)
    out = kernel_from_spec(scaled(kernel.to_spec(), factor))
    return out if ref is None else out.to(dtype=ref.dtype, device=ref.device)


class SolveGP(PlainInputs, CommittedFit):
    """Sparse variational GP with orthogonal inducing points (SOLVE-GP), fitted by SVI.

    Args:
        kernel: prior covariance in the data's units (copied; its values are the initial θ).
        noise_variance: initial σ² [µT²].
        num_inducing: M, the inducing inputs Z.
        num_orthogonal: M2, the orthogonal inducing inputs O (``full``: SVGP on M + M2 points).
        family: "solve" (q block-diagonal in (u, v⊥)), "full" (SVGP on Z ∪ O) or "odvgp"
            (S_v = C_vv).
        whiten: parameterise q in the whitened coordinates (the paper's App. F).
        batch_size: minibatch size.
        epochs: passes over the training split (0: q from ``optimal_q`` or the prior).
        learning_rate: Adam's step size.
        init: "kmeans" or "greedy" placement of Z and O.
        validation: fraction of the data held out for early stopping (0: none).
        patience: epochs without a better validation log-likelihood before stopping.
        optimal_q: after the epochs, set q to its closed-form optimum at the final θ, Z, O.
        warm_start: start q at its closed-form optimum at the initial θ, Z, O instead of the
            prior (the paper's start, App. G). Without it and without centring, Adam's
            bounded steps take many epochs to carry m from 0 to the field's offset.
        standardise: "scale", "centre" or "none" (module docstring).
        train_inducing: Adam moves Z and O.
        train_hyperparameters: Adam moves θ (kernel and noise).
        prefit_points: before SVI, fit θ by L-BFGS on an exact GP over this many random
            training points (0: start SVI from the given θ, the paper's start). Adam's small,
            few steps (~N / batch_size per epoch) move θ slowly: from the node's initial
            kernel variance of 1 µT² a magnetometer fit ended two orders of magnitude short.
        seed: seed of the split, the initialisation and the minibatch order.
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: type of the inputs and θ; the prior side runs in float64 (``svgp.PRIOR_DTYPE``).
        jitter: first jitter of the prior factorisations (a float is relative).
    """

    name: ClassVar[str] = "solvegp"
    kind: ClassVar[ModelKind] = "batch"
    STATE_VERSION = 2
    READABLE_VERSIONS = (1,)
    STATE_SETTINGS = (
        StateSetting("num_inducing", int),
        StateSetting("num_orthogonal", int),
        StateSetting("family", str, attr="variational.family"),
        StateSetting("whiten", bool, attr="variational.whiten"),
        StateSetting("batch_size", int),
        StateSetting("epochs", int),
        StateSetting("learning_rate", float),
        StateSetting("init", str),
        StateSetting("validation", float),
        StateSetting("patience", int),
        StateSetting("optimal_q", bool),
        StateSetting("warm_start", bool),
        StateSetting("standardise", str),
        StateSetting("train_inducing", bool),
        StateSetting("train_hyperparameters", bool),
        # States from before the pre-fit had none.
        StateSetting("prefit_points", int, missing=0),
        StateSetting("seed", int),
    )

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        *,
        num_inducing: int = DEFAULT_INDUCING,
        num_orthogonal: int = DEFAULT_ORTHOGONAL,
        family: Family = "solve",
        whiten: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        epochs: int = DEFAULT_EPOCHS,
        learning_rate: float = DEFAULT_LEARNING_RATE,
        init: InitMethod = "kmeans",
        validation: float = DEFAULT_VALIDATION,
        patience: int = DEFAULT_PATIENCE,
        optimal_q: bool = False,
        warm_start: bool = True,
        standardise: Standardise = "scale",
        train_inducing: bool = True,
        train_hyperparameters: bool = True,
        prefit_points: int = DEFAULT_PREFIT_POINTS,
        seed: int = 0,
        device: str | torch.device = "auto",
        dtype: torch.dtype = torch.float64,
        jitter: float | Jitter = JITTER_LADDER[0],
    ) -> None:
        if num_inducing < 1:
            raise ValueError(f"num_inducing must be at least 1, got {num_inducing}")
        if num_orthogonal < 0:
            raise ValueError(f"num_orthogonal must be non-negative, got {num_orthogonal}")
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if epochs < 0:
            raise ValueError(f"epochs must be non-negative, got {epochs}")
        if not (math.isfinite(learning_rate) and learning_rate > 0.0):
            raise ValueError(f"learning_rate must be positive and finite, got {learning_rate}")
        if init not in INIT_METHODS:
            raise ValueError(f"init must be one of {', '.join(INIT_METHODS)}; got {init!r}")
        if not 0.0 <= validation < 1.0:
            raise ValueError(f"validation must be in [0, 1), got {validation}")
        if patience < 1:
            raise ValueError(f"patience must be at least 1, got {patience}")
        if standardise not in STANDARDISE:
            raise ValueError(f"standardise must be one of {', '.join(STANDARDISE)}")
        if not (math.isfinite(noise_variance) and noise_variance > 0.0):
            raise ValueError(f"noise_variance must be positive and finite, got {noise_variance}")
        if prefit_points < 0:
            raise ValueError(f"prefit_points must be non-negative, got {prefit_points}")
        kernel, noise = self._init_parameters(kernel, noise_variance, device, dtype, jitter)
        self.num_inducing = int(num_inducing)
        self.num_orthogonal = int(num_orthogonal)
        self.variational = Variational(family, bool(whiten))
        self.batch_size = int(batch_size)
        self.epochs = int(epochs)
        self.learning_rate = float(learning_rate)
        self.init: InitMethod = init
        self.validation = float(validation)
        self.patience = int(patience)
        self.optimal_q = bool(optimal_q)
        self.warm_start = bool(warm_start)
        self.standardise: Standardise = standardise
        self.train_inducing = bool(train_inducing)
        self.train_hyperparameters = bool(train_hyperparameters)
        self.prefit_points = int(prefit_points)
        self.seed = int(seed)
        self._state = _State(kernel, noise, 1.0, 0.0, None, None, (), (), 0)

    # ------------------------------------------------------------------ read-only views
    @property
    def kernel(self) -> Kernel:
        """The kernel in the data's units (a copy)."""
        s = self._state
        return rescaled_kernel(s.kernel, s.scale * s.scale)

    @property
    def noise_variance(self) -> float:
        """σ² [µT²]."""
        s = self._state
        return float(s.noise.variance.detach()) * s.scale * s.scale

    @property
    def parameters(self) -> VariationalParameters | None:
        """Z, O and q of the last fit, in the fitted units (do not modify)."""
        return self._state.params

    @property
    def scale(self) -> float:
        """The targets were divided by it [µT]."""
        return self._state.scale

    @property
    def shift(self) -> float:
        """And had it subtracted first [µT] (0 unless ``standardise="centre"``)."""
        return self._state.shift

    @property
    def target_stats(self) -> tuple[int, float, float]:
        """Count, mean [µT] and sum of squared deviations [µT²] of the last fit's targets."""
        return self._state.target_stats

    @property
    def elbo_history(self) -> tuple[float, ...]:
        """The mean minibatch ELBO of each epoch of the last fit [nats, data units]."""
        return self._state.elbo_history

    @property
    def validation_history(self) -> tuple[float, ...]:
        """The validation log-likelihood per point after each epoch [nats] (empty: none)."""
        return self._state.validation_history

    # ------------------------------------------------------------------ public operations
    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent mean [µT] and variance [µT²], each [S], at Xs [S, D]."""
        posterior = self._state.posterior
        if posterior is None:
            raise RuntimeError("the model has no data yet: call fit() first")
        return posterior.predict(self._as_inputs(Xs, posterior.Z.shape[1]))

    def layers(self, Xs: Tensor | np.ndarray) -> dict[str, Tensor]:
        """The coarse (Z) and detail (O) layers at Xs [S, D] (``SolvePosterior.layers``)."""
        posterior = self._state.posterior
        if posterior is None:
            raise RuntimeError("the model has no data yet: call fit() first")
        return posterior.layers(self._as_inputs(Xs, posterior.Z.shape[1]))

    def fit(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        *,
        progress: ProgressCallback | None = None,
    ) -> FitReport:
        """Fit Z, O, q and θ on X [N, D], y [N] by minibatch SVI; keep the posterior.

        Atomic: if a factorisation fails or a value is not finite, the previous fit stays and
        the report has ``accepted=False`` and the reason.

        Args:
            X: inputs [N, D].
            y: targets [N] [µT].
            progress: called after each epoch with (fraction done, "epoch k/E ELBO ...").

        Raises:
            ValueError: wrong shapes, no data, NaN or inf values.
        """
        X_t, y_t = self._validate(X, y)
        start = time.perf_counter()
        m_before = 0 if self._state.posterior is None else self._state.posterior.support.shape[0]
        try:
            candidate = self._propose(X_t, y_t, progress, start, m_before)
        except NumericalError as err:
            self._report = FitReport(
                False,
                f"fit failed: {err}",
                X_t.shape[0],
                m_before,
                m_before,
                self.hyperparameters(),
                time.perf_counter() - start,
            )
            return self._report
        self._state = candidate.state
        self._report = candidate.report
        if progress is not None:
            progress(1.0, candidate.report.reason)
        return self._report

    # ------------------------------------------------------------------ fitting internals
    def _split(self, N: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        permutation = torch.randperm(N, generator=generator).to(self.device)
        n_val = int(self.validation * N)
        if N - n_val < 1:
            n_val = 0
        return permutation[n_val:], permutation[:n_val]

    def _scaling(self, y: Tensor) -> tuple[float, float]:
        if self.standardise == "none" or y.shape[0] < 2:
            return 1.0, 0.0
        shift = float(y.mean()) if self.standardise == "centre" else 0.0
        std = float(y.std(unbiased=False))
        return (std if std > MIN_SCALE else 1.0), shift

    def _propose(
        self,
        X: Tensor,
        y: Tensor,
        progress: ProgressCallback | None,
        start: float,
        m_before: int,
    ) -> _Candidate:
        state = self._state
        generator = torch.Generator().manual_seed(self.seed)
        train, val = self._split(X.shape[0], generator)
        X_tr, y_raw = X[train], y[train]
        scale, shift = self._scaling(y_raw)
        y_tr = (y_raw - shift) / scale
        X_val, y_val = X[val], (y[val] - shift) / scale
        # θ back in the data's units, then into this fit's.
        factor = (state.scale / scale) ** 2
        kernel = rescaled_kernel(state.kernel, factor)
        if factor == 1.0:
            noise = copy.deepcopy(state.noise)
        else:
            noise = GaussianNoise(float(state.noise.variance.detach()) * factor).to(
                device=self.device, dtype=self.dtype
            )
        prefit: dict[str, Any] | None = None
        if self.prefit_points > 0 and self.train_hyperparameters:
            kernel, noise, prefit = prefit_theta(
                kernel, noise, X_tr, y_tr, self.prefit_points, self.seed, progress
            )
        # Before the first epoch: the placement of Z and O and the warm start, seconds each on
        # a large log, say what they do (the epochs' progress comes after).
        tick = None if progress is None else (lambda status: progress(0.0, status))
        if tick is not None:
            points = f"{self.num_inducing} + {self.num_orthogonal}"
            tick(f"placing {points} inducing points ({self.init})")
        Z, Zo = initial_inducing(
            X_tr,
            self.num_inducing,
            self.num_orthogonal,
            self.init,
            kernel,
            self.jitter,
            self.seed,
            tick,
        )
        params = VariationalParameters.at_prior(kernel, Z, Zo, self.variational, self.jitter)
        if self.warm_start:
            if tick is not None:
                tick("warm start: the optimal q(u) at the initial θ")
            self._set_optimal_q(kernel, noise, params, X_tr, y_tr)
        n_train = X_tr.shape[0]
        log_scale_total = n_train * math.log(scale)

        trainable = [params.m_u, params.L_u, params.m_v, params.L_v]
        for p in params.parameters():
            p.requires_grad_(False)
        if self.train_inducing:
            trainable += [params.Z, params.Zo]
        if self.train_hyperparameters:
            trainable += [*kernel.parameters(), *noise.parameters()]
        for p in trainable:
            p.requires_grad_(True)
        modules = {"params": params, "kernel": kernel, "noise": noise}
        best: dict[str, dict[str, Tensor]] | None = None
        best_val, best_epoch = -math.inf, 0
        elbo_history: list[float] = []
        val_history: list[float] = []
        epochs_run, early = 0, False
        fit_start = reported = time.perf_counter()
        if self.epochs > 0:
            optimiser = Adam(trainable, self.learning_rate)
            for epoch in range(1, self.epochs + 1):
                order = torch.randperm(n_train, generator=generator).to(self.device)
                # Summed on the device: one host sync per epoch, not per step.
                total, steps = torch.zeros((), dtype=PRIOR_DTYPE, device=self.device), 0
                for s in range(0, n_train, self.batch_size):
                    if progress is not None and time.perf_counter() - reported > STEP_REPORT_S:
                        # Within an epoch too: an epoch of a large log takes seconds.
                        reported = time.perf_counter()
                        done = (epoch - 1 + s / n_train) / (self.epochs + 1)
                        progress(done, f"epoch {epoch}/{self.epochs}: {s}/{n_train} readings")
                    idx = order[s : s + self.batch_size]
                    optimiser.zero_grad()
                    terms = elbo(
                        kernel,
                        noise.variance,
                        params,
                        self.variational,
                        X_tr[idx],
                        y_tr[idx],
                        n_train,
                        self.jitter,
                    )
                    (-terms.value / n_train).backward()
                    optimiser.step()
                    total += terms.value.detach()
                    steps += 1
                epochs_run = epoch
                if not bool(torch.isfinite(total)):
                    raise NumericalError(f"the ELBO is not finite in epoch {epoch}")
                elbo_history.append(float(total) / steps - log_scale_total)
                message = f"epoch {epoch}/{self.epochs} ELBO {elbo_history[-1]:.6g}"
                if X_val.shape[0]:
                    val_ll = self._validation_log_lik(kernel, noise, params, X_val, y_val, scale)
                    val_history.append(val_ll)
                    message += f" validation LL {val_ll:.4f}"
                    if val_ll > best_val:
                        best_val, best_epoch = val_ll, epoch
                        best = _snapshot(modules)
                    elif epoch - best_epoch >= self.patience:
                        early = True
                if progress is not None:
                    progress(epoch / (self.epochs + 1), message)
                if early:
                    break
        if best is not None:
            _restore(modules, best)
        for p in (*params.parameters(), *kernel.parameters(), *noise.parameters()):
            p.requires_grad_(False)
        if self.optimal_q:
            self._set_optimal_q(kernel, noise, params, X_tr, y_tr)
        fitted = time.perf_counter()
        final = full_elbo(kernel, noise.variance, params, self.variational, X_tr, y_tr, self.jitter)
        posterior = build_posterior(
            kernel, noise, params, self.variational, self.jitter, scale, shift
        )
        if not (bool(torch.isfinite(final.value)) and _finite_posterior(posterior)):
            raise NumericalError("the fitted posterior has non-finite values")
        new_state = _State(
            kernel,
            noise,
            scale,
            shift,
            params,
            posterior,
            tuple(elbo_history),
            tuple(val_history),
            state.num_updates + 1,
            (n_train, float(y_raw.mean()), float(((y_raw - y_raw.mean()) ** 2).sum())),
        )
        if early:
            reason = f"early stop at epoch {epochs_run}: best validation at epoch {best_epoch}"
        elif self.epochs == 0:
            at_optimum = self.optimal_q or self.warm_start
            reason = "no epochs: q " + ("at its optimum" if at_optimum else "at the prior")
        else:
            reason = f"{epochs_run} epochs done"
        if best is not None and not early and best_epoch < epochs_run:
            reason += f" (kept epoch {best_epoch}, the best on validation)"
        lower = float(final.value) - log_scale_total
        M_total = params.num_inducing + params.num_orthogonal
        details: dict[str, Any] = {
            "family": self.variational.family,
            "whiten": self.variational.whiten,
            "num_inducing": params.num_inducing,
            "num_orthogonal": params.num_orthogonal,
            "epochs_run": epochs_run,
            "best_epoch": best_epoch if best is not None else epochs_run,
            "early_stopped": early,
            "training_points": n_train,
            "validation_points": int(X_val.shape[0]),
            "validation_log_lik": best_val if best is not None else None,
            "elbo": lower,
            "elbo_per_point": lower / n_train,
            "kl_u": float(final.kl_u),
            "kl_v": float(final.kl_v),
            "optimal_q": self.optimal_q,
            "warm_start": self.warm_start,
            "scale": scale,
            "shift": shift,
            "jitter_u": posterior.factors.jitter_u.value,
            "jitter_v": posterior.factors.jitter_v.value,
            "seconds_fit": fitted - fit_start,
            "prefit": prefit,
        }
        report = FitReport(
            True,
            reason,
            X.shape[0],
            m_before,
            M_total,
            describe_hyperparameters(
                rescaled_kernel(kernel, scale * scale),
                float(noise.variance) * scale * scale,
            ),
            time.perf_counter() - start,
            lower=lower,
            details=details,
        )
        return _Candidate(new_state, report)

    @torch.no_grad()
    def _set_optimal_q(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        params: VariationalParameters,
        X: Tensor,
        y: Tensor,
    ) -> None:
        """q ← its Gaussian-likelihood optimum at the current θ, Z, O (``svgp.optimal_q``)."""
        factors = prior_factors(kernel, params.Z, params.Zo, self.jitter)
        q = optimal_q(kernel, noise.variance, params.Z, params.Zo, factors, self.variational, X, y)
        params.set_whitened(q, factors, self.variational)

    @torch.no_grad()
    def _validation_log_lik(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        params: VariationalParameters,
        X: Tensor,
        y: Tensor,
        scale: float,
    ) -> float:
        """Mean log N(y | μ, σ_f² + σ²) over the validation points, in the data's units."""
        ev = evaluate(kernel, params, self.variational, self.jitter)
        total = 0.0
        noise_var = noise.variance
        for s in range(0, X.shape[0], PREDICT_CHUNK):
            q = marginals(kernel, params, ev, X[s : s + PREDICT_CHUNK])
            var = q.var + noise_var
            r = y[s : s + PREDICT_CHUNK] - q.mean
            total += float((-0.5 * (LOG_2PI + torch.log(var) + r * r / var)).sum())
        return total / X.shape[0] - math.log(scale)

    # ------------------------------------------------------------------ persistence
    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        """The scaling of the targets, Z, O and q, and the training summary (θ is raw, in the
        fitted units). The posterior is rebuilt from them by the same computation, bit for bit.
        """
        s = self._state
        out = {"scale": np.array(s.scale), "shift": np.array(s.shift)}
        if s.params is not None:
            for name, p in s.params.named_parameters():
                out[f"q.{name}"] = p.detach().cpu().numpy()
            out["summary.elbo_history"] = np.array(s.elbo_history, dtype=np.float64)
            out["summary.validation_history"] = np.array(s.validation_history, dtype=np.float64)
            out["summary.target_stats"] = np.array(s.target_stats, dtype=np.float64)
        return out

    @classmethod
    def _check_version(cls, state: Mapping[str, Any], version: int) -> None:
        # Format 1 stored an unwhitened ODVGP's q in the dual mean form, which this one
        # cannot read; every other format-1 state reads as format 2.
        dual_mean = str(np.asarray(state["family"])) == "odvgp" and not bool(
            np.asarray(state["whiten"])
        )
        if version == 1 and dual_mean:
            raise StateError(
                f"solvegp state format 1, expected {cls.STATE_VERSION} (an unwhitened odvgp "
                "fit: fit it again)"
            )

    def _load_fitted(self, state: Mapping[str, Any], num_updates: int) -> None:
        kernel, noise = self._state.kernel, self._state.noise
        scale, shift = float(np.asarray(state["scale"])), float(np.asarray(state["shift"]))
        if not (math.isfinite(scale) and scale > 0.0 and math.isfinite(shift)):
            raise StateError(f"solvegp state: scale {scale} and shift {shift} are not valid")
        if "q.Z" not in state:
            self._state = _State(kernel, noise, scale, shift, None, None, (), (), num_updates)
            return
        arrays = {}
        for name in ("Z", "Zo", "m_u", "L_u", "m_v", "L_v"):
            value = np.asarray(state[f"q.{name}"])
            if not np.isfinite(value).all():
                raise StateError(f"solvegp state field 'q.{name}' has non-finite values")
            dtype = self.dtype if name in ("Z", "Zo") else PRIOR_DTYPE
            arrays[name] = torch.as_tensor(value, dtype=dtype, device=self.device)
        Z, Zo = arrays["Z"], arrays["Zo"]
        M, M2 = Z.shape[0], Zo.shape[0]
        L_v_shape = (0, 0) if self.variational.frozen_v else (M2, M2)
        shapes_ok = (
            Z.ndim == 2
            and M >= 1
            and Zo.ndim == 2
            and Zo.shape[1] == Z.shape[1]
            and arrays["m_u"].shape == (M,)
            and arrays["L_u"].shape == (M, M)
            and arrays["m_v"].shape == (M2,)
            and tuple(arrays["L_v"].shape) == L_v_shape
        )
        if not shapes_ok:
            raise StateError(
                "solvegp state: the shapes of Z, O and q disagree: "
                + ", ".join(f"{k} {tuple(v.shape)}" for k, v in arrays.items())
            )
        count, mean, m2 = np.asarray(state["summary.target_stats"], dtype=np.float64).tolist()
        params = VariationalParameters(**arrays)
        for p in params.parameters():
            p.requires_grad_(False)
        posterior = build_posterior(
            kernel, noise, params, self.variational, self.jitter, scale, shift
        )
        self._state = _State(
            kernel,
            noise,
            scale,
            shift,
            params,
            posterior,
            tuple(float(v) for v in np.asarray(state["summary.elbo_history"]).reshape(-1)),
            tuple(float(v) for v in np.asarray(state["summary.validation_history"]).reshape(-1)),
            num_updates,
            (int(count), float(mean), float(m2)),
        )

    # ------------------------------------------------------------------ validation
    def _as_inputs(self, X: Tensor | np.ndarray, input_dim: int | None) -> Tensor:
        X_t = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        if X_t.ndim != 2 or (input_dim is not None and X_t.shape[1] != input_dim):
            expected = "D" if input_dim is None else str(input_dim)
            raise ValueError(f"inputs must be [S, {expected}], got shape {tuple(X_t.shape)}")
        return X_t


@torch.no_grad()
def build_posterior(
    kernel: Kernel,
    noise: GaussianNoise,
    params: VariationalParameters,
    variational: Variational,
    jitter: Jitter,
    scale: float,
    shift: float,
) -> SolvePosterior:
    """The frozen prediction cache at these parameters (the same computation on load).

    Raises:
        NumericalError: the prior does not factor.
    """
    ev = evaluate(kernel, params, variational, jitter)
    q = type(ev.q)(*(None if t is None else t.detach().clone() for t in ev.q))
    factors = type(ev.factors)(
        *(t.detach().clone() if isinstance(t, Tensor) else t for t in ev.factors)
    )
    return SolvePosterior(
        kernel,
        params.Z.detach().clone(),
        params.Zo.detach().clone(),
        factors,
        q,
        scale,
        shift,
        float(noise.variance.detach()) * scale * scale,
    )


def _finite_posterior(posterior: SolvePosterior) -> bool:
    tensors = [*posterior.factors[:3], *(t for t in posterior.q if t is not None)]
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def _snapshot(modules: Mapping[str, torch.nn.Module]) -> dict[str, dict[str, Tensor]]:
    return {
        key: {n: p.detach().clone() for n, p in m.named_parameters()} for key, m in modules.items()
    }


def _restore(modules: Mapping[str, torch.nn.Module], saved: dict[str, dict[str, Tensor]]) -> None:
    with torch.no_grad():
        for key, m in modules.items():
            for n, p in m.named_parameters():
                p.copy_(saved[key][n])
