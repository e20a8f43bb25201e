"""Additive sparse variational GPs (seed 003): declared components, coupled posteriors.

``component.py`` (a component: name, kernel on its columns, inducing inputs), ``zero_mean.py``
(the SE kernel projected to zero mean over an interval), ``blocks.py`` (per-component kernel
blocks), ``precision.py`` (the paper's precision form), ``whitened.py`` (mean field and full
coupled), ``posterior.py`` (prediction per component and per subset), ``model.py`` (the batch
model ``gam``).
"""

from .component import Component, component_kernel_from_spec, grid_inducing
from .model import POSTERIOR_FORMS, AdditiveGP
from .posterior import AdditivePosterior, PrecisionPosterior, WhitenedPosterior
from .precision import default_rank, optimal_alpha, precision_elbo
from .whitened import optimal_whitened_q, titsias_bound, whitened_elbo, whitened_features
from .zero_mean import ZeroMeanSE

__all__ = [
    "POSTERIOR_FORMS",
    "AdditiveGP",
    "AdditivePosterior",
    "Component",
    "PrecisionPosterior",
    "WhitenedPosterior",
    "ZeroMeanSE",
    "component_kernel_from_spec",
    "default_rank",
    "grid_inducing",
    "optimal_alpha",
    "optimal_whitened_q",
    "precision_elbo",
    "titsias_bound",
    "whitened_elbo",
    "whitened_features",
]
