"""Computation-aware GPs: exact inference on I linear projections Sᵀy of the data.

The method of Wenger et al. 2024 (Computation-Aware Gaussian Processes: Model Selection and
Linear-Time Inference).

Modules: ``kernel_actions`` (the chunked ``K S`` op with its recomputing backward),
``actions`` (learned block-sparse actions and CG actions), ``elbo`` (the loss of eq. 11 in
its stable form), ``posterior`` (the prediction cache, with the computational share of the
variance), ``trainer`` (Adam with a linear schedule, L-BFGS, early stopping) and ``model``
(the batch models ``cagp`` and ``cagp_cg``).
"""

from __future__ import annotations

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "Actions": ".actions",
    "BlockSparseActions": ".actions",
    "CGActions": ".actions",
    "CaGP": ".model",
    "CaGPCG": ".model",
    "CaGPPosterior": ".posterior",
    "Elbo": ".elbo",
    "EpochRecord": ".trainer",
    "TrainResult": ".trainer",
    "TrainerConfig": ".trainer",
    "block_layout": ".actions",
    "cagp_elbo": ".elbo",
    "cg_actions": ".actions",
    "evaluate_elbo": ".elbo",
    "gram_factor": ".elbo",
    "kernel_action_product": ".kernel_actions",
    "train": ".trainer",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
