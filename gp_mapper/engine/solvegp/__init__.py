"""SOLVE-GP: sparse variational GPs with orthogonal inducing points, fitted by SVI.

The method of Shi, Titsias & Mnih 2020 (Sparse Orthogonal Variational Inference for GPs).

Modules: ``svgp`` (the bound, one code path for the families full / solve / odvgp, whitened or
not, and the closed-form optimal q), ``init`` (k-means or greedy placement of Z and O),
``predict`` (the prediction cache with its coarse and detail layers), ``continuation`` (a fitted
posterior as the streaming engine's carried posterior) and ``model`` (the batch model).
"""

from __future__ import annotations

from .continuation import min_carried_precision, to_carried, to_online_sgp, to_streaming_state
from .init import INIT_METHODS, initial_inducing, kmeans
from .model import SolveGP, build_posterior, rescaled_kernel
from .predict import LAYER_NAMES, SolvePosterior
from .svgp import (
    FAMILIES,
    ElboTerms,
    Marginals,
    PriorFactors,
    Variational,
    VariationalParameters,
    WhitenedQ,
    elbo,
    full_elbo,
    optimal_q,
    prior_factors,
    project,
)

__all__ = [
    "FAMILIES",
    "INIT_METHODS",
    "LAYER_NAMES",
    "ElboTerms",
    "Marginals",
    "PriorFactors",
    "SolveGP",
    "SolvePosterior",
    "Variational",
    "VariationalParameters",
    "WhitenedQ",
    "build_posterior",
    "elbo",
    "full_elbo",
    "initial_inducing",
    "kmeans",
    "min_carried_precision",
    "optimal_q",
    "prior_factors",
    "project",
    "rescaled_kernel",
    "to_carried",
    "to_online_sgp",
    "to_streaming_state",
]
