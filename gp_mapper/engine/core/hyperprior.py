"""An optional weak log-normal hyperprior that keeps the per-batch fits physically sensible.

The paper fits θ by maximum likelihood on each batch's bound. On a robot path a batch covers a
few metres, where a field can be explained either by short-scale anomalies or by a huge,
long-lengthscale variance; the authors' own run drifts to a Matérn variance of ~56 000 µT² and
a 72 µT error mid-stream. A log-normal prior (MAP instead of ML) anchors each scale at a
data-driven centre, softly: ``scale`` is the standard deviation in log space.

Centres: a stationary kernel's variance at the running variance of the targets (the field's
spread around its mean is what that kernel explains); every other hyperparameter at its
initial value. The noise variance is left free: a batch identifies it well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from .kernels import Kernel


@dataclass(frozen=True)
class LogNormalHyperprior:
    """``log θ ~ N(log centre, scale²)`` for each named hyperparameter.

    Args:
        scale: standard deviation in log space (e.g. 1.0: a factor e is one standard deviation).
        centres: the centre of each hyperparameter by name (``Kernel.hyperparameters`` keys).
    """

    scale: float
    centres: Mapping[str, float]

    def log_density(self, kernel: Kernel) -> Tensor:
        total = None
        for name, value in kernel.hyperparameters().items():
            centre = self.centres.get(name)
            if centre is None or centre <= 0.0:
                continue
            z = (
                torch.log(value) - torch.log(torch.as_tensor(centre, dtype=value.dtype))
            ) / self.scale
            term = -0.5 * (z * z).sum()
            total = term if total is None else total + term
        return total if total is not None else torch.zeros(())
