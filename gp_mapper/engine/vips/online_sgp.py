"""The continual sparse GP: select inducing points, fit θ, commit, one batch at a time.

Bui et al. (2017) collapsed online bound with inducing points chosen by a :class:`Selector`
(VIPS by default). Old data are never stored: a batch leaves behind only the carried posterior,
θ and the running target statistics.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..core.cells import Cells, aggregate_cells, cell_size_m, scatter_log_likelihood
from ..core.device import resolve_device
from ..core.fit import FitResult, fit_hyperparameters
from ..core.hyperprior import LogNormalHyperprior
from ..core.kernels import Kernel, kernel_from_spec
from ..core.linalg import JITTER_LADDER, Jitter, cholesky_with_jitter
from ..core.noise import NOISE_FLOOR, GaussianNoise
from ..errors import NumericalError, StateError
from ..model import Hyperparameters, ModelKind, PlainInputs
from ..state import StateSetting, describe_hyperparameters, raw_parameters
from .bound import BoundTerms, carry, online_bound
from .health import fit_problem
from .local_fit import FitProblem, local_fit_problem
from .posterior import CarriedPosterior, Posterior
from .report import UpdateReport
from .robust import screen_outliers
from .selectors import Selection, SelectionProblem, Selector, Vips, selector_from_spec
from .settings import check as check_setting
from .settings import default as setting_default
from .stats import GroupedStats
from .theta_memory import ThetaMemory

STATE_FORMAT_VERSION = 1
DEFAULT_MAX_INDUCING = setting_default("vips.max_inducing")
DEFAULT_FIT_ITERATIONS = setting_default("fit_iterations")
# Robust z beyond which a reading is an outlier (robust.py): the settings table's default, so an
# engine built from the API is as protected as the node's.
DEFAULT_OUTLIER_Z = float(setting_default("vips.outlier_z"))
# The API's engine adds no pass noise (the paper's white noise); the node's default is in the
# settings table, in µT² for the magnetometer.
DEFAULT_PASS_NOISE_VARIANCE = setting_default("vips.pass_noise_variance")
# Kernels whose variance is the prior scale of a uniform offset (a constant, the potential
# model's uniform field): the targets' spread about their mean does not measure it, so the
# hyperprior keeps it at its initial value, as every hyperparameter but a field's variance.
_OFFSET_KINDS = ("constant", "earth")


def _posterior_at(
    kernel: Kernel,
    noise: GaussianNoise,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: CarriedPosterior | None,
    jitter: Jitter,
    same_prior: bool = False,
    cells: Cells | None = None,
) -> tuple[BoundTerms, CarriedPosterior, Posterior]:
    """The online posterior with inducing inputs Z at (kernel, noise): bound, carry, cache.

    Args:
        cells: the window's cells when the rows are theirs (``core.cells``).
        same_prior: ``kernel`` is the θ the carried factor ``old.L`` was made under; with Z
            beginning with ``old.Z`` (a window that keeps θ: its points are added after the
            old ones) the update then extends ``old.L`` instead of a new factor of K(Z, Z)
            (``bound.factors``).

    Raises:
        NumericalError: a factorisation failed or a carried quantity is not finite.
    """
    keeps_old = (
        same_prior
        and old is not None
        and Z.shape[0] >= old.num_inducing
        and torch.equal(Z[: old.num_inducing], old.Z)
    )
    with torch.no_grad():
        terms, factors = online_bound(
            kernel, _row_noise(noise, cells), Z, X, y, old, jitter, keeps_old=keeps_old
        )
        carried = carry(Z, factors, terms)
        posterior = Posterior.from_carried(kernel, carried, float(noise.variance))
    if not all(bool(torch.isfinite(t).all()) for t in (carried.P, carried.v, posterior.W)):
        raise NumericalError("posterior has non-finite values")
    return terms, carried, posterior


def _row_noise(noise: GaussianNoise, cells: Cells | None) -> Tensor:
    """σ² + σ²_pass for readings, σ²/n + σ²_pass for cells of n readings."""
    return noise.variance if cells is None else noise.cell_variance(cells.counts)


def _same_theta(kernel: Kernel, other: Kernel) -> bool:
    """Whether two kernels of one structure hold the same raw parameters, bit for bit."""
    return kernel is other or all(
        torch.equal(p.detach(), q.detach())
        for p, q in zip(kernel.parameters(), other.parameters(), strict=True)
    )


@dataclass(frozen=True)
class _State:
    """Everything the engine carries between batches; replaced whole on each commit."""

    kernel: Kernel
    noise: GaussianNoise
    carried: CarriedPosterior | None
    stats: GroupedStats
    num_updates: int
    posterior: Posterior | None
    theta_fitted: bool  # a fit has been accepted: θ is no longer the configured guess


class _Window(NamedTuple):
    """A window as the update uses it (``OnlineSparseGP._screen``)."""

    X: Tensor  # the screened readings' inputs, or their cells'
    y: Tensor
    group: Tensor | None  # each row's target group (a vector model's component)
    cells: Cells | None
    stats: GroupedStats  # the running target statistics with this window's
    l_noise: float  # the window's log likelihood under a noise-only model
    n_batch: int  # readings the window came with
    num_outliers: int


class _Fitted(NamedTuple):
    """θ after a window's fit (``OnlineSparseGP._fit_theta``)."""

    kernel: Kernel
    noise: GaussianNoise
    fit: FitResult
    region: FitProblem  # the points and carried posterior θ was fitted on
    fitting: bool  # a fit was asked for and had points to fit on
    refused: str  # why a fitted θ was refused (health.py), "" if it was not
    memory: ThetaMemory | None


