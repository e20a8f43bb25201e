"""Computation-aware GPs (seed 001): exact inference on I linear projections Sᵀy of the data.

Modules: ``kernel_actions`` (the chunked ``K S`` op with its recomputing backward),
``actions`` (learned block-sparse actions and CG actions), ``elbo`` (the loss of eq. 11 in
its stable form), ``posterior`` (the prediction cache, with the computational share of the
variance), ``trainer`` (Adam with a linear schedule, L-BFGS, early stopping) and ``model``
(the batch models ``cagp`` and ``cagp_cg``).
"""

from .actions import (
    Actions,
    BlockSparseActions,
    CGActions,
    block_layout,
    cg_actions,
)
from .elbo import Elbo, cagp_elbo, evaluate_elbo, gram_factor
from .kernel_actions import kernel_action_product
from .posterior import CaGPPosterior

__all__ = [
    "Actions",
    "BlockSparseActions",
    "CGActions",
    "CaGPPosterior",
    "Elbo",
    "block_layout",
    "cagp_elbo",
    "cg_actions",
    "evaluate_elbo",
    "gram_factor",
    "kernel_action_product",
]
