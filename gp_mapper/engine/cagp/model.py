"""Computation-aware GPs as batch models: CaGP-Opt (``cagp``) and CaGP-CG (``cagp_cg``).

Wenger et al. 2024 (CaGP). ``fit`` trains θ (and, for CaGP-Opt, the block-sparse action entries) on
the ELBO of eq. 11 divided by N, then forms the posterior at the kept θ and actions. Its variance
counts the error of the approximation: at fixed θ it is never below the exact GP's (Prop. S1).

- ``cagp`` (CaGP-Opt): I disjoint ragged blocks over a seeded random permutation of the
  training points (the reference code's random blocks; no point dropped), entries learned
  jointly with θ.
- ``cagp_cg`` (CaGP-CG): the actions are CG residuals on ``K̂ v = y``, recomputed without gradients
  at each epoch's θ (as the reference code does) and once more at the final θ; only θ is learned.

With a validation fraction, that share of the log is held out (seeded), its NLL picks the epoch
kept and stops training early; the posterior then rests on the remaining points only, and the
report says how many were held out.
"""

from __future__ import annotations

import copy
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ..batch import CommittedFit, StateSetting, finite_tensor
from ..core.kernels import Kernel
from ..core.linalg import JITTER_LADDER, LOG_2PI, Jitter
from ..core.noise import GaussianNoise
from ..errors import NumericalError, StateError
from ..exact.prefit import prefit_theta
from ..model import ModelKind, PlainInputs, ProgressCallback
from ..report import FitReport
from ..state import (
    freeze_parameters,
)
from .actions import (
    BLOCK_ORDERS,
    DEFAULT_CG_TOLERANCE,
    Actions,
    BlockOrder,
    BlockSparseActions,
    cg_actions,
)
from .elbo import evaluate_elbo
from .kernel_actions import DEFAULT_CHUNK
from .posterior import CaGPPosterior
from .settings import default as setting_default
from .trainer import (
    DEFAULT_LEARNING_RATE,
    DEFAULT_PATIENCE,
    DEFAULT_VALIDATE_EVERY,
    Optimizer,
    TrainerConfig,
    TrainResult,
    train,
)

# The paper's rank for every UCI set (Table S1).
DEFAULT_ACTIONS = setting_default("cagp.actions")
# No training after the pre-fit of θ (the settings table's reason); the paper's 1000 epochs
# (Adam) are a GPU budget: on 2·10⁴ samples an epoch is 4·10⁸ kernel evaluations.
DEFAULT_EPOCHS = setting_default("cagp.epochs")
# Samples of the exact pre-fit of θ (the settings table's reason).
DEFAULT_PREFIT_POINTS = setting_default("cagp.prefit_points")
# Share of the training progress bar given to training; the final posterior takes the rest.
_TRAIN_SHARE = 0.95


@dataclass(frozen=True)
class _State:
    """Everything a fit leaves behind; replaced whole on each commit."""

    kernel: Kernel
    noise: GaussianNoise
    posterior: CaGPPosterior | None
    X: Tensor | None  # [N', D] the points the posterior rests on (the training part)
    y: Tensor | None  # [N']
    blocks: BlockSparseActions | None  # CaGP-Opt's learned actions
    n_total: int  # points given to the fit (N' plus the held-out ones)
    num_updates: int


