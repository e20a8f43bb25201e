"""The computation-aware GPs' builders from a spec and their registry entries."""

from __future__ import annotations

from typing import Any

from ..core.fit import LINE_SEARCH_EVALUATIONS
from ..core.linalg import Jitter
from ..cost import FitCost
from ..exact.entry import prefit_flops
from ..model_table import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel
from .actions import dense_cg
from .model import CaGP, CaGPCG
from .settings import CagpSettings


def _cagp_arguments(spec: EngineSpec) -> dict[str, Any]:
    """The settings CaGP-Opt and CaGP-CG share."""
    cagp = spec.section(CagpSettings)
    return {
        "actions": cagp.actions,
        "epochs": cagp.epochs,
        "learning_rate": cagp.learning_rate,
        "optimizer": "lbfgs" if cagp.lbfgs else "adam",
        "validation": cagp.validation,
        "validate_every": cagp.validate_every,
        "patience": cagp.patience,
        "prefit_points": cagp.prefit_points,
        "chunk": cagp.chunk,
        "seed": spec.seed,
        "device": spec.device,
        "dtype": DTYPES[spec.dtype],
        "jitter": Jitter(spec.jitter, spec.jitter_relative),
    }


def build_cagp(spec: EngineSpec, input_dim: int) -> CaGP:
    """CaGP-Opt (Wenger et al. 2024) as the spec describes it."""
    cagp = spec.section(CagpSettings)
    return CaGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        block_order=cagp.block_order,
        **_cagp_arguments(spec),
    )


def build_cagp_cg(spec: EngineSpec, input_dim: int) -> CaGPCG:
    """CaGP-CG (Wenger et al. 2024) as the spec describes it."""
    cagp = spec.section(CagpSettings)
    return CaGPCG(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        cg_tolerance=cagp.cg_tolerance,
        **_cagp_arguments(spec),
    )


# One epoch takes as long as a product of ~8500 N² flops with block actions (CaGP-Opt: the
# kernel against every action's block and its gradient; measured 0.38 s at N 2000, 0.88 s at
# N 4000 and ~60 s at N 17 794, 512 actions: the large log is the one that matters, smaller
# ones come out below the estimate), float64, one thread. With conjugate-gradient actions
# (CaGP-CG) an epoch forms K + σ²I once (~1400 N²), runs its CG steps as dense products
# (~20 N² each: memory-bound) and the ELBO's K S and gradient (~4200 N²): 36 s at N 17 794
# with 64 actions, two threads; the final posterior is one more epoch's actions and K S.
OPT_EPOCH_FLOPS_PER_N2 = 8500.0
CG_EPOCH_FLOPS_PER_N2 = 5600.0
CG_STEP_FLOPS_PER_N2 = 20.0


def cagp_fit_cost(spec: EngineSpec, n: int, opt: bool) -> FitCost:
    """The fit's work: every epoch run (``cagp_epochs``; validation may stop it sooner). An
    L-BFGS epoch is one iteration whose line search may evaluate the ELBO up to
    ``1 + LINE_SEARCH_EVALUATIONS`` times (10 such epochs of CaGP-CG on 17 794 readings ran
    past 20 minutes against an estimate of 8 that counted one evaluation each). Once: the
    pre-fit of θ and the final posterior."""
    cagp = spec.section(CagpSettings)
    n2 = float(n) ** 2
    if opt:
        per = OPT_EPOCH_FLOPS_PER_N2 * n2
    else:
        steps = min(cagp.actions, n)
        per = (CG_EPOCH_FLOPS_PER_N2 + CG_STEP_FLOPS_PER_N2 * steps) * n2
    final = per + prefit_flops(spec, min(n, cagp.prefit_points))
    if cagp.lbfgs:
        evaluations = cagp.epochs * (1 + LINE_SEARCH_EVALUATIONS)
        return FitCost(evaluations, "ELBO evaluations (L-BFGS)", per, final)
    return FitCost(cagp.epochs, "epochs", per, final)


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    opt = name == "cagp"
    return ModelEntry(
        name,
        model_kind(name),
        "computation-aware GP (Wenger et al. 2024): variance that counts the approximation error, "
        + ("block-sparse learned actions (CaGP-Opt)" if opt else "conjugate-gradient actions"),
        build_cagp if opt else build_cagp_cg,
        CaGP.from_state if opt else CaGPCG.from_state,
        lambda n: {  # n actions span the data: the exact GP at fixed θ
            "cagp.actions": n,
            "cagp.epochs": 0,
            "cagp.prefit_points": 0,
            "cagp.validation": 0.0,
            "cagp.cg_tolerance": 0.0,
            "fit_iterations": 0,
        },
        support_label="data points",
        fit_cost=lambda spec, n: cagp_fit_cost(spec, n, opt),
        # CaGP-CG's conjugate gradients multiply a dense K + σ²I where it fits its byte cap.
        dense_points=None if opt else lambda spec, n: n if dense_cg(n) else 0,
    )
