"""SOLVE-GP: sparse variational GPs with orthogonal inducing points, fitted by SVI.

The method of Shi, Titsias & Mnih 2020 (Sparse Orthogonal Variational Inference for GPs).

Modules: ``svgp`` (the bound, one code path for the families full / solve / odvgp, whitened or
not, and the closed-form optimal q), ``init`` (k-means or greedy placement of Z and O),
``predict`` (the prediction cache with its coarse and detail layers), ``continuation`` (a fitted
posterior as the streaming engine's carried posterior) and ``model`` (the batch model).
"""

from __future__ import annotations

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "FAMILIES": ".svgp",
    "INIT_METHODS": ".init",
    "LAYER_NAMES": ".predict",
    "ElboTerms": ".svgp",
    "Marginals": ".svgp",
    "PriorFactors": ".svgp",
    "SolveGP": ".model",
    "SolvePosterior": ".predict",
    "Variational": ".svgp",
    "VariationalParameters": ".svgp",
    "WhitenedQ": ".svgp",
    "build_posterior": ".model",
    "elbo": ".svgp",
    "full_elbo": ".svgp",
    "initial_inducing": ".init",
    "kmeans": ".init",
    "min_carried_precision": ".continuation",
    "optimal_q": ".svgp",
    "prior_factors": ".svgp",
    "project": ".svgp",
    "rescaled_kernel": ".model",
    "to_carried": ".continuation",
    "to_online_sgp": ".continuation",
    "to_streaming_state": ".continuation",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