class _ComputationAwareGP(PlainInputs, CommittedFit, ABC):
    """What CaGP-Opt and CaGP-CG share: data checks, the split, training, state, prediction.

    Args:
        kernel: prior covariance (copied; its values are the initial θ).
        noise_variance: initial σ².
        actions: I, the number of actions (at most the number of training points; more are
            cut to it, which makes the posterior exact).
        epochs: full-batch training epochs (0 keeps θ).
        learning_rate: initial learning rate on the per-datum loss.
        optimizer: "adam" (linear decay to a tenth over all epochs) or "lbfgs" (float64).
        validation: share of the log held out for early stopping, in [0, 0.5); 0 = none.
        validate_every: epochs between validation checks.
        patience: validation checks without improvement before stopping (0: never).
        prefit_points: before training, fit θ by L-BFGS on an exact GP over this many random
            training points (``exact.prefit``); 0 = off, the paper's start.
        chunk: rows per kernel block of ``K S`` and of prediction (memory O(chunk·N)).
        seed: seed of the validation split and of the blocks and their initial entries.
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: working floating-point type (the Gram is always factored in float64).
        jitter: first jitter of the Gram's Cholesky (larger rungs on failure).
    """

    name: ClassVar[str]
    kind: ClassVar[ModelKind] = "batch"
    STATE_SETTINGS = (
        StateSetting("actions", int, attr="num_actions"),
        StateSetting("epochs", int, attr="trainer.epochs"),
        StateSetting("learning_rate", float, attr="trainer.learning_rate"),
        StateSetting("optimizer", str, attr="trainer.optimizer"),
        StateSetting("validation", float),
        StateSetting("validate_every", int, attr="trainer.validate_every"),
        StateSetting("patience", int, attr="trainer.patience"),
        StateSetting("chunk", int),
        StateSetting("seed", int),
        # States from before the pre-fit had none.
        StateSetting("prefit_points", int, missing=0),
    )

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        *,
        actions: int = DEFAULT_ACTIONS,
        epochs: int = DEFAULT_EPOCHS,
        learning_rate: float = DEFAULT_LEARNING_RATE,
        optimizer: Optimizer = "adam",
        validation: float = 0.0,
        validate_every: int = DEFAULT_VALIDATE_EVERY,
        patience: int = DEFAULT_PATIENCE,
        prefit_points: int = DEFAULT_PREFIT_POINTS,
        chunk: int = DEFAULT_CHUNK,
        seed: int = 0,
        device: str | torch.device = "auto",
        dtype: torch.dtype = torch.float64,
        jitter: float | Jitter = JITTER_LADDER[0],
    ) -> None:
        if actions < 1:
            raise ValueError(f"actions must be at least 1, got {actions}")
        if not 0.0 <= validation < 0.5:
            raise ValueError(f"validation must be in [0, 0.5), got {validation}")
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        if prefit_points < 0:
            raise ValueError(f"prefit_points must be non-negative, got {prefit_points}")
        if not (math.isfinite(noise_variance) and noise_variance > 0.0):
            raise ValueError(f"noise_variance must be positive and finite, got {noise_variance}")
        self.trainer = TrainerConfig(epochs, learning_rate, optimizer, validate_every, patience)
        self.num_actions = int(actions)
        self.validation = float(validation)
        self.chunk = int(chunk)
        self.seed = int(seed)
        self.prefit_points = int(prefit_points)
        kernel, noise = self._init_parameters(kernel, noise_variance, device, dtype, jitter)
        self._state = _State(kernel, noise, None, None, None, None, 0, 0)

    # ------------------------------------------------------------------ read-only views
    # ------------------------------------------------------------------ prediction
    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent mean and combined variance [S] at Xs [S, D] (add ``noise_variance`` for y)."""
        return self._fitted().predict(self._inputs(Xs))

    def layers(self, Xs: Tensor | np.ndarray) -> dict[str, Tensor]:
        """Mean, latent, predictive, mathematical and computational variance [S] at Xs [S, D]
        (see :meth:`CaGPPosterior.layers`; needs an O(N³) exact factorisation)."""
        return self._fitted().variance_parts(self._inputs(Xs))

    def _fitted(self) -> CaGPPosterior:
        posterior = self._state.posterior
        if posterior is None:
            raise RuntimeError("the model has no data yet: call fit() first")
        return posterior

    def _inputs(self, Xs: Tensor | np.ndarray) -> Tensor:
        Xs_t = torch.as_tensor(Xs, dtype=self.dtype, device=self.device)
        D = self._fitted().X.shape[1]
        if Xs_t.ndim != 2 or Xs_t.shape[1] != D:
            raise ValueError(f"Xs must be [S, {D}], got shape {tuple(Xs_t.shape)}")
        return Xs_t

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        *,
        progress: ProgressCallback | None = None,
    ) -> FitReport:
        """Train θ (and the actions) on the ELBO, then form the posterior.

        Atomic: if the final factorisation fails or a value is not finite, the previous fit
        stays and the report has ``accepted=False`` and the reason.

        Args:
            X: inputs [N, D].
            y: targets [N] (zero prior mean: model an offset with a constant kernel part).
            progress: called with (fraction done, status) after each epoch and at the end.

        Raises:
            ValueError: wrong shapes, no data, NaN or inf values.
        """
        X_t, y_t = self._validate(X, y)
        start = time.perf_counter()
        n_total = X_t.shape[0]
        m_before = 0 if self._state.X is None else int(self._state.X.shape[0])
        generator = torch.Generator().manual_seed(self.seed)
        X_fit, y_fit, X_val, y_val = self._split(X_t, y_t, generator)
        n = X_fit.shape[0]
        num_actions = min(self.num_actions, n)

        # Training runs on copies (float64 for L-BFGS); the committed state is untouched.
        work = torch.float64 if self.trainer.optimizer == "lbfgs" else self.dtype
        kernel, noise = self._state.kernel, self._state.noise
        prefit: dict[str, Any] | None = None
        if self.prefit_points > 0:
            kernel, noise, prefit = prefit_theta(
                kernel, noise, X_fit, y_fit, self.prefit_points, self.seed, progress
            )
        kernel = copy.deepcopy(kernel).to(dtype=work)
        noise = copy.deepcopy(noise).to(dtype=work)
        blocks = self._initial_blocks(n, num_actions, generator, work)
        Xw, yw = X_fit.to(work), y_fit.to(work)
        params = [*kernel.parameters(), *noise.parameters()]
        if blocks is not None:
            params.append(blocks.raw)
        for p in params:
            p.requires_grad_(True)

        def loss() -> Tensor:
            actions = self._actions(kernel, noise, Xw, yw, blocks, num_actions)
            elbo = evaluate_elbo(
                kernel, noise.variance, Xw, yw, actions, chunk=self.chunk, jitter=self.jitter
            )
            return elbo.loss / n

        check: Callable[[], float] | None = None
        if X_val is not None and y_val is not None:
            Xv, yv = X_val.to(work), y_val.to(work)

            def check() -> float:
                posterior = self._posterior(kernel, noise, Xw, yw, blocks, num_actions)
                return _mean_nll(posterior, Xv, yv)

        def training_progress(fraction: float, status: str) -> None:
            if progress is not None:
                progress(_TRAIN_SHARE * fraction, status)

        result = train(loss, params, self.trainer, validation_nll=check, progress=training_progress)
        kernel = kernel.to(dtype=self.dtype)
        noise = noise.to(dtype=self.dtype)
        if blocks is not None:
            blocks = blocks.to(dtype=self.dtype)
        freeze_parameters(kernel, noise)
        if blocks is not None:
            blocks.raw.requires_grad_(False)
        trained = time.perf_counter()

        try:
            posterior = self._posterior(kernel, noise, X_fit, y_fit, blocks, num_actions)
        except NumericalError as err:
            return self._reject(f"posterior failed: {err}", n_total, m_before, start, result)
        if not (torch.isfinite(posterior.v_tilde).all() and math.isfinite(posterior.elbo)):
            return self._reject("posterior has non-finite values", n_total, m_before, start, result)
        self._state = _State(
            kernel, noise, posterior, X_fit, y_fit, blocks, n_total, self._state.num_updates + 1
        )
        self._report = self._fit_report(
            posterior, result, n_total, m_before, start, trained, prefit
        )
        if progress is not None:
            progress(1.0, f"{posterior.num_actions} actions on {n} points")
        return self._report

    def _split(
        self, X: Tensor, y: Tensor, generator: torch.Generator
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """(X_fit, y_fit, X_val, y_val): a seeded random share held out for validation."""
        n = X.shape[0]
        held = round(self.validation * n)
        if held == 0 or held >= n:
            return X, y, None, None
        order = torch.randperm(n, generator=generator).to(X.device)
        keep, out = torch.sort(order[held:]).values, torch.sort(order[:held]).values
        return X[keep], y[keep], X[out], y[out]

    def _posterior(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        blocks: BlockSparseActions | None,
        num_actions: int,
    ) -> CaGPPosterior:
        """The posterior at the current θ and actions (no gradients)."""
        with torch.no_grad():
            actions = self._actions(kernel, noise, X, y, blocks, num_actions)
            return CaGPPosterior.build(
                kernel,
                float(noise.variance),
                X,
                y,
                actions,
                chunk=self.chunk,
                jitter=self.jitter,
            )

    def _reject(
        self, reason: str, n: int, m_before: int, start: float, result: TrainResult
    ) -> FitReport:
        self._report = FitReport(
            False,
            reason,
            n,
            m_before,
            m_before,
            self.hyperparameters(),
            time.perf_counter() - start,
            details=_training_details(result),
        )
        return self._report

    def _fit_report(
        self,
        posterior: CaGPPosterior,
        result: TrainResult,
        n_total: int,
        m_before: int,
        start: float,
        trained: float,
        prefit: dict[str, Any] | None,
    ) -> FitReport:
        n = posterior.X.shape[0]
        details: dict[str, Any] = {
            "elbo": posterior.elbo,
            "elbo_per_datum": posterior.elbo / n,
            "num_actions": posterior.num_actions,
            "held_out": n_total - n,
            "dropped": 0,  # ragged blocks keep every training point
            "optimizer": self.trainer.optimizer,
            "learning_rate": self.trainer.learning_rate,
            "seconds_fit": trained - start,
            "prefit": prefit,
            **_training_details(result),
            **self._policy_details(posterior),
        }
        return FitReport(
            True,
            result.reason,
            n_total,
            m_before,
            n,
            self.hyperparameters(),
            time.perf_counter() - start,
            lower=-posterior.elbo,  # ℓ_ELBO ≥ −log p(y) on the points the posterior rests on
            details=details,
        )

    # ------------------------------------------------------------------ the policy
    @abstractmethod
    def _initial_blocks(
        self, n: int, num_actions: int, generator: torch.Generator, dtype: torch.dtype
    ) -> BlockSparseActions | None:
        """CaGP-Opt's learnable blocks (None for a policy without learned actions)."""

    @abstractmethod
    def _actions(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        blocks: BlockSparseActions | None,
        num_actions: int,
    ) -> Actions:
        """S at the current θ (and blocks)."""

    def _policy_details(self, posterior: CaGPPosterior) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------ persistence
    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        """The points the posterior rests on and the learned actions. The posterior is not
        stored: the same inputs form it again by the same code, bit for bit on one device."""
        s = self._state
        if s.X is None or s.y is None:
            return {}
        out = {
            "support.X": s.X.detach().cpu().numpy(),
            "support.y": s.y.detach().cpu().numpy(),
            "summary.n_total": np.array(s.n_total),
        }
        if s.blocks is not None:
            out["blocks.index"] = s.blocks.index.cpu().numpy()
            out["blocks.mask"] = s.blocks.mask.cpu().numpy()
            out["blocks.raw"] = s.blocks.raw.detach().cpu().numpy()
        return out

    def _load_fitted(self, state: Mapping[str, Any], num_updates: int) -> None:
        def tensor(name: str, dtype: torch.dtype | None = None) -> Tensor:
            dtype = self.dtype if dtype is None else dtype
            return finite_tensor(state, name, dtype, self.device, self.name)

        kernel, noise = self._state.kernel, self._state.noise
        if "support.X" not in state:
            self._state = _State(kernel, noise, None, None, None, None, 0, num_updates)
            return
        X, y = tensor("support.X"), tensor("support.y")
        if X.ndim != 2 or X.shape[0] == 0 or y.shape != (X.shape[0],):
            raise StateError(
                f"{self.name} state: support.X {tuple(X.shape)} and support.y "
                f"{tuple(y.shape)} must be [N, D] and [N] with N > 0"
            )
        blocks = None
        if "blocks.raw" in state:
            index = tensor("blocks.index", torch.long)
            if index.numel() and (index.min() < 0 or index.max() >= X.shape[0]):
                raise StateError(f"{self.name} state: blocks.index points outside the data")
            blocks = BlockSparseActions(
                index, tensor("blocks.mask", torch.bool), tensor("blocks.raw")
            )
            blocks.raw.requires_grad_(False)
        num_actions = min(self.num_actions, X.shape[0])
        posterior = self._posterior(kernel, noise, X, y, blocks, num_actions)
        n_total = int(np.asarray(state["summary.n_total"]))
        self._state = _State(kernel, noise, posterior, X, y, blocks, n_total, num_updates)


