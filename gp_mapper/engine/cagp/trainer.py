"""Full-batch training of a CaGP loss: Adam with a linear learning-rate decay, or L-BFGS.

Wenger et al. 2024, Sec. 5 ("Experimental Details") and Table S1: one epoch is one full-batch step;
Adam (≤ 1000 epochs, LR in {1, 0.1, 0.01} on the per-datum loss) under torch's
``LinearLR(end_factor=0.1)``, or L-BFGS (100 epochs, float64, Wolfe line search). The paper does not
give ``LinearLR``'s other arguments; torch's defaults (start 1/3, 5 steps) would pin the rate at a
tenth after five steps, so the decay here runs from the full rate to a tenth over all epochs.

The paper picks the epoch with the best *test* NLL; here the held-out set is a validation split
of the training log (never test data): its NLL is checked every few epochs, the best θ and
actions are kept, and training stops after ``patience`` checks without improvement. The
patience is long by default because CaGP-Opt has a ramp-up phase (Fig. 3).

Like GPflow's ``Scipy().minimize``, the trainer knows nothing of models: it gets a loss
closure, the tensors to optimise and an optional validation closure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from ..core.fit import single_step_lbfgs
from ..errors import NumericalError
from ..model import ProgressCallback
from .settings import default as setting_default

Optimizer = Literal["adam", "lbfgs"]
OPTIMIZERS: tuple[str, ...] = ("adam", "lbfgs")
# The paper's schedule: LinearLR(end_factor=0.1) (Sec. 5, "Experimental Details").
LR_END_FACTOR = 0.1
# The paper's Adam budget for CaGP-Opt (Table S1: 1000 epochs); a map of 10⁴–10⁵ samples on a
# CPU is affordable at a few hundred, so the model's default is lower (cagp/settings.py).
PAPER_EPOCHS = 1000
# The middle of the paper's sweep {1, 0.1, 0.01}; 0.1 is what it used on 3DRoad and Power.
DEFAULT_LEARNING_RATE = setting_default("cagp.learning_rate")
# Validation checks: every 10 epochs, stop after 20 checks (200 epochs) without improvement,
# longer than the ramp-up phase of Fig. 3 in the paper's runs of 1000 epochs.
DEFAULT_VALIDATE_EVERY = setting_default("cagp.validate_every")
DEFAULT_PATIENCE = setting_default("cagp.patience")


@dataclass(frozen=True)
class TrainerConfig:
    """How to train.

    Attributes:
        epochs: full-batch steps (0: no training).
        learning_rate: the initial learning rate (of the per-datum loss).
        optimizer: "adam" (with the linear decay) or "lbfgs" (strong Wolfe line search, one
            iteration per epoch; the caller runs it in float64).
        validate_every: epochs between validation checks (when there is a validation closure).
        patience: validation checks without improvement before stopping; 0 never stops early.
    """

    epochs: int = PAPER_EPOCHS
    learning_rate: float = DEFAULT_LEARNING_RATE
    optimizer: Optimizer = "adam"
    validate_every: int = DEFAULT_VALIDATE_EVERY
    patience: int = DEFAULT_PATIENCE

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be non-negative, got {self.epochs}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0.0):
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.validate_every < 1:
            raise ValueError(f"validate_every must be at least 1, got {self.validate_every}")
        if self.patience < 0:
            raise ValueError(f"patience must be non-negative, got {self.patience}")


class EpochRecord(NamedTuple):
    """One epoch: its loss (per datum), the learning rate of its step and, where checked, the
    validation NLL (per point)."""

    epoch: int
    loss: float
    learning_rate: float
    validation_nll: float | None


class TrainResult(NamedTuple):
    """What a training run did; the parameters hold the kept values afterwards.

    Attributes:
        epochs: epochs run.
        kept_epoch: the epoch whose parameters were kept (0: the initial ones).
        final_loss: the loss at the last epoch run (per datum; nan if none).
        best_validation_nll: the best validation NLL seen (None without validation).
        reason: how it ended.
        history: every epoch's record.
    """

    epochs: int
    kept_epoch: int
    final_loss: float
    best_validation_nll: float | None
    reason: str
    history: tuple[EpochRecord, ...]


def _snapshot(params: Sequence[Tensor]) -> list[Tensor]:
    return [p.detach().clone() for p in params]


def _restore(params: Sequence[Tensor], values: Sequence[Tensor]) -> None:
    with torch.no_grad():
        for p, v in zip(params, values, strict=True):
            p.copy_(v)


def train(
    loss_fn: Callable[[], Tensor],
    params: Sequence[Tensor],
    config: TrainerConfig,
    *,
    validation_nll: Callable[[], float] | None = None,
    progress: ProgressCallback | None = None,
) -> TrainResult:
    """Minimise ``loss_fn()`` over ``params`` (in place).

    A loss that is not finite, or a factorisation that fails, ends training; the parameters are
    then those of the best validation check, or of the last good epoch without validation.

    Args:
        loss_fn: the per-datum loss at the current parameters (differentiable).
        params: the leaf tensors to optimise (requires_grad set).
        config: epochs, optimiser, learning rate, validation schedule.
        validation_nll: mean NLL of the held-out points at the current parameters.
        progress: called with (fraction done, status) after each epoch.
    """
    params = list(params)
    if config.epochs == 0 or not params:
        return TrainResult(0, 0, math.nan, None, "no training requested", ())
    if config.optimizer == "adam":
        optimizer: torch.optim.Optimizer = torch.optim.Adam(params, lr=config.learning_rate)
        schedule = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0, end_factor=LR_END_FACTOR, total_iters=config.epochs
        )
    else:
        optimizer = single_step_lbfgs(params, lr=config.learning_rate)
        schedule = None

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = loss_fn()
        if not torch.isfinite(loss):
            raise NumericalError(f"the loss is not finite ({float(loss)})")
        loss.backward()
        return loss

    history: list[EpochRecord] = []
    kept = _snapshot(params)
    kept_epoch, best_nll, checks_since_best = 0, math.inf, 0
    final_loss, reason = math.nan, f"ran all {config.epochs} epochs"
    if validation_nll is not None:
        try:
            best_nll = validation_nll()
        except NumericalError:
            best_nll = math.inf  # the initial values cannot be scored; any epoch that can wins
    for epoch in range(1, config.epochs + 1):
        rate = float(optimizer.param_groups[0]["lr"])
        try:
            loss = optimizer.step(closure)
            final_loss = float(loss.detach())
        except NumericalError as err:
            reason = f"stopped at epoch {epoch}: {err}"
            break
        if not all(bool(torch.isfinite(p).all()) for p in params):
            reason = f"stopped at epoch {epoch}: a parameter is not finite"
            break
        if schedule is not None:
            schedule.step()
        nll: float | None = None
        if validation_nll is not None and (
            epoch % config.validate_every == 0 or epoch == config.epochs
        ):
            try:
                nll = validation_nll()
            except NumericalError:
                nll = math.inf
            if nll < best_nll:
                best_nll, kept, kept_epoch, checks_since_best = nll, _snapshot(params), epoch, 0
            else:
                checks_since_best += 1
        elif validation_nll is None:
            kept, kept_epoch = _snapshot(params), epoch
        history.append(EpochRecord(epoch, final_loss, rate, nll))
        if progress is not None:
            shown = "" if nll is None else f", validation NLL {nll:.4f}"
            progress(
                epoch / config.epochs,
                f"epoch {epoch}/{config.epochs}: ELBO/N {final_loss:.4f}{shown}",
            )
        if config.patience and checks_since_best >= config.patience:
            reason = (
                f"early stop at epoch {epoch}: no better validation NLL in {config.patience} checks"
            )
            break
    _restore(params, kept)
    return TrainResult(
        len(history),
        kept_epoch,
        final_loss,
        None if validation_nll is None else best_nll,
        reason,
        tuple(history),
    )
