"""Warm the engine up before real data arrives.

torch loads parts of itself on first use: the first ``torch.optim.LBFGS`` imports
``torch._dynamo``, which took 1-5 s on a 2-core machine. In a node that stall lands on the first
window, the windows behind it pile up and are merged or dropped. One throwaway update on a
tiny synthetic batch pays it at start-up instead.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .auxiliary import NS_PER_S, auxiliary_columns, yaw_to_quaternion
from .model import Model
from .registry import build_model, model_entry
from .spec import EngineSpec

WARMUP_POINTS = 32
# Seconds between the throwaway readings of a model that reads time (gam_stream).
WARMUP_PERIOD_S = 0.1


def warm_up(spec: EngineSpec, input_dim: int) -> float:
    """Run two updates and a prediction on a throwaway engine built from ``spec``.

    Returns:
        Seconds taken.
    """
    start = time.perf_counter()
    engine = build_model(spec, input_dim)
    vector = model_entry(spec.model).target == "vector"
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):  # the first batch, then an online one (carried posterior)
        X = torch.rand(WARMUP_POINTS, input_dim, generator=generator, dtype=torch.float64)
        noise = torch.randn(WARMUP_POINTS, generator=generator, dtype=torch.float64)
        y = torch.sin(3.0 * X).sum(-1) + 0.1 * noise
        if vector:  # a field model takes the three components of each reading
            y = torch.stack([y, torch.cos(3.0 * X).sum(-1), 0.5 * y], dim=-1)
        engine.update(_with_auxiliary(engine, X), y)
    if engine.posterior is not None:
        engine.predict(torch.zeros(4, input_dim, dtype=torch.float64))
    return time.perf_counter() - start


def _with_auxiliary(engine: Model, X: torch.Tensor) -> torch.Tensor:
    """X with the columns a model with nuisance components reads after the position
    (``auxiliary_inputs``), built as a window's are, from readings a tenth of a second apart
    whose poses sweep the heading once round."""
    if not engine.auxiliary_inputs:
        return X
    n = X.shape[0]
    stamps_ns = np.arange(n, dtype=np.int64) * round(WARMUP_PERIOD_S * NS_PER_S)
    orientation = yaw_to_quaternion(np.linspace(0.0, 2.0 * np.pi, n, endpoint=False))
    extra = auxiliary_columns(engine.auxiliary_inputs, X.numpy(), stamps_ns, orientation)
    return torch.cat([X, torch.from_numpy(extra).to(X.dtype)], dim=1)
