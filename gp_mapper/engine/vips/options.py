"""The streaming engine's options, as one object the models that run it pass on.

The three-axis model (``potential``) and the streamed additive map (``gam.stream``) run
:class:`~.online_sgp.OnlineSparseGP` over tagged rows of their own; they take these options
whole instead of re-listing each one. The defaults are the settings table's, as the engine's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from ..core.linalg import JITTER_LADDER, Jitter
from .online_sgp import (
    DEFAULT_FIT_ITERATIONS,
    DEFAULT_MAX_INDUCING,
    DEFAULT_OUTLIER_Z,
    DEFAULT_PASS_NOISE_VARIANCE,
)


@dataclass(frozen=True)
class StreamOptions:
    """Keyword arguments of :class:`~.online_sgp.OnlineSparseGP` beyond kernel, noise and
    selector (see there for each)."""

    device: str | torch.device = "auto"
    dtype: torch.dtype = torch.float64
    max_inducing: int = DEFAULT_MAX_INDUCING
    fit_iterations: int = DEFAULT_FIT_ITERATIONS
    jitter: float | Jitter = JITTER_LADDER[0]
    seed: int = 0
    hyperprior_scale: float = 0.0
    outlier_z: float = DEFAULT_OUTLIER_Z
    pass_noise_variance: float = DEFAULT_PASS_NOISE_VARIANCE
    theta_memory: bool = False
    local_fit_inducing: int = 0
    fit_max_seconds: float = 0.0
    cell_size: float = 0.0
    cell_columns: int = 0
    cell_direction_columns: int = 0

    def as_kwargs(self) -> dict[str, Any]:
        """The options as ``OnlineSparseGP``'s keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
