"""Exact GP regression: the full-batch reference every approximation is measured against."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from ..batch import BatchModelBase, StateSetting
from ..common_settings import COMMON
from ..core.device import resolve_device
from ..core.fit import FitResult, fit_hyperparameters
from ..core.kernels import Kernel
from ..core.linalg import gaussian_log_density
from ..core.noise import GaussianNoise
from ..errors import NumericalError
from ..model import Hyperparameters, ModelKind, PlainInputs, ProgressCallback
from ..report import FitReport
from ..state import describe_hyperparameters
from .posterior import ExactPosterior

DEFAULT_FIT_ITERATIONS = COMMON.default("fit_iterations")
# O(N²) memory and O(N³) time: 20 000 points is a 3.2 GB float64 matrix and minutes per
# L-BFGS step on a CPU. Past it, subsample (gp-mapper fit --max-samples) or use acgp.
MAX_EXACT_POINTS = 20000


class ExactGP(PlainInputs, BatchModelBase):
    """``y ~ N(0, K + σ²I)`` on all data at once; O(N³). A batch model (``name = "exact"``).

    Two ways to use it: as the batch model of ``gp-mapper fit`` (``ExactGP(kernel, σ²)`` then
    ``fit(X, y)``), or as a reference on fixed data (``ExactGP(kernel, σ², X, y)``, then
    ``log_marginal_likelihood()``, ``fit()`` and ``predict()`` on those data).

    Args:
        kernel: prior covariance (copied; its values are the initial θ).
        noise_variance: initial σ².
        X: inputs [N, D] and y: targets [N] of the reference use; None for the batch use.
        device: "auto", "cpu", "cuda" or "cuda:N" (default: X's device, else "auto").
        dtype: floating-point type (default: X's, else float64).
        fit_iterations: L-BFGS iterations of ``fit`` (0 keeps θ).
        max_points: refuse a fit on more points than this (O(N³)).
    """

    name: ClassVar[str] = "exact"
    kind: ClassVar[ModelKind] = "batch"
    STATE_SETTINGS = (StateSetting("fit_iterations", int), StateSetting("max_points", int))
    TAKES_JITTER = False

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        X: Tensor | None = None,
        y: Tensor | None = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        fit_iterations: int = DEFAULT_FIT_ITERATIONS,
        max_points: int = MAX_EXACT_POINTS,
        **_: Any,
    ) -> None:
        if fit_iterations < 0:
            raise ValueError(f"fit_iterations must be non-negative, got {fit_iterations}")
        self.device = resolve_device(device if device is not None else _device_of(X))
        self.dtype = dtype if dtype is not None else (X.dtype if X is not None else torch.float64)
        self.fit_iterations = fit_iterations
        self.max_points = max_points
        self.kernel = copy.deepcopy(kernel).to(dtype=self.dtype, device=self.device)
        self.noise = GaussianNoise(noise_variance).to(dtype=self.dtype, device=self.device)
        self.X: Tensor | None = None if X is None else self._as(X)
        self.y: Tensor | None = None if y is None else self._as(y)
        self._posterior: ExactPosterior | None = None
        self._report: FitReport | None = None
        self._fitted = 0

    # ------------------------------------------------------------------ the model interface
    @property
    def posterior(self) -> ExactPosterior | None:
        return self._posterior

    @property
    def num_updates(self) -> int:
        return self._fitted

    @property
    def noise_variance(self) -> float:
        return float(self.noise.variance.detach())

    def hyperparameters(self) -> Hyperparameters:
        return describe_hyperparameters(self.kernel, self.noise_variance)

    def log_marginal_likelihood(self) -> Tensor:
        """log p(y) of the model's data under the current θ (differentiable)."""
        X, y = self._data()
        K = self.kernel.K(X)
        eye = torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
        return gaussian_log_density(y, torch.zeros_like(y), K + self.noise.variance * eye)

    def fit(
        self,
        X: Tensor | np.ndarray | None = None,
        y: Tensor | np.ndarray | None = None,
        *,
        max_iterations: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> FitReport:
        """Fit θ by L-BFGS on log p(y) / N, then form the posterior; atomic.

        Args:
            X, y: the data [N, D], [N]; None fits the data given at construction.
            max_iterations: L-BFGS iterations (default ``fit_iterations``).
            progress: called with (fraction, status) at the start, after each evaluation of
                log p(y) (one Cholesky of the N × N matrix) and at the end.

        Returns:
            The report; if not ``accepted`` the model is exactly as before.

        Raises:
            ValueError: wrong shapes, non-finite values, or more than ``max_points`` points.
        """
        start = time.perf_counter()
        X_t, y_t = self._data() if X is None else self._validate(X, y)
        n = X_t.shape[0]
        if n > self.max_points:
            raise ValueError(
                f"the exact GP is O(N³): {n} points exceed its limit of {self.max_points}; "
                "subsample (gp-mapper fit --max-samples N) or use the acgp model"
            )
        iterations = self.fit_iterations if max_iterations is None else max_iterations
        m_before = 0 if self._posterior is None else self._posterior.num_support
        candidate = ExactGP(self.kernel, self.noise_variance, X_t, y_t, fit_iterations=iterations)
        with torch.no_grad():
            candidate.noise.raw_variance.copy_(self.noise.raw_variance)
        if progress is not None:
            progress(0.0, f"exact GP on {n} points")
        result = candidate._fit_theta(iterations, progress)
        try:
            posterior = ExactPosterior.from_data(
                candidate.kernel, X_t, y_t, candidate.noise_variance
            )
        except NumericalError as err:
            return self._reject(f"posterior failed: {err}", n, m_before, start)
        if not all(bool(torch.isfinite(t).all()) for t in (posterior.alpha, posterior.L)):
            return self._reject("posterior has non-finite values", n, m_before, start)
        with torch.no_grad():
            lml = float(candidate.log_marginal_likelihood())
        self.kernel, self.noise, self.X, self.y = candidate.kernel, candidate.noise, X_t, y_t
        self._posterior = posterior
        self._fitted += 1
        self._report = FitReport(
            True,
            result.reason,
            n,
            m_before,
            n,
            self.hyperparameters(),
            time.perf_counter() - start,
            log_evidence=lml,
            details={"fit_ok": result.ok, "fit_iterations": result.iterations},
        )
        if progress is not None:
            progress(1.0, f"log p(y) = {lml:.1f}")
        return self._report

    def _fit_theta(self, iterations: int, progress: ProgressCallback | None = None) -> FitResult:
        params = [*self.kernel.parameters(), *self.noise.parameters()]
        for p in params:
            p.requires_grad_(True)
        n = self._data()[0].shape[0]

        def evaluated(done: int, most: int, loss: float) -> None:
            # One evaluation is one Cholesky of the N × N kernel matrix and its gradient.
            if progress is not None:
                progress(
                    done / (most + 1), f"evaluation {done} (at most {most}): −log p(y)/N {loss:.6g}"
                )

        result = fit_hyperparameters(
            lambda: -self.log_marginal_likelihood() / n, params, iterations,
            on_evaluation=evaluated,
        )  # fmt: skip
        for p in params:
            p.requires_grad_(False)
        return result

    def _reject(self, reason: str, n: int, m_before: int, start: float) -> FitReport:
        self._report = FitReport(
            False, reason, n, m_before, m_before, self.hyperparameters(),
            time.perf_counter() - start,
        )  # fmt: skip
        return self._report

    @torch.no_grad()
    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent mean and variance [S] at Xs [S, D] (add ``noise_variance`` for y)."""
        posterior = self._posterior
        if posterior is None or posterior.kernel is not self.kernel:
            X, y = self._data()
            posterior = ExactPosterior.from_data(self.kernel, X, y, self.noise_variance)
        return posterior.predict(self._as(Xs))

    # ------------------------------------------------------------------ persistence
    def _parameter_modules(self) -> dict[str, nn.Module]:
        return {"kernel.": self.kernel, "noise.": self.noise}

    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        """The data (the posterior is refactored from them)."""
        if self.X is None or self.y is None:
            return {}
        return {"data.X": self.X.detach().cpu().numpy(), "data.y": self.y.detach().cpu().numpy()}

    def _load_fitted(self, state: Mapping[str, Any], num_updates: int) -> None:
        self._fitted = num_updates
        if "data.X" in state:
            X, y = self._validate(state["data.X"], state["data.y"])
            self.X, self.y = X, y
            self._posterior = ExactPosterior.from_data(self.kernel, X, y, self.noise_variance)

    # ------------------------------------------------------------------ validation
    def _as(self, a: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def _data(self) -> tuple[Tensor, Tensor]:
        if self.X is None or self.y is None:
            raise RuntimeError("the exact GP has no data: call fit(X, y) first")
        return self.X, self.y


def _device_of(X: Tensor | None) -> str | torch.device:
    return "auto" if X is None else X.device