class CaGP(_ComputationAwareGP):
    """CaGP-Opt (Wenger et al. 2024): learned block-sparse actions, trained with θ on the ELBO.

    Takes the arguments of :class:`_ComputationAwareGP` plus ``block_order`` ("random":
    blocks of a seeded random permutation, the paper's; "data": contiguous runs of the data in
    the order given, e.g. time). Costs per epoch: N² kernel evaluations (in chunks, never
    stored) and O(N·I) memory.
    """

    name: ClassVar[str] = "cagp"
    STATE_SETTINGS = (*_ComputationAwareGP.STATE_SETTINGS, StateSetting("block_order", str))

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        *,
        block_order: BlockOrder = "random",
        **kwargs: Any,
    ) -> None:
        if block_order not in BLOCK_ORDERS:
            raise ValueError(f"block_order must be one of {BLOCK_ORDERS}, got {block_order!r}")
        super().__init__(kernel, noise_variance, **kwargs)
        self.block_order: BlockOrder = block_order

    def _initial_blocks(
        self, n: int, num_actions: int, generator: torch.Generator, dtype: torch.dtype
    ) -> BlockSparseActions:
        return BlockSparseActions.random(
            n, num_actions, generator, dtype=dtype, device=self.device, order=self.block_order
        )

    def _actions(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        blocks: BlockSparseActions | None,
        num_actions: int,
    ) -> Actions:
        if blocks is None:
            raise StateError("cagp needs its learned blocks")
        return blocks()

    def _policy_details(self, posterior: CaGPPosterior) -> dict[str, Any]:
        return {
            "block_size": int(posterior.actions.values.shape[1]),
            "block_order": self.block_order,
        }


