"""Adam (Kingma & Ba 2015, Algorithm 1) over a list of tensors, with the paper's defaults.

``torch.optim`` imports ``torch._dynamo`` on its first use, seconds of start-up on a small
machine for an update of a few lines; the fit needs nothing else from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

# The paper's defaults (Kingma & Ba 2015, Algorithm 1), also torch.optim.Adam's.
BETA1 = 0.9
BETA2 = 0.999
EPSILON = 1e-8


class Adam:
    """Adam on ``params`` (tensors with ``requires_grad``), step size ``learning_rate``."""

    def __init__(self, params: Sequence[Tensor], learning_rate: float) -> None:
        self.params = list(params)
        self.learning_rate = learning_rate
        self.steps = 0
        self._m = [torch.zeros_like(p) for p in self.params]
        self._v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update from the gradients in ``.grad`` (a parameter without one is skipped)."""
        self.steps += 1
        c1 = 1.0 - BETA1**self.steps
        c2 = 1.0 - BETA2**self.steps
        for p, m, v in zip(self.params, self._m, self._v, strict=True):
            if p.grad is None:
                continue
            m.mul_(BETA1).add_(p.grad, alpha=1.0 - BETA1)
            v.mul_(BETA2).addcmul_(p.grad, p.grad, value=1.0 - BETA2)
            p.sub_(self.learning_rate * (m / c1) / ((v / c2).sqrt() + EPSILON))
