"""SOLVE-GP's builder from a spec, the stream that continues a fit, and its registry entry."""

from __future__ import annotations

import numpy as np

from ..core.linalg import Jitter
from ..cost import FitCost
from ..exact.entry import prefit_flops
from ..model_table import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel, build_selector, stream_options, vips_options
from .continuation import to_streaming_state
from .model import SolveGP
from .settings import SolveGpSettings


def build_solvegp(spec: EngineSpec, input_dim: int) -> SolveGP:
    """SOLVE-GP (Shi et al. 2020) as the spec describes it."""
    solvegp = spec.section(SolveGpSettings)
    return SolveGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        num_inducing=solvegp.inducing,
        num_orthogonal=solvegp.orthogonal,
        family=solvegp.family,
        whiten=solvegp.whiten,
        batch_size=solvegp.batch_size,
        epochs=solvegp.epochs,
        learning_rate=solvegp.learning_rate,
        init=solvegp.init,
        validation=solvegp.validation,
        patience=solvegp.patience,
        warm_start=solvegp.warm_start,
        optimal_q=solvegp.optimal_q,
        standardise=solvegp.standardise,
        train_inducing=solvegp.train_inducing,
        train_hyperparameters=spec.fit_iterations > 0,
        prefit_points=solvegp.prefit_points,
        seed=spec.seed,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


def solvegp_streaming_state(model: SolveGP, spec: EngineSpec) -> dict[str, np.ndarray]:
    """A fitted SOLVE-GP as the state of the stream that continues it, with the spec's
    streaming settings (selector, cap, hyperprior, outlier screen, neighbourhood fit, fit
    budget); θ, the jitter, the device and the dtype are the fit's.

    The stream keeps the fit's θ (``fit_iterations`` 0): θ was fitted on the whole log, and a
    window's fit against a carried posterior that summarises it ran θ off (on the Aalto run 6
    after runs 1-5: the lengthscale 0.52 m onto its floor or to 0.02-0.04 m, the kernel
    variance to 2·10⁸ µT², the map hundreds of µT off).
    """
    options = {**stream_options(spec), **vips_options(spec), "fit_iterations": 0}
    for own in ("device", "dtype", "jitter"):  # the fit's
        del options[own]
    return to_streaming_state(model, build_selector(spec), **options)


# One epoch (every sample once, in minibatches) takes as long as a product of ~20 flops per
# sample and squared inducing variable (M + O)² (measured 0.89 s at N 2000, 1.7 s at N 4000,
# M = O = 512, float64, one thread).
EPOCH_FLOPS_PER_SAMPLE_M2 = 20.0


def solvegp_fit_cost(spec: EngineSpec, n: int) -> FitCost:
    """The fit's work: every epoch run (``solve_epochs``; validation may stop it sooner),
    after the exact pre-fit of θ on ``solvegp.prefit_points``."""
    solvegp = spec.section(SolveGpSettings)
    m = solvegp.inducing + solvegp.orthogonal
    per = EPOCH_FLOPS_PER_SAMPLE_M2 * float(n) * m * m
    prefit = prefit_flops(spec, min(n, solvegp.prefit_points))
    return FitCost(solvegp.epochs, "epochs", per, prefit)


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        name,
        model_kind(name),
        "SOLVE-GP: sparse variational GP with orthogonal inducing points, fitted by minibatch "
        "SVI, continued live by the streaming model (Shi et al. 2020)",
        build_solvegp,
        SolveGP.from_state,
        lambda n: {
            "solvegp.family": "full",  # Z = X with q at its optimum: the exact GP at fixed θ
            "solvegp.inducing": n,
            "solvegp.orthogonal": 0,
            "solvegp.epochs": 0,
            "solvegp.optimal_q": True,
            "solvegp.validation": 0.0,
            "fit_iterations": 0,
        },
        solvegp_streaming_state,
        fit_cost=solvegp_fit_cost,
    )
