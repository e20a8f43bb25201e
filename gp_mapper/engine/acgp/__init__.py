"""The Adaptive Cholesky GP: an exact GP on the random subset its bounds say suffices.

The method of Bartels et al. 2023 (Adaptive Cholesky Gaussian Processes, arXiv:2202.10769).

Modules: ``bounds`` (the corrected EvaluateBounds and the stopping rule), ``cholesky`` (the
blocked Cholesky that stops), ``objective`` (estimators of log p(y) and the fitting objective
with its closed-form backward), ``refinement`` (L-BFGS with the r = (2/3)^{k+1} schedule) and
``model`` (the batch model).
"""

from __future__ import annotations

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "AdaptiveCholeskyGP": ".model",
    "BlockBounds": ".bounds",
    "BlockStatistics": ".bounds",
    "RefinementResult": ".refinement",
    "StoppedCholesky": ".cholesky",
    "SubsetDataFit": ".objective",
    "acgp_objective": ".objective",
    "block_statistics": ".bounds",
    "evaluate_bounds": ".bounds",
    "extrapolated_log_evidence": ".objective",
    "midpoint_log_evidence": ".objective",
    "refine_hyperparameters": ".refinement",
    "refinement_tolerance": ".refinement",
    "should_stop": ".bounds",
    "stopped_cholesky": ".cholesky",
    "subset_data_fit": ".objective",
    "subset_matrix": ".objective",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