class CaGPCG(_ComputationAwareGP):
    """CaGP-CG (Wenger et al. 2024): actions are CG residuals at the current θ; only θ is learned.

    Takes the arguments of :class:`_ComputationAwareGP` plus ``cg_tolerance`` (stop CG once
    ‖r‖ ≤ tolerance·‖y‖; fewer actions than I are then used). Costs per epoch: I CG steps of
    N² kernel evaluations each.
    """

    name: ClassVar[str] = "cagp_cg"
    STATE_SETTINGS = (*_ComputationAwareGP.STATE_SETTINGS, StateSetting("cg_tolerance", float))

    def __init__(
        self,
        kernel: Kernel,
        noise_variance: float = 0.1,
        *,
        cg_tolerance: float = DEFAULT_CG_TOLERANCE,
        **kwargs: Any,
    ) -> None:
        if not (math.isfinite(cg_tolerance) and cg_tolerance >= 0.0):
            raise ValueError(f"cg_tolerance must be finite and non-negative, got {cg_tolerance}")
        super().__init__(kernel, noise_variance, **kwargs)
        self.cg_tolerance = float(cg_tolerance)

    def _initial_blocks(
        self, n: int, num_actions: int, generator: torch.Generator, dtype: torch.dtype
    ) -> None:
        return None

    def _actions(
        self,
        kernel: Kernel,
        noise: GaussianNoise,
        X: Tensor,
        y: Tensor,
        blocks: BlockSparseActions | None,
        num_actions: int,
    ) -> Actions:
        return cg_actions(
            kernel,
            noise.variance.detach(),
            X,
            y,
            num_actions,
            tolerance=self.cg_tolerance,
            chunk=self.chunk,
        ).actions

    def _policy_details(self, posterior: CaGPPosterior) -> dict[str, Any]:
        return {"cg_tolerance": self.cg_tolerance}


def _mean_nll(posterior: CaGPPosterior, X: Tensor, y: Tensor) -> float:
    """Mean −log N(y; μ(x), var(x) + σ²) over held-out points."""
    mean, var = posterior.predict(X)
    total = var + posterior.noise_variance
    return float(0.5 * (LOG_2PI + torch.log(total) + (y - mean) ** 2 / total).mean())


def _training_details(result: TrainResult) -> dict[str, Any]:
    return {
        "epochs_run": result.epochs,
        "kept_epoch": result.kept_epoch,
        "final_loss": result.final_loss,
        "best_validation_nll": result.best_validation_nll,
        "training": result.reason,
    }
