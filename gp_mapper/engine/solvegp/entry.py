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


def build_solvegp(spec: EngineSpec, input_dim: int) -> SolveGP:
    """SOLVE-GP (Shi et al. 2020) as the spec describes it."""
    return SolveGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        num_inducing=spec.solve_inducing,
        num_orthogonal=spec.solve_orthogonal,
        family=spec.solve_family,
        whiten=spec.solve_whiten,
        batch_size=spec.solve_batch_size,
        epochs=spec.solve_epochs,
        learning_rate=spec.solve_learning_rate,
        init=spec.solve_init,
        validation=spec.solve_validation,
        patience=spec.solve_patience,
        warm_start=spec.solve_warm_start,
        optimal_q=spec.solve_optimal_q,
        standardise=spec.solve_standardise,
        train_inducing=spec.solve_train_inducing,
        train_hyperparameters=spec.fit_iterations > 0,
        prefit_points=spec.solve_prefit_points,
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
    after the exact pre-fit of θ on ``solve_prefit_points``."""
    m = spec.solve_inducing + spec.solve_orthogonal
    per = EPOCH_FLOPS_PER_SAMPLE_M2 * float(n) * m * m
    prefit = prefit_flops(spec, min(n, spec.solve_prefit_points))
    return FitCost(spec.solve_epochs, "epochs", per, prefit)


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        "solvegp",
        model_kind("solvegp"),
        "SOLVE-GP: sparse variational GP with orthogonal inducing points, fitted by minibatch "
        "SVI, continued live by the streaming model (Shi et al. 2020)",
        build_solvegp,
        SolveGP.from_state,
        lambda n: {
            "solve_family": "full",  # Z = X with q at its optimum: the exact GP at fixed θ
            "solve_inducing": n,
            "solve_orthogonal": 0,
            "solve_epochs": 0,
            "solve_optimal_q": True,
            "solve_validation": 0.0,
            "fit_iterations": 0,
        },
        solvegp_streaming_state,
        fit_cost=solvegp_fit_cost,
    )
