"""The Adaptive Cholesky GP's builder from a spec and its registry entry."""

from __future__ import annotations

from ..core.linalg import Jitter
from ..cost import FitCost
from ..model_table import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel
from .model import AdaptiveCholeskyGP
from .settings import AcgpSettings


def build_acgp(spec: EngineSpec, input_dim: int) -> AdaptiveCholeskyGP:
    """The Adaptive Cholesky GP (Bartels et al.) the spec describes."""
    acgp = spec.section(AcgpSettings)
    return AdaptiveCholeskyGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        block_size=acgp.block_size,
        initial_block_size=acgp.initial_block or None,
        rel_tol=acgp.rel_tol,
        abs_tol=acgp.abs_tol,
        max_points=acgp.max_points or None,
        fit_iterations=spec.fit_iterations,
        refinements=acgp.refinements,
        seed=spec.seed,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


# One L-BFGS iteration of the refinement (its evaluations of the stopped Cholesky over m
# points and their gradients) takes as long as a product of ~9 m³ flops (measured at m
# 1000-2000 with a rule that never fires, float64, one thread).
ITERATION_FLOPS_PER_M3 = 9.0


def factor_points(spec: EngineSpec, n: int) -> int:
    """The most points the factor holds for N samples: the cap, else every sample."""
    acgp = spec.section(AcgpSettings)
    return min(n, acgp.max_points) if acgp.max_points else n


def acgp_fit_cost(spec: EngineSpec, n: int) -> FitCost:
    """The fit's work if the stopping rule never fires: the refinement's iteration budget
    (``fit_iterations`` over all restarts), each over the points its factor may hold."""
    per = ITERATION_FLOPS_PER_M3 * float(factor_points(spec, n)) ** 3
    return FitCost(spec.fit_iterations, "L-BFGS iterations", per, per / 3.0)


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        name,
        model_kind(name),
        "Adaptive Cholesky GP (Bartels et al.): the exact GP on the subset its evidence bounds "
        "say suffices",
        build_acgp,
        AdaptiveCholeskyGP.from_state,
        lambda n: {"acgp.rel_tol": 0.0, "fit_iterations": 0},  # never stops: all n kept
        support_label="kept points",
        # its factor grows until the bounds agree: at most the cap, else every sample
        dense_points=factor_points,
        fit_cost=acgp_fit_cost,
    )
