"""The exact GP's builder from a spec and its registry entry."""

from __future__ import annotations

from ..core.linalg import Jitter
from ..registry import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel
from .gp import ExactGP


def build_exact(spec: EngineSpec, input_dim: int) -> ExactGP:
    """The exact GP the spec describes."""
    return ExactGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        fit_iterations=spec.fit_iterations,
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        "exact",
        model_kind("exact"),
        "exact GP on all the data (O(N³): a reference, for logs of a few thousand samples)",
        build_exact,
        ExactGP.from_state,
        lambda n: {"fit_iterations": 0},
        support_label="data points",
        dense_points=lambda spec, n: n,
    )
