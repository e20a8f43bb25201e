"""The continual sparse GP on the Bui et al. online bound with adaptive inducing points.

VIPS, Pescador-Barrios et al. 2024 (Adjusting Model Size in Continual Gaussian Processes).

Selectors (VIPS, conditional variance, OIPS, fixed size) choose the inducing set of each batch;
the bound, its carried posterior and the prediction cache are this model's own.
"""

from __future__ import annotations

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "StreamOptions": ".options",
    "CarriedPosterior": ".posterior",
    "ConditionalVariance": ".selectors",
    "FixedSize": ".selectors",
    "Oips": ".selectors",
    "OnlineSparseGP": ".online_sgp",
    "Posterior": ".posterior",
    "RunningStats": ".stats",
    "Selection": ".selectors",
    "SelectionProblem": ".selectors",
    "Selector": ".selectors",
    "UpdateReport": ".report",
    "Vips": ".selectors",
    "noise_model_log_likelihood": ".stats",
    "online_bound": ".bound",
    "reference_bound": ".bound",
    "selector_from_spec": ".selectors",
    "upper_bound": ".bound",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
