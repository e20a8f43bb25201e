"""Hyperparameter fitting by L-BFGS on a scalar loss; knows nothing of models (GPflow's Scipy)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ..errors import NumericalError
from .kernels import first_derivatives_only

# Stop when the largest gradient entry (of the loss per datum) falls below this. Looser than
# SciPy's default; on the magnetometer stream the map is the same (benchmarks/magnetic_streaming.py)
GRADIENT_TOLERANCE = 1e-5
# Stop when the loss per datum changes by less than this between iterations.
CHANGE_TOLERANCE = 1e-8
HISTORY_SIZE = 20
# Trial points of one strong-Wolfe line search (torch's own max_ls).
LINE_SEARCH_EVALUATIONS = 25


class FitResult(NamedTuple):
    """Outcome of one fit; on failure the parameters are restored to their start."""

    ok: bool
    loss_before: float
    loss_after: float
    iterations: int
    reason: str


class _OutOfTimeError(Exception):
    """Raised inside the closure when the fit's time budget is spent."""


def fit_hyperparameters(
    loss_fn: Callable[[], Tensor],
    params: Sequence[nn.Parameter],
    max_iterations: int,
    max_seconds: float = 0.0,
    on_evaluation: Callable[[int, int, float], None] | None = None,
) -> FitResult:
    """Minimise ``loss_fn()`` over ``params`` with L-BFGS and a strong-Wolfe line search.

    The parameters are restored to their initial values if the loss or its gradient becomes
    non-finite, a Cholesky fails, or the result is worse than the start.

    Args:
        loss_fn: evaluates the loss (differentiable in ``params``).
        params: the raw parameters to optimise (modified in place).
        max_iterations: L-BFGS iteration budget (0 skips the fit).
        max_seconds: wall-time budget (0: none). When it is spent the fit stops at its next
            evaluation and keeps the best parameters evaluated so far: a live map waits for
            no fit longer than this.
        on_evaluation: called after each evaluation with (evaluations so far, the most the
            fit may make: ``max_evaluations(max_iterations)``, the loss), for progress.
    """
    start = [p.detach().clone() for p in params]

    def restore() -> None:
        with torch.no_grad():
            for p, s in zip(params, start, strict=True):
                p.copy_(s)

    try:
        with torch.no_grad():
            loss_before = float(loss_fn())
    except NumericalError as err:
        return FitResult(False, math.nan, math.nan, 0, f"initial loss failed: {err}")
    if max_iterations <= 0:
        return FitResult(True, loss_before, loss_before, 0, "no fit requested")
    if not math.isfinite(loss_before):
        return FitResult(False, loss_before, loss_before, 0, "initial loss is not finite")

    optimiser = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iterations,
        tolerance_grad=GRADIENT_TOLERANCE,
        tolerance_change=CHANGE_TOLERANCE,
        history_size=HISTORY_SIZE,
        line_search_fn="strong_wolfe",
    )
    evaluations = 0
    deadline = time.perf_counter() + max_seconds if max_seconds > 0.0 else math.inf
    best_loss, best = loss_before, start

    def closure() -> Tensor:
        nonlocal evaluations, best_loss, best
        if time.perf_counter() > deadline:
            raise _OutOfTimeError
        evaluations += 1
        optimiser.zero_grad()
        with first_derivatives_only():  # the fused kernel matrices: a cheaper backward
            loss = loss_fn()
        if not torch.isfinite(loss):
            raise NumericalError("loss became non-finite")
        value = float(loss.detach())
        if value < best_loss:
            best_loss, best = value, [p.detach().clone() for p in params]
        loss.backward()
        if on_evaluation is not None:
            on_evaluation(evaluations, max_evaluations(max_iterations), value)
        return loss

    reason = "converged"
    try:
        try:
            optimiser.step(closure)
        except _OutOfTimeError:
            with torch.no_grad():
                for p, b in zip(params, best, strict=True):
                    p.copy_(b)
            reason = f"stopped at the {max_seconds:g} s budget after {evaluations} evaluations"
        with torch.no_grad():
            loss_after = float(loss_fn())
    except NumericalError as err:
        restore()
        return FitResult(False, loss_before, loss_before, evaluations, f"fit diverged: {err}")
    if not math.isfinite(loss_after) or not all(bool(torch.isfinite(p).all()) for p in params):
        restore()
        return FitResult(False, loss_before, loss_before, evaluations, "fit gave non-finite values")
    if loss_after > loss_before:
        restore()
        return FitResult(False, loss_before, loss_before, evaluations, "fit made the bound worse")
    iterations = int(optimiser.state[optimiser._params[0]].get("n_iter", 0))
    return FitResult(True, loss_before, loss_after, iterations, reason)


def max_evaluations(max_iterations: int) -> int:
    """The most loss evaluations one :func:`fit_hyperparameters` makes: torch's L-BFGS stops
    at ``max_eval``, 1.25 · ``max_iter`` by default (line-search trials included)."""
    return max_iterations * 5 // 4


def single_step_lbfgs(params: Sequence[Tensor], lr: float = 1.0) -> torch.optim.LBFGS:
    """L-BFGS that takes one iteration per ``step`` (strong Wolfe), for loops that test their own
    stopping rule between iterations; no built-in stop.

    Torch caps a step's evaluations at ``max_eval`` (default 1.25 · ``max_iter``), so with
    ``max_iter=1`` the line search would get no trial beyond its first point and could never
    shorten a step that overshoots. The cap here leaves it its full 25 trials.
    """
    return torch.optim.LBFGS(
        params,
        lr=lr,
        max_iter=1,
        max_eval=1 + LINE_SEARCH_EVALUATIONS,
        tolerance_grad=0.0,
        tolerance_change=0.0,
        history_size=HISTORY_SIZE,
        line_search_fn="strong_wolfe",
    )
