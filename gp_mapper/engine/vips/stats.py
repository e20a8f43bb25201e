"""Running mean and variance of every target seen, and the i.i.d. Gaussian "noise model"."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

LOG_2PI = math.log(2.0 * math.pi)


class RunningStats(NamedTuple):
    """Count, mean and sum of squared deviations (Welford / Chan et al. parallel form)."""

    count: int
    mean: float
    m2: float

    @classmethod
    def empty(cls) -> RunningStats:
        return cls(0, 0.0, 0.0)

    def updated(self, y: Tensor) -> RunningStats:
        """The statistics after appending the batch ``y`` [N] (Chan et al.'s pairwise update)."""
        n = int(y.shape[0])
        batch_mean = float(y.mean())
        batch_m2 = float(((y - batch_mean) ** 2).sum())
        count = self.count + n
        delta = batch_mean - self.mean
        mean = self.mean + delta * n / count
        m2 = self.m2 + batch_m2 + self.count * n * delta * delta / count
        return RunningStats(count, mean, m2)

    @property
    def variance(self) -> float:
        """Unbiased variance; 1.0 until two targets have been seen (no information yet)."""
        return self.m2 / (self.count - 1) if self.count > 1 else 1.0


def noise_model_log_likelihood(y: Tensor, stats: RunningStats) -> float:
    """``Σᵢ log N(yᵢ; μ̂, σ̂²)`` of a batch under running statistics that already include it."""
    var = max(stats.variance, torch.finfo(torch.float64).tiny)
    r = y - stats.mean
    return float(-0.5 * y.shape[0] * (LOG_2PI + math.log(var)) - 0.5 * (r @ r) / var)
