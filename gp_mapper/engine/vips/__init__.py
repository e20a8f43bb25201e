"""The continual sparse GP on the Bui et al. online bound with adaptive inducing points.

VIPS, Pescador-Barrios et al. 2024 (Adjusting Model Size in Continual Gaussian Processes).

Selectors (VIPS, conditional variance, OIPS, fixed size) choose the inducing set of each batch;
the bound, its carried posterior and the prediction cache are this model's own.
"""

from __future__ import annotations

from .bound import online_bound, reference_bound, upper_bound
from .online_sgp import OnlineSparseGP
from .options import StreamOptions
from .posterior import CarriedPosterior, Posterior
from .report import UpdateReport
from .selectors import (
    ConditionalVariance,
    FixedSize,
    Oips,
    Selection,
    SelectionProblem,
    Selector,
    Vips,
    selector_from_spec,
)
from .stats import RunningStats, noise_model_log_likelihood

__all__ = [
    "CarriedPosterior",
    "ConditionalVariance",
    "FixedSize",
    "Oips",
    "OnlineSparseGP",
    "Posterior",
    "RunningStats",
    "Selection",
    "SelectionProblem",
    "Selector",
    "StreamOptions",
    "UpdateReport",
    "Vips",
    "noise_model_log_likelihood",
    "online_bound",
    "reference_bound",
    "selector_from_spec",
    "upper_bound",
]