class OnlineSparseGP(PlainInputs):
    """Streaming sparse GP regression with an adaptive inducing set.

    Args:
        kernel: the prior covariance (its current values are the initial θ).
        noise_variance: initial fitted Gaussian noise variance σ².
        selector: inducing-point strategy (VIPS with the paper's δ = 0.035 by default).
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: floating-point type of every tensor (float64 by default).
        max_inducing: hard cap on the number of inducing points.
        fit_iterations: L-BFGS iterations per batch (0 keeps θ fixed).
        jitter: the first jitter of every Cholesky of K(Z, Z): a :class:`~.linalg.Jitter`, or a
            float for a relative one (``value · mean(diag K)``, see ``linalg.JITTER_LADDER``).
        seed: seed of the selectors that draw random points (OIPS's first batch).
        hyperprior_scale: log-space standard deviation of a weak log-normal hyperprior
            (``hyperprior.py``); 0 fits by maximum likelihood alone, as the paper does.
        outlier_z: readings more than this many robust standard deviations outside the
            current predictive distribution are dropped before selection and fit, unless their
            neighbours agree (a real change of the field; ``robust.py``); 0 keeps every reading.
        pass_noise_variance: a fixed noise variance added to the fitted one (``noise.py``):
            the part of a reading's error that a window cannot tell from the field because it
            stays the same along a pass. ``noise_variance`` reports the sum.
        theta_memory: carry each fitted window's evidence about θ into the next fits (the
            Laplace curvature of its bound, ``theta_memory.py``); False fits each window's θ
            by that window's bound alone, as the paper does.
        local_fit_inducing: from this many inducing points on, θ is fitted on the bound of
            the window's neighbourhood (``local_fit.py``) instead of the whole map's, so a fit
            costs O(N S² + S³) for the S points near the window, not O(N M² + M³); 0 = always
            the whole map, as in the paper. Kernels without a finite range always use it all.
        fit_max_seconds: wall-time budget of one fit of θ (0: none, as in the paper); a fit
            that runs out keeps the best θ it evaluated (``fit.fit_hyperparameters``).
        cell_size: a window's readings within one cell of this many lengthscales (of the
            kernel's shortest) are one observation of their mean (``core.cells``); 0 keeps
            every reading, as the paper does.
        cell_columns: the leading input columns that are positions (the cells' cube); the
            others must be equal within a cell. 0: no cells.
        cell_direction_columns: the trailing input columns that are loadings on a linear
            term (``core.cells.aggregate_cells``: binned, not equal, within a cell).
    """

    name: ClassVar[str] = "vips"
    # The constructor settings a state keeps, read back as saved; an older state that lacks
    # one gets the value its version ran with (no outlier screen's default, no θ memory, no
    # local fit or budget, every reading as its own cell).
    STATE_SETTINGS: ClassVar[tuple[StateSetting, ...]] = (
        StateSetting("max_inducing", int),
        StateSetting("fit_iterations", int),
        StateSetting("seed", int),
        StateSetting("hyperprior_scale", float),
        StateSetting("outlier_z", float, missing=DEFAULT_OUTLIER_Z),
        StateSetting("theta_memory", bool, missing=False),
        StateSetting("local_fit_inducing", int, missing=0),
        StateSetting("fit_max_seconds", float, missing=0.0),
        StateSetting("cell_size", float, missing=0.0),
        StateSetting("cell_columns", int, missing=0),
        StateSetting("cell_direction_columns", int, missing=0),
    )
    kind: ClassVar[ModelKind] = "streaming"

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        selector: Selector | None = None,
        *,
        device: str | torch.device = "auto",
        dtype: torch.dtype = torch.float64,
        max_inducing: int = DEFAULT_MAX_INDUCING,
        fit_iterations: int = DEFAULT_FIT_ITERATIONS,
        jitter: float | Jitter = JITTER_LADDER[0],
        seed: int = 0,
        hyperprior_scale: float = 0.0,
        outlier_z: float = DEFAULT_OUTLIER_Z,
        pass_noise_variance: float = DEFAULT_PASS_NOISE_VARIANCE,
        theta_memory: bool = False,
        local_fit_inducing: int = 0,
        fit_max_seconds: float = 0.0,
        cell_size: float = 0.0,
        cell_columns: int = 0,
        cell_direction_columns: int = 0,
    ) -> None:
        if max_inducing < 1:
            raise ValueError(f"max_inducing must be at least 1, got {max_inducing}")
        if fit_iterations < 0:
            raise ValueError(f"fit_iterations must be non-negative, got {fit_iterations}")
        self.device = resolve_device(device)
        self.dtype = dtype
        self.selector: Selector = selector if selector is not None else Vips()
        self.max_inducing = max_inducing
        self.fit_iterations = fit_iterations
        self.jitter = Jitter.coerce(jitter)
        self.seed = seed
        if hyperprior_scale < 0.0:
            raise ValueError(f"hyperprior_scale must be >= 0, got {hyperprior_scale}")
        self.hyperprior_scale = hyperprior_scale
        self.outlier_z = float(check_setting("vips.outlier_z", outlier_z))
        self.pass_noise_variance = float(
            check_setting("vips.pass_noise_variance", pass_noise_variance)
        )
        self._initial = {
            k: float(v.detach().reshape(-1)[0]) for k, v in kernel.hyperparameters().items()
        }
        kernel = copy.deepcopy(kernel).to(device=self.device, dtype=dtype)
        noise = GaussianNoise(noise_variance, self.pass_noise_variance).to(
            device=self.device, dtype=dtype
        )
        self._state = _State(
            kernel, noise, None, GroupedStats.empty(kernel.num_target_groups), 0, None, False
        )
        self._input_dim: int | None = None
        self._report: UpdateReport | None = None
        self.theta_memory = bool(theta_memory)
        self._memory: ThetaMemory | None = None
        if local_fit_inducing < 0:
            raise ValueError(f"local_fit_inducing must be >= 0, got {local_fit_inducing}")
        self.local_fit_inducing = int(local_fit_inducing)
        if not fit_max_seconds >= 0.0:
            raise ValueError(f"fit_max_seconds must be >= 0, got {fit_max_seconds}")
        self.fit_max_seconds = float(fit_max_seconds)
        self.cell_size = float(check_setting("vips.cell_size", cell_size))
        if cell_columns < 0:
            raise ValueError(f"cell_columns must be >= 0, got {cell_columns}")
        self.cell_columns = int(cell_columns)
        if cell_direction_columns < 0:
            raise ValueError(f"cell_direction_columns must be >= 0, got {cell_direction_columns}")
        self.cell_direction_columns = int(cell_direction_columns)

    # ------------------------------------------------------------------ read-only views
    @property
    def posterior(self) -> Posterior | None:
        """The immutable prediction cache of the last committed batch (None before the first)."""
        return self._state.posterior

    @property
    def kernel(self) -> Kernel:
        """The kernel at the current θ (do not modify; the engine replaces it on commit)."""
        return self._state.kernel

    @property
    def noise_variance(self) -> float:
        """The noise variance a reading's predictive adds: fitted plus pass noise [µT²]."""
        return float(self._state.noise.variance.detach())

    @property
    def num_inducing(self) -> int:
        carried = self._state.carried
        return 0 if carried is None else carried.num_inducing

    @property
    def num_updates(self) -> int:
        return self._state.num_updates

    @property
    def theta_fitted(self) -> bool:
        """Whether a fit of θ has been accepted (False: θ is still the configured guess)."""
        return self._state.theta_fitted

    @property
    def awaits_first_fit(self) -> bool:
        """True while θ is fitted (``fit_iterations`` > 0) but no fit has been accepted."""
        return self.fit_iterations > 0 and not self._state.theta_fitted

    @property
    def input_dim(self) -> int | None:
        return self._input_dim

    @property
    def carried(self) -> CarriedPosterior | None:
        return self._state.carried

    @property
    def stats(self) -> GroupedStats:
        return self._state.stats

    @property
    def report(self) -> UpdateReport | None:
        """The report of the last update (None before the first)."""
        return self._report

    def hyperparameters(self) -> Hyperparameters:
        """θ in the node's parameter names (``kernel_variance``, ``lengthscale``, ...);
        ``noise_variance`` is the whole (fitted plus ``pass_noise_variance``, also given)."""
        theta = describe_hyperparameters(self._state.kernel, self.noise_variance)
        return {**theta, "pass_noise_variance": self.pass_noise_variance}

    # ------------------------------------------------------------------ public operations
    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at inputs Xs [S, D] (add ``noise_variance`` for y)."""
        post = self._state.posterior
        if post is None:
            raise RuntimeError("the engine has no data yet: call update() first")
        return post.predict(self._as_inputs(Xs, "Xs"))

    def release_caches(self) -> None:
        """Drop the prediction cache's M × M matrix; the next prediction computes it again,
        the same numbers (a tiled map's tile long idle keeps only its state)."""
        if self._state.posterior is not None:
            self._state.posterior.release()

    def set_pass_noise_variance(self, variance: float) -> None:
        """Set σ²_pass for the windows to come (a map measuring it: ``pass_noise_variance:
        auto``). The committed map is unchanged: each window was absorbed under its own."""
        variance = float(check_setting("vips.pass_noise_variance", variance))
        if variance == self.pass_noise_variance:
            return
        noise = copy.deepcopy(self._state.noise)
        noise.pass_variance = variance
        self.pass_noise_variance = variance
        self._state = dataclasses.replace(self._state, noise=noise)

    def empty_copy(self) -> OnlineSparseGP:
        """A stream of the same settings at this θ (fitted or not, with its θ memory and the
        readings' running statistics) holding no inducing points: a new tile of a map."""
        new = copy.copy(self)
        s = self._state
        new.selector = copy.deepcopy(self.selector)
        new._state = _State(
            copy.deepcopy(s.kernel), copy.deepcopy(s.noise), None, s.stats, 0, None,
            s.theta_fitted,
        )  # fmt: skip
        new._report = None
        return new

    def update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[Posterior], None] | None = None,
        *,
        fit: bool = True,
        theta_of: OnlineSparseGP | None = None,
    ) -> UpdateReport:
        """Absorb one batch: screen outliers, select inducing points (θ_o), fit θ, commit.

        Readings far outside the current predictive distribution are dropped first
        (``outlier_z``, ``robust.py``). A fitted θ that fails the health check (``health.py``:
        a noise variance risen by orders of magnitude, a hyperparameter collapsed onto its
        floor) is refused: the batch is committed under the previous θ and
        ``report.fit_refused`` says why.

        Args:
            X: inputs [N, D].
            y: targets [N].
            on_selected: called with the provisional posterior, the batch and the new inducing
                points under the previous θ, before θ is re-fitted: a caller can show the batch
                at once instead of after the fit. Skipped if that posterior cannot be formed.
                The committed state does not depend on it.
            fit: re-fit θ by L-BFGS (False: commit under θ_o; the selection and the posterior
                update alone cost a fraction of the fit, so a caller may fit on a schedule).
            theta_of: a model of the same settings whose θ this batch starts from instead of
                this model's own (a tiled map's shared θ): the fit starts there, and without a
                fit the batch is committed under it. The carried posterior moves to it as it
                moves to a fitted θ (Bui et al. 2017: the old approximate likelihood is kept
                with K'_aa at the θ it was made under; the prior is the new θ's).

        Returns:
            The report (also kept as ``report``); if ``accepted`` is False the state is
            unchanged and ``reason`` says why.

        Raises:
            ValueError: empty batch, wrong shapes, NaN or inf values.
        """
        start = None if theta_of is None else theta_of._state
        self._report = self._update(X, y, on_selected, fit, start)
        return self._report

    def _update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[Posterior], None] | None = None,
        fit_theta: bool = True,
        theta_start: _State | None = None,
    ) -> UpdateReport:
        """The update itself, in its steps (screen, select, fit θ, commit); ``update`` keeps
        its report."""
        X_t, y_t = self._validate(X, y)
        start = time.perf_counter()
        state = self._state
        # The θ the fit starts from and, unfitted, the batch is committed under.
        origin = state if theta_start is None else theta_start
        m_before = self.num_inducing
        window = self._screen(X_t, y_t, state)
        if isinstance(window, str):  # every reading an outlier
            return UpdateReport(
                False, window, X_t.shape[0], m_before, m_before, num_outliers=X_t.shape[0],
                hyperparameters=self.hyperparameters(),
                seconds_total=time.perf_counter() - start,
            )  # fmt: skip

        def rejected(reason: str, **extra: Any) -> UpdateReport:
            return UpdateReport(
                False,
                reason,
                window.n_batch,
                m_before,
                m_before,
                num_outliers=window.num_outliers,
                noise_model=window.l_noise,
                hyperparameters=self.hyperparameters(),
                seconds_total=time.perf_counter() - start,
                **extra,
            )

        try:
            selection = self._select(window, state)
        except NumericalError as err:
            return rejected(f"selection failed: {err}")
        selected = time.perf_counter()
        if on_selected is not None:
            self._show_provisional(window, state, selection.Z, on_selected)
        fit_start = time.perf_counter()
        fitted = self._fit_theta(window, state, origin, selection.Z, fit_theta)
        try:
            terms, carried = self._commit(window, state, origin, selection.Z, fitted)
        except NumericalError as err:
            return rejected(f"posterior failed: {err}", seconds_select=selected - start)
        # The readings' bound: the cells' plus what their means leave out (core.cells).
        scatter = 0.0
        if window.cells is not None:
            with torch.no_grad():
                scatter = float(scatter_log_likelihood(window.cells, fitted.noise.fitted_variance))
        end = time.perf_counter()
        return UpdateReport(
            True,
            selection.stop_reason,
            window.n_batch,
            m_before,
            carried.num_inducing,
            num_added=selection.num_added,
            num_outliers=window.num_outliers,
            reference=selection.reference,
            noise_model=window.l_noise,
            bound_at_selection=selection.bound,
            threshold=selection.threshold,
            bound_after_fit=float(terms.value) + scatter,
            num_cells=0 if window.cells is None else int(window.cells.counts.shape[0]),
            fit_ok=fitted.fit.ok,
            fit_iterations=fitted.fit.iterations,
            fit_message=fitted.fit.reason,
            fit_inducing=int(fitted.region.Z.shape[0]) if fitted.fitting else 0,
            fit_refused=fitted.refused,
            hyperparameters=self.hyperparameters(),
            seconds_select=selected - start,
            seconds_provisional=fit_start - selected,
            seconds_fit=end - fit_start,
            seconds_total=end - start,
        )

    def _screen(self, X: Tensor, y: Tensor, state: _State) -> _Window | str:
        """The window as the update uses it: outliers out (they reach neither the running
        statistics, nor the selection, nor the fit), readings in cells where they share one;
        the reason instead when every reading is an outlier."""
        n_batch = X.shape[0]
        group = state.kernel.target_groups(X)
        screen = screen_outliers(
            X, y, state.kernel, state.noise.variance, state.posterior, self.outlier_z, group
        )
        num_outliers = screen.num_outliers
        if num_outliers == n_batch:
            return (
                f"all {n_batch} readings are outliers (robust z from {float(screen.z.min()):.3g})"
            )
        if num_outliers:
            X, y = X[screen.keep], y[screen.keep]
            group = None if group is None else group[screen.keep]
        stats = state.stats.updated(y, group)
        # One observation per cell of the window (core.cells), from the screened readings.
        cells = self._cells(X, y, state.kernel)
        if cells is not None:
            X, y = cells.X, cells.y
            group = state.kernel.target_groups(X)
        l_noise = stats.log_likelihood(y, group)
        return _Window(X, y, group, cells, stats, l_noise, n_batch, num_outliers)

    def _select(self, window: _Window, state: _State) -> Selection:
        """The window's inducing points (the selector's rule under the current θ).

        Raises:
            NumericalError: the selection failed (the window is rejected).
        """
        problem = SelectionProblem(
            window.X,
            window.y,
            state.kernel,
            _row_noise(state.noise, window.cells).detach(),
            state.carried,
            window.l_noise,
            self.max_inducing,
            self.jitter,
            self.seed + state.num_updates,
        )
        with torch.no_grad():
            return self.selector.select(problem)

    def _show_provisional(
        self, window: _Window, state: _State, Z: Tensor, on_selected: Callable[[Posterior], None]
    ) -> None:
        """The window under the current θ at the selected points, shown before the fit."""
        try:
            _, _, provisional = _posterior_at(
                state.kernel, state.noise, Z, window.X, window.y, state.carried, self.jitter,
                same_prior=True, cells=window.cells,
            )  # fmt: skip
        except NumericalError:
            return  # the fit may still succeed; the caller sees no early map
        on_selected(provisional)

    def _fit_theta(
        self, window: _Window, state: _State, origin: _State, Z: Tensor, fit_theta: bool
    ) -> _Fitted:
        """θ fitted on the window's bound from ``origin``'s (or kept), checked for collapse,
        and the window's evidence about it absorbed into the θ memory."""
        X_t, y_t, cells = window.X, window.y, window.cells
        kernel = copy.deepcopy(origin.kernel)
        noise = copy.deepcopy(origin.noise)
        for p in (*kernel.parameters(), *noise.parameters()):
            p.requires_grad_(True)
        old, n = state.carried, X_t.shape[0]

        prior = self._hyperprior(window.stats)
        params = [*kernel.parameters(), *noise.parameters()]
        memory = self._memory if self.theta_memory else None

        # On a large map θ is fitted on the window's neighbourhood (local_fit.py).
        fitting = fit_theta and self.fit_iterations > 0
        try:
            region = (
                local_fit_problem(state.kernel, Z, X_t, old, self.local_fit_inducing)
                if fitting
                else FitProblem(Z, old, False)
            )
        except NumericalError:
            region = FitProblem(Z, old, False)
        if fitting and region.empty:  # θ stays: no inducing point near the window to fit on
            fitting, fit_theta = False, False

        def window_bound() -> Tensor:
            value = online_bound(
                kernel, _row_noise(noise, cells), region.Z, X_t, y_t, region.old, self.jitter
            )[0].value
            if cells is not None:
                value = value + scatter_log_likelihood(cells, noise.fitted_variance)
            return value

        def loss() -> Tensor:
            objective = window_bound()
            if prior is not None:
                objective = objective + prior.log_density(kernel)
            if memory is not None:
                objective = objective + memory.log_density(params)
            return -objective / n

        fit = (
            fit_hyperparameters(loss, params, self.fit_iterations, self.fit_max_seconds)
            if fit_theta
            else FitResult(
                True,
                math.nan,
                math.nan,
                0,
                "not fitted: no inducing point near the window"
                if region.empty
                else "not fitted: θ kept",
            )
        )
        # A collapsed θ would be the starting point of every later fit: refuse it and commit
        # the batch under θ_o, the posterior the provisional map showed (health.py). An
        # unfitted θ is θ_o, which the check never refuses.
        fit_refused = (
            fit_problem(
                origin.kernel,
                float(origin.noise.variance.detach()),
                kernel,
                float(noise.variance.detach()),
                y_t,
                X_t,
                guess=not origin.theta_fitted,
                group=window.group,
            )
            if fitting
            else ""
        )
        if fit_refused:
            kernel, noise = origin.kernel, origin.noise  # never modified in place: shared
        elif self.theta_memory and fit_theta and fit.ok and fit.iterations > 0:
            # If the curvature fails, this window's evidence is lost; the others' stays.
            with contextlib.suppress(NumericalError, RuntimeError):
                memory = (
                    ThetaMemory.first(window_bound, params)
                    if memory is None
                    else memory.absorbed(window_bound, params)
                )
        return _Fitted(kernel, noise, fit, region, fitting, fit_refused, memory)

    def _commit(
        self, window: _Window, state: _State, origin: _State, Z: Tensor, fitted: _Fitted
    ) -> tuple[BoundTerms, CarriedPosterior]:
        """The window's posterior at the selected points under the fitted θ, made the
        engine's state (atomically: nothing changes if it fails).

        Raises:
            NumericalError: the posterior failed (the window is rejected).
        """
        kernel, noise = fitted.kernel, fitted.noise
        same_prior = _same_theta(kernel, state.kernel)
        terms, carried, posterior = _posterior_at(
            kernel, noise, Z, window.X, window.y, state.carried, self.jitter,
            same_prior=same_prior, cells=window.cells,
        )  # fmt: skip
        for p in (*kernel.parameters(), *noise.parameters()):
            p.requires_grad_(False)
        # A fit that failed or ran out before its first step left θ at its start.
        fit = fitted.fit
        moved = fitted.fitting and fit.ok and fit.iterations > 0 and not fitted.refused
        theta_fitted = origin.theta_fitted or moved
        self._state = _State(
            kernel, noise, carried, window.stats, state.num_updates + 1, posterior, theta_fitted
        )
        self._memory = fitted.memory
        self._input_dim = window.X.shape[1]
        return terms, carried

    def _cells(self, X: Tensor, y: Tensor, kernel: Kernel) -> Cells | None:
        """The window's cells at the current lengthscale; None where no cell holds two
        readings (the update then runs on the readings, bit for bit as without cells)."""
        size = cell_size_m(kernel, self.cell_size) if self.cell_columns else 0.0
        if size <= 0.0:
            return None
        with torch.no_grad():
            cells = aggregate_cells(X, y, size, self.cell_columns, self.cell_direction_columns)
        return cells if cells.aggregated else None

    def _hyperprior(self, stats: GroupedStats) -> LogNormalHyperprior | None:
        if self.hyperprior_scale == 0.0:
            return None
        centres = {
            name: (
                stats.variance
                if name.endswith("_variance") and not name.startswith(_OFFSET_KINDS)
                else value
            )
            for name, value in self._initial.items()
        }
        return LogNormalHyperprior(self.hyperprior_scale, centres)

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume without old data, as numpy arrays (no pickle needed)."""
        s = self._state
        out: dict[str, np.ndarray] = {
            "model": np.array(self.name),
            "format_version": np.array(STATE_FORMAT_VERSION),
            "kernel_spec": np.array(json.dumps(s.kernel.to_spec())),
            "selector_spec": np.array(json.dumps(self.selector.to_spec())),
            "dtype": np.array(str(self.dtype).removeprefix("torch.")),
            "noise_variance": np.array(float(s.noise.variance.detach())),
            "jitter": np.array(self.jitter.value),
            "jitter_relative": np.array(self.jitter.relative),
            "pass_noise_variance": np.array(self.pass_noise_variance),
            **{f.field: np.array(f.read_from(self)) for f in self.STATE_SETTINGS},
            "initial_hyperparameters": np.array(json.dumps(self._initial)),
            "num_updates": np.array(s.num_updates),
            "theta_fitted": np.array(s.theta_fitted),
            "stats": s.stats.to_array(),
            "input_dim": np.array(-1 if self._input_dim is None else self._input_dim),
        }
        for name, raw in raw_parameters(s.kernel).items():
            out[f"kernel.{name}"] = raw
        out["noise.raw_variance"] = s.noise.raw_variance.detach().cpu().numpy()
        if self._memory is not None:
            out["theta_memory.centre"] = self._memory.centre.cpu().numpy()
            out["theta_memory.precision"] = self._memory.precision.cpu().numpy()
        if s.carried is not None:
            for name in ("Z", "L", "P", "v", "L_D"):
                out[f"carried.{name}"] = getattr(s.carried, name).detach().cpu().numpy()
            out["carried.jitter"] = np.array(s.carried.jitter.value)
            out["carried.jitter_relative"] = np.array(s.carried.jitter.relative)
        return out

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], device: str | torch.device = "auto"
    ) -> OnlineSparseGP:
        """Rebuild an engine from :meth:`state_dict` output (or ``np.load`` of it).

        Raises:
            StateError: a field is missing, malformed, of the wrong shape or not finite.
        """
        try:
            saved = str(np.asarray(state.get("model", cls.name)))  # older states: this model
            if saved != cls.name:
                raise StateError(f"the state holds a {saved!r} model, not a {cls.name!r} one")
            version = int(np.asarray(state["format_version"]))
            if version != STATE_FORMAT_VERSION:
                raise StateError(
                    f"engine state format {version}, this version reads {STATE_FORMAT_VERSION}"
                )
            dtype = getattr(torch, str(np.asarray(state["dtype"])))
            kernel = kernel_from_spec(json.loads(str(np.asarray(state["kernel_spec"]))))
            selector = selector_from_spec(json.loads(str(np.asarray(state["selector_spec"]))))
            # States from before the pass noise: none.
            pass_noise = float(
                np.asarray(state.get("pass_noise_variance", DEFAULT_PASS_NOISE_VARIANCE))
            )
            # The fitted part's initial value only; its raw value is loaded below.
            fitted_noise = max(float(np.asarray(state["noise_variance"])) - pass_noise, NOISE_FLOOR)
            engine = cls(
                kernel,
                fitted_noise,
                selector,
                device=device,
                dtype=dtype,
                jitter=_jitter_field(state, "jitter"),
                pass_noise_variance=pass_noise,
                **{f.name: f.parse(state) for f in cls.STATE_SETTINGS},
            )
            engine._initial = {
                k: float(v)
                for k, v in json.loads(str(np.asarray(state["initial_hyperparameters"]))).items()
            }
            engine._load_arrays(state)
        except StateError:
            raise
        except (KeyError, ValueError, TypeError, AttributeError, RuntimeError) as err:
            raise StateError(f"engine state is malformed: {err}") from err
        return engine

    def _load_arrays(self, state: Mapping[str, Any]) -> None:
        def tensor(name: str) -> Tensor:
            value = torch.as_tensor(np.asarray(state[name]), dtype=self.dtype, device=self.device)
            if not torch.isfinite(value).all():
                raise StateError(f"engine state field {name!r} has non-finite values")
            return value

        kernel, noise = self._state.kernel, self._state.noise
        with torch.no_grad():
            for name, param in kernel.named_parameters():
                value = tensor(f"kernel.{name}")
                if value.shape != param.shape:
                    raise StateError(
                        f"kernel.{name}: shape {tuple(value.shape)}, expected {tuple(param.shape)}"
                    )
                param.copy_(value)
            noise.raw_variance.copy_(tensor("noise.raw_variance"))
        for p in (*kernel.parameters(), *noise.parameters()):
            p.requires_grad_(False)
        if "theta_memory.centre" in state:
            size = sum(p.numel() for p in (*kernel.parameters(), *noise.parameters()))
            centre, precision = tensor("theta_memory.centre"), tensor("theta_memory.precision")
            if centre.shape != (size,) or precision.shape != (size, size):
                raise StateError(
                    f"theta_memory: shapes {tuple(centre.shape)} and {tuple(precision.shape)}, "
                    f"expected ({size},) and ({size}, {size})"
                )
            self._memory = ThetaMemory(centre, precision)
        stats = GroupedStats.from_array(state["stats"])
        if len(stats.groups) != kernel.num_target_groups:
            raise StateError(
                f"engine state has statistics of {len(stats.groups)} target groups; its kernel "
                f"has {kernel.num_target_groups}"
            )
        input_dim = int(np.asarray(state["input_dim"]))
        carried = None
        posterior = None
        if "carried.Z" in state:
            Z, L, P, v, L_D = (tensor(f"carried.{n}") for n in ("Z", "L", "P", "v", "L_D"))
            M = Z.shape[0]
            shapes_ok = (
                Z.ndim == 2
                and Z.shape[1] == input_dim
                and L.shape == (M, M)
                and P.shape == (M, M)
                and v.shape == (M,)
                and L_D.shape == (M, M)
            )
            if not shapes_ok:
                raise StateError(
                    f"carried posterior shapes disagree: Z {tuple(Z.shape)}, L {tuple(L.shape)}, "
                    f"P {tuple(P.shape)}, v {tuple(v.shape)}, L_D {tuple(L_D.shape)}"
                )
            _check_cholesky_factor("carried.L", L)
            _check_cholesky_factor("carried.L_D", L_D)
            carried = CarriedPosterior(Z, L, P, v, L_D, _jitter_field(state, "carried.jitter"))
            try:
                cholesky_with_jitter(L @ L.mT, jitter=0.0)
            except NumericalError as err:
                raise StateError(f"carried prior factor is not a valid Cholesky: {err}") from err
            posterior = Posterior.from_carried(kernel, carried, float(noise.variance))
        elif any(str(key).startswith("carried.") for key in state):
            raise StateError("engine state has carried fields but no carried.Z")
        num_updates = int(np.asarray(state["num_updates"]))
        # States from before the flag: a map with updates is taken as fitted (the strict check).
        fitted = bool(np.asarray(state.get("theta_fitted", num_updates > 0)))
        self._state = _State(kernel, noise, carried, stats, num_updates, posterior, fitted)
        self._input_dim = None if input_dim < 0 else input_dim

    # ------------------------------------------------------------------ validation
    def _as_inputs(self, X: Tensor | np.ndarray, name: str) -> Tensor:
        X_t = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        if X_t.ndim != 2:
            raise ValueError(f"{name} must be [N, D], got shape {tuple(X_t.shape)}")
        if self._input_dim is not None and X_t.shape[1] != self._input_dim:
            raise ValueError(
                f"{name} has {X_t.shape[1]} input dimensions, the map has {self._input_dim}"
            )
        return X_t

    def _validate(self, X: Tensor | np.ndarray, y: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        X_t = self._as_inputs(X, "X")
        y_t = torch.as_tensor(y, dtype=self.dtype, device=self.device)
        if y_t.ndim != 1 or y_t.shape[0] != X_t.shape[0]:
            raise ValueError(
                f"expected X [N, D] and y [N]; got {tuple(X_t.shape)} and {tuple(y_t.shape)}"
            )
        if X_t.shape[0] == 0:
            raise ValueError("empty batch: X and y have no rows")
        if not torch.isfinite(X_t).all():
            raise ValueError(f"X has {int((~torch.isfinite(X_t)).any(1).sum())} rows with NaN/inf")
        if not torch.isfinite(y_t).all():
            raise ValueError(f"y has {int((~torch.isfinite(y_t)).sum())} NaN/inf values")
        return X_t, y_t


def _check_cholesky_factor(name: str, factor: Tensor) -> None:
    """Refuse a saved factor that no Cholesky decomposition produces.

    A zero or singular factor passes the jitter ladder on ``L Lᵀ`` (the jitter makes that
    positive definite) and then turns every prediction into NaN. Finiteness is checked on load.

    Raises:
        StateError: ``factor`` [M, M] is not lower triangular with a positive diagonal.
    """
    if bool(torch.triu(factor, diagonal=1).ne(0).any()):
        raise StateError(f"engine state field {name!r} is not lower triangular")
    if not bool((torch.diagonal(factor) > 0).all()):
        raise StateError(f"engine state field {name!r} has a diagonal entry that is not positive")


def _jitter_field(state: Mapping[str, Any], name: str) -> Jitter:
    """A saved jitter; files from before the absolute convention existed hold a relative one."""
    relative = bool(np.asarray(state.get(f"{name}_relative", True)))
    return Jitter(float(np.asarray(state[name])), relative)
