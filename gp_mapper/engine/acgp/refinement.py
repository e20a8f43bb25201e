"""L-BFGS with ACGP's refinement schedule: coarse, cheap subsets first, tighter ones later.

Bartels et al. 2023 (ACGP), Sec. 4.3 and App. B.2. Restart k runs L-BFGS on a loss whose stopped
Cholesky uses r = (2/3)^{k+1}, with the same value as the relative tolerance on the loss change
(SciPy's ftol).
Each restart warm-starts from the last accepted point; a failed restart (non-finite values, a
failed factorisation, or a worse loss than its start) restores that point and counts as a
failure without advancing k, as in the authors' code (k = attempts − failures). The schedule
ends after ``refinements`` accepted restarts, two failures, the iteration budget, once ftol is
below SciPy's default (the loss has converged at the floored r), or when a restart at the same r
as the last one makes no progress.

As SciPy, each restart starts without curvature history and its first step has unit length;
``keep_history`` [ours] carries the history over instead (a history from another r can stall
the line search on the piecewise objective; a stalled step then starts over). The gradient
tolerance is 0, as in the authors' runs (gtol = 0): from gpytorch's initial lengthscales in 32
dimensions the gradient is below 1e-7 and a gradient test would stop at "all noise".

This is its own loop rather than ``core.fit.fit_hyperparameters`` because the change tolerance
differs per restart; the L-BFGS settings are otherwise the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..core.fit import single_step_lbfgs
from ..errors import NumericalError

# r_k = ftol_k = REFINEMENT_BASE^(k+1) (App. B.2, the authors' iterative refinement).
REFINEMENT_BASE = 2.0 / 3.0
# SciPy divides by max(|f_k|, |f_{k+1}|, 1) for an objective of size ~N; the loss here is per
# datum, so the 1 would make the rule absolute. Only a loss at exactly 0 needs a floor.
_FTOL_SCALE_FLOOR = 1e-300
# The authors' code aborts after two failed attempts (the paper's App. B.2 says three).
MAX_FAILED_ATTEMPTS = 2
# SciPy's default ftol (factr 1e7 × machine epsilon): below it a restart cannot stop earlier than
# L-BFGS-B's own convergence test, so the schedule has converged (k ≈ 48).
CONVERGED_FTOL = 1e7 * 2.220446049250313e-16


def refinement_tolerance(k: int) -> float:
    """ftol of restart k (k = 0, 1, ...), and its r unless floored: (2/3)^{k+1}."""
    return REFINEMENT_BASE ** (k + 1)


class RefinementResult(NamedTuple):
    """Outcome of :func:`refine_hyperparameters`; the parameters hold the last accepted point.

    Attributes:
        ok: at least one restart was accepted, or none was asked for.
        restarts: accepted restarts.
        failures: failed restarts.
        iterations: L-BFGS iterations over all restarts.
        loss_before: the loss at the start, under the first restart's tolerance.
        loss_after: the loss of the last accepted restart, under its tolerance.
        tolerance: r of the last accepted restart (nan if none).
        reason: why the schedule ended.
    """

    ok: bool
    restarts: int
    failures: int
    iterations: int
    loss_before: float
    loss_after: float
    tolerance: float
    reason: str


def _lbfgs(
    optimiser: torch.optim.LBFGS,
    loss_fn: Callable[[], Tensor],
    params: Sequence[nn.Parameter],
    max_iterations: int,
    ftol: float,
    on_iteration: Callable[[int, float], None] | None = None,
) -> tuple[float, float, int]:
    """Run ``optimiser`` until SciPy's ftol rule holds; (loss before, after, iterations).

    ``on_iteration`` is called with (iterations so far, loss) after each iteration.

    SciPy's L-BFGS-B stops when ``(f_k − f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) ≤ ftol``. Torch's
    ``tolerance_change`` is absolute and also applies to the step, so the run takes one iteration
    per ``step`` and tests the rule itself; the optimiser's history carries over between steps
    (and between calls). The loss at a point is cached, so the evaluation that starts each step
    is not paid twice. A zero gradient ends the run (torch's step returns without moving).

    Raises:
        NumericalError: a loss or gradient was non-finite, or a factorisation failed.
    """
    cached: dict[str, Any] = {}

    def closure() -> Tensor:
        point = [p.detach().clone() for p in params]
        if cached and all(torch.equal(a, b) for a, b in zip(point, cached["x"], strict=True)):
            for p, g in zip(params, cached["grad"], strict=True):
                p.grad = g.clone()
            return cached["loss"]
        optimiser.zero_grad()
        loss = loss_fn()
        if not torch.isfinite(loss):
            raise NumericalError("loss became non-finite")
        loss.backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params]
        cached.update(x=point, grad=grads, loss=loss.detach())
        return loss.detach()

    before = previous = float(closure())
    iterations = 0
    while iterations < max_iterations:
        _scale_first_step(optimiser, cached["grad"])
        optimiser.step(closure)
        optimiser.param_groups[0]["lr"] = 1.0
        iterations += 1
        current = float(closure())
        if not all(bool(torch.isfinite(p).all()) for p in params):
            raise NumericalError("parameters became non-finite")
        if on_iteration is not None:
            on_iteration(iterations, current)
        if current == previous and _has_history(optimiser):
            # A history from another r (M moved, the objective is piecewise) can point where the
            # line search finds nothing; start over from steepest descent, once.
            optimiser.state.clear()
            continue
        if (previous - current) / max(abs(previous), abs(current), _FTOL_SCALE_FLOOR) <= ftol:
            break
        previous = current
    return before, float(closure()), iterations


def _iterations_done(optimiser: torch.optim.LBFGS) -> int:
    return int(optimiser.state[optimiser.param_groups[0]["params"][0]].get("n_iter", 0))


def _has_history(optimiser: torch.optim.LBFGS) -> bool:
    return _iterations_done(optimiser) > 1


def _scale_first_step(optimiser: torch.optim.LBFGS, grads: Sequence[Tensor]) -> None:
    """Give a fresh optimiser's first step unit length, as SciPy's L-BFGS-B does.

    Torch's first step is min(1, 1/‖g‖₁)·lr·g, so a gradient of 1e-8 (a plateau) moves θ by 1e-8
    and the curvature pair it yields is below torch's acceptance threshold: L-BFGS crawls.
    """
    if _iterations_done(optimiser) > 0:
        return
    g1 = float(sum(g.abs().sum() for g in grads))
    g2 = math.sqrt(float(sum((g * g).sum() for g in grads)))
    if g2 > 0.0 and math.isfinite(g2):
        optimiser.param_groups[0]["lr"] = 1.0 / (min(1.0, 1.0 / g1) * g2)


def refine_hyperparameters(
    loss_at: Callable[[float], Callable[[], Tensor]],
    params: Sequence[nn.Parameter],
    *,
    refinements: int,
    max_iterations: int,
    tolerance_floor: float = 0.0,
    keep_history: bool = False,
    progress: Callable[[float, str], None] | None = None,
) -> RefinementResult:
    """Minimise ``loss_at(r_k)()`` over ``params`` for r_k = (2/3)^{k+1}, k = 0, 1, ...

    Args:
        loss_at: builds the loss for a relative tolerance r (the loss runs the stopped Cholesky
            at r and returns a differentiable scalar; it may raise NumericalError).
        params: the raw parameters (modified in place; the last accepted point on return).
        refinements: the number of accepted restarts to run (0 skips the fit).
        max_iterations: L-BFGS iteration budget over all restarts.
        tolerance_floor: r_k = max((2/3)^{k+1}, tolerance_floor) while ftol keeps shrinking
            [ours]; 0 (default) is the authors' schedule r = ftol, which ends in the exact GP.
        keep_history: carry the L-BFGS history from one accepted restart to the next [ours].
        progress: called with (fraction of the budget spent, status) after each iteration and
            each restart.

    Returns:
        :class:`RefinementResult`.
    """
    last = [p.detach().clone() for p in params]

    def restore() -> None:
        with torch.no_grad():
            for p, saved in zip(params, last, strict=True):
                p.copy_(saved)

    restarts = failures = iterations = 0
    loss_before = loss_after = tolerance = math.nan
    reason = "no fit requested"
    optimiser = single_step_lbfgs(params)
    while restarts < refinements:
        if failures >= MAX_FAILED_ATTEMPTS:
            reason = f"{failures} failed restarts"
            break
        if iterations >= max_iterations:
            reason = f"iteration budget {max_iterations} spent"
            break
        ftol = refinement_tolerance(restarts)
        if ftol < CONVERGED_FTOL:
            reason = f"converged: {restarts} restarts, last at r={tolerance:.3g}"
            break
        r = max(ftol, tolerance_floor)
        if not keep_history:
            optimiser.state.clear()

        def report(its: int, loss: float, done: int = iterations, r: float = r) -> None:
            if progress is not None:
                spent = (done + its) / max(max_iterations, 1)
                progress(min(spent, 1.0), f"  iteration {done + its} at r={r:.3g}: loss {loss:.6g}")

        try:
            before, after, its = _lbfgs(
                optimiser, loss_at(r), params, max_iterations - iterations, ftol, report
            )
        except NumericalError as err:
            restore()
            optimiser.state.clear()  # its history led to the failure
            failures += 1
            reason = f"restart at r={r:.3g} failed: {err}"
            continue
        iterations += max(its, 1)  # a run that stops at once still spent an evaluation
        if math.isnan(loss_before):
            loss_before = before
        if not after <= before:
            restore()
            optimiser.state.clear()
            failures += 1
            reason = f"restart at r={r:.3g} made the loss worse"
            continue
        last = [p.detach().clone() for p in params]
        restarts += 1
        stalled = after == before and r == tolerance
        loss_after, tolerance = after, r
        reason = f"{restarts} restarts, last at r={r:.3g}"
        if progress is not None:
            done = max(restarts / refinements, iterations / max(max_iterations, 1))
            progress(min(done, 1.0), f"restart {restarts} at r={r:.3g}: loss {after:.6g}")
        if stalled:  # the same objective as the last restart, and no step improved it
            reason = f"converged: no progress at r={r:.3g} after {restarts} restarts"
            break
    return RefinementResult(
        restarts > 0 or refinements == 0,
        restarts,
        failures,
        iterations,
        loss_before,
        loss_after,
        tolerance,
        reason,
    )
