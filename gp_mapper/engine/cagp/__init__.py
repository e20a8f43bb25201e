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

from .actions import Actions, BlockSparseActions, CGActions, block_layout, cg_actions
from .elbo import Elbo, cagp_elbo, evaluate_elbo, gram_factor
from .kernel_actions import kernel_action_product
from .model import CaGP, CaGPCG
from .posterior import CaGPPosterior
from .trainer import EpochRecord, TrainerConfig, TrainResult, train

__all__ = [
    "Actions",
    "BlockSparseActions",
    "CGActions",
    "CaGP",
    "CaGPCG",
    "CaGPPosterior",
    "Elbo",
    "EpochRecord",
    "TrainResult",
    "TrainerConfig",
    "block_layout",
    "cagp_elbo",
    "cg_actions",
    "evaluate_elbo",
    "gram_factor",
    "kernel_action_product",
    "train",
]
