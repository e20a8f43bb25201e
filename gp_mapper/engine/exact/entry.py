"""The exact GP's builder from a spec and its registry entry."""

from __future__ import annotations

from ..core.fit import max_evaluations
from ..core.linalg import Jitter
from ..cost import FitCost
from ..model_table import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel
from .gp import ExactGP
from .prefit import PREFIT_ITERATIONS


def build_exact(spec: EngineSpec, input_dim: int) -> ExactGP:
    """The exact GP the spec describes."""
    return ExactGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        fit_iterations=spec.fit_iterations,
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


# One evaluation of log p(y) and its gradient (a Cholesky of the N × N matrix, its backward
# pass and the kernel's) takes as long as a product of ~8 N³ flops (measured at N 1000-2000,
# float64, one thread: 7.5-9); the posterior's factorisation after the fit a third of one.
EVALUATION_FLOPS_PER_N3 = 8.0


def exact_fit_cost(spec: EngineSpec, n: int) -> FitCost:
    """The fit's work: its L-BFGS evaluations, each of the N × N matrix (``cost.py``)."""
    per = EVALUATION_FLOPS_PER_N3 * float(n) ** 3
    return FitCost(max_evaluations(spec.fit_iterations), "L-BFGS evaluations", per, per / 3.0)


def prefit_flops(spec: EngineSpec, points: int) -> float:
    """The work of ``prefit_theta`` on ``points`` samples (0 when off)."""
    if points <= 0:
        return 0.0
    return exact_fit_cost(spec.replace(fit_iterations=PREFIT_ITERATIONS), points).flops


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        name,
        model_kind(name),
        "exact GP on all the data (O(N³): a reference, for logs of a few thousand samples)",
        build_exact,
        ExactGP.from_state,
        lambda n: {"fit_iterations": 0},
        support_label="data points",
        dense_points=lambda spec, n: n,
        fit_cost=exact_fit_cost,
    )
