"""The Adaptive Cholesky GP: an exact GP on the random subset its bounds say suffices.

The method of Bartels et al. 2023 (Adaptive Cholesky Gaussian Processes, arXiv:2202.10769).

Modules: ``bounds`` (the corrected EvaluateBounds and the stopping rule), ``cholesky`` (the
blocked Cholesky that stops), ``objective`` (estimators of log p(y) and the fitting objective
with its closed-form backward), ``refinement`` (L-BFGS with the r = (2/3)^{k+1} schedule) and
``model`` (the batch model).
"""

from __future__ import annotations

from .bounds import BlockBounds, BlockStatistics, block_statistics, evaluate_bounds, should_stop
from .cholesky import StoppedCholesky, stopped_cholesky
from .model import AdaptiveCholeskyGP
from .objective import (
    SubsetDataFit,
    acgp_objective,
    extrapolated_log_evidence,
    midpoint_log_evidence,
    subset_data_fit,
    subset_matrix,
)
from .refinement import RefinementResult, refine_hyperparameters, refinement_tolerance

__all__ = [
    "AdaptiveCholeskyGP",
    "BlockBounds",
    "BlockStatistics",
    "RefinementResult",
    "StoppedCholesky",
    "SubsetDataFit",
    "acgp_objective",
    "block_statistics",
    "evaluate_bounds",
    "extrapolated_log_evidence",
    "midpoint_log_evidence",
    "refine_hyperparameters",
    "refinement_tolerance",
    "should_stop",
    "stopped_cholesky",
    "subset_data_fit",
    "subset_matrix",
]
