"""The evidence of past windows about θ, carried as a quadratic in the raw parameters.

The online bound carries the old data's evidence about the function (the carried posterior),
not about θ: a window's fit weighs θ by that window alone, and one window of a field with
between-pass error can pull the field variance an order of magnitude from what every window before
it supported (the potential stream of ``benchmarks/vector_field.py``: 114 → 1167 µT²). So after each
fit the curvature of the window's bound at the fitted raw θ is added to a running precision (a
Laplace approximation of each window's evidence, summed as for independent windows), and the next
fit maximises its bound plus ``−½ (φ − φ̂)ᵀ H (φ − φ̂)`` around the last fitted φ̂: the sequential
Bayesian update of θ in its Laplace form (elastic weight consolidation in the deep-learning
literature). Negative curvature (a saddle or a flat direction at a stopped fit) carries no evidence
and is clipped to zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn


def flat(params: Sequence[nn.Parameter]) -> Tensor:
    """The raw parameters as one vector [P]."""
    return torch.cat([p.reshape(-1) for p in params])


class ThetaMemory(NamedTuple):
    """A Gaussian in the raw parameters: centre φ̂ [P] and precision H [P, P] (PSD)."""

    centre: Tensor
    precision: Tensor

    def log_density(self, params: Sequence[nn.Parameter]) -> Tensor:
        """``−½ (φ − φ̂)ᵀ H (φ − φ̂)`` at the parameters' current values (differentiable)."""
        d = flat(params) - self.centre
        return -0.5 * d @ (self.precision @ d)

    def absorbed(
        self, objective: Callable[[], Tensor], params: Sequence[nn.Parameter]
    ) -> ThetaMemory:
        """The memory after a window whose bound is ``objective()`` (nats, to maximise) was
        fitted: centred on the parameters' values now, precision plus the window's curvature."""
        return ThetaMemory(
            flat(params).detach().clone(), self.precision + curvature(objective, params)
        )

    @classmethod
    def first(cls, objective: Callable[[], Tensor], params: Sequence[nn.Parameter]) -> ThetaMemory:
        return cls(flat(params).detach().clone(), curvature(objective, params))


def curvature(objective: Callable[[], Tensor], params: Sequence[nn.Parameter]) -> Tensor:
    """``−∇² objective`` at the parameters' values [P, P], symmetrised, eigenvalues ≥ 0."""
    value = objective()
    grads = torch.autograd.grad(value, params, create_graph=True)
    g = torch.cat([gr.reshape(-1) for gr in grads])
    rows = []
    for i in range(g.shape[0]):
        row = torch.autograd.grad(g[i], params, retain_graph=i + 1 < g.shape[0])
        rows.append(torch.cat([r.reshape(-1) for r in row]))
    hessian = torch.stack(rows).detach()
    h = -0.5 * (hessian + hessian.T)
    eigenvalues, vectors = torch.linalg.eigh(h)
    return (vectors * eigenvalues.clamp(min=0.0)) @ vectors.T
