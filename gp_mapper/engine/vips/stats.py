"""Running mean and variance of every target seen, and the i.i.d. Gaussian "noise model".

Targets may fall into groups with their own levels (the three components of a field reading:
means of -22, -2.5 and -43 µT on the Aalto runs). Pooled into one mean, the spread between
the levels would pass for variation of the field: the hyperprior would centre the kernel
variance on it and the noise model would be a straw man. So each group keeps its own mean, and
the variance is the pooled within-group one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
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


class GroupedStats(NamedTuple):
    """One :class:`RunningStats` per target group; a single group is :class:`RunningStats`."""

    groups: tuple[RunningStats, ...]

    @classmethod
    def empty(cls, num_groups: int = 1) -> GroupedStats:
        if num_groups < 1:
            raise ValueError(f"need at least one target group; got {num_groups}")
        return cls((RunningStats.empty(),) * num_groups)

    @property
    def count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def variance(self) -> float:
        """Pooled within-group unbiased variance; 1.0 until a group has two targets."""
        seen = [g for g in self.groups if g.count > 0]
        dof = sum(g.count for g in seen) - len(seen)
        return sum(g.m2 for g in seen) / dof if dof > 0 else 1.0

    def updated(self, y: Tensor, group: Tensor | None = None) -> GroupedStats:
        """The statistics after appending ``y`` [N] whose rows belong to ``group`` [N]
        (indices into the groups; None: all in group 0)."""
        if group is None:
            if len(self.groups) != 1:
                raise ValueError(f"{len(self.groups)} target groups need a group per target")
            return GroupedStats((self.groups[0].updated(y),))
        return GroupedStats(
            tuple(
                g.updated(y[group == i]) if bool((group == i).any()) else g
                for i, g in enumerate(self.groups)
            )
        )

    def log_likelihood(self, y: Tensor, group: Tensor | None = None) -> float:
        """The noise model ``Σᵢ log N(yᵢ; μ̂_g(i), σ̂²)`` of a batch already included; with one
        group it is :func:`noise_model_log_likelihood`."""
        if group is None:
            return noise_model_log_likelihood(y, self.groups[0])
        var = max(self.variance, torch.finfo(torch.float64).tiny)
        means = torch.tensor([g.mean for g in self.groups], dtype=y.dtype, device=y.device)
        r = y - means[group]
        return float(-0.5 * y.shape[0] * (LOG_2PI + math.log(var)) - 0.5 * (r @ r) / var)

    def to_array(self) -> np.ndarray:
        """[3] (count, mean, m2) for one group (the format of older states), else [G, 3]."""
        rows = np.array([[g.count, g.mean, g.m2] for g in self.groups], dtype=np.float64)
        return rows[0] if len(self.groups) == 1 else rows

    @classmethod
    def from_array(cls, array: np.ndarray) -> GroupedStats:
        rows = np.asarray(array, dtype=np.float64).reshape(-1, 3)
        if rows.shape[0] < 1 or not np.isfinite(rows).all() or (rows[:, 0] < 0).any():
            raise ValueError(f"malformed target statistics {rows.tolist()}")
        return cls(tuple(RunningStats(int(c), float(m), float(q)) for c, m, q in rows))
