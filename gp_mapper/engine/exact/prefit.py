"""θ from an exact GP on a random subset: the start the batch models' long fits refine.

Adam or a few full-batch epochs move the kernel's variance slowly from a unit start on data
whose variance is ~100 µT² (a magnetic map's), so SOLVE-GP and the computation-aware GPs first
fit θ by L-BFGS on the exact marginal likelihood of a few thousand random points: seconds, and a
θ near the whole log's.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.noise import GaussianNoise
from ..model import ProgressCallback
from .gp import ExactGP

# L-BFGS iterations of the pre-fit's exact GP.
PREFIT_ITERATIONS = 100
# The subset is drawn from a stream of its own (the model's seed plus this), so a model's split
# and minibatch order are the same with or without the pre-fit.
PREFIT_SEED_OFFSET = 7919


def prefit_theta(
    kernel: Kernel,
    noise: GaussianNoise,
    X: Tensor,
    y: Tensor,
    points: int,
    seed: int,
    progress: ProgressCallback | None = None,
) -> tuple[Kernel, GaussianNoise, dict[str, Any]]:
    """θ fitted on ``points`` random rows of (X, y); the given θ if the fit fails.

    Args:
        seed: the model's seed (the subset's stream is ``seed + PREFIT_SEED_OFFSET``).

    Returns:
        (kernel, noise, details): the pre-fit's θ (new objects on X's device and dtype) and
        what the report says of it (points, accepted, reason, seconds).
    """
    start = time.perf_counter()
    n = min(points, X.shape[0])
    generator = torch.Generator().manual_seed(seed + PREFIT_SEED_OFFSET)
    idx = torch.randperm(X.shape[0], generator=generator)[:n].to(X.device)
    if progress is not None:
        progress(0.0, f"pre-fit of θ: exact GP on {n} points")
    gp = ExactGP(
        kernel, float(noise.variance.detach()), X[idx], y[idx], fit_iterations=PREFIT_ITERATIONS
    )
    # Its evaluations report at the pre-fit's start: the long fit's progress comes after.
    report = gp.fit(progress=None if progress is None else lambda _, status: progress(0.0, status))
    details = {
        "points": n,
        "accepted": report.accepted,
        "reason": report.reason,
        "seconds": time.perf_counter() - start,
    }
    if not report.accepted:
        return kernel, noise, details
    return gp.kernel, gp.noise, details
