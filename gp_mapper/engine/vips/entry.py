"""The VIPS model's builder from a spec and its registry entry."""

from __future__ import annotations

from ..model_table import ModelEntry, model_kind
from ..spec import EngineSpec, build_kernel, build_selector, stream_options, vips_options
from .online_sgp import OnlineSparseGP


def build_online_sgp(spec: EngineSpec, input_dim: int) -> OnlineSparseGP:
    """The streaming VIPS model (Pescador-Barrios et al.) the spec describes."""
    return OnlineSparseGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        build_selector(spec),
        **stream_options(spec),
        **vips_options(spec),
        cell_columns=input_dim,  # every input is a position
    )


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        name,
        model_kind(name),
        "continual sparse GP, VIPS inducing points (Pescador-Barrios et al.) on the Bui et al. "
        "online bound",
        build_online_sgp,
        OnlineSparseGP.from_state,
        lambda n: {
            "vips.selector": "fixed",
            "vips.fixed_size": n,
            "vips.max_inducing": n,
            "fit_iterations": 0,
        },
    )
