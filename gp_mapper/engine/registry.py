"""The models by name: how to build each from a spec and how to rebuild it from a saved state.

The name is the key a model's ``state_dict()`` stores under ``"model"``; a map file is read back
by the model that wrote it, and refused with a clear message by any other. States written
before the key existed are the streaming model's (``vips``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from .errors import StateError
from .model import ModelKind

if TYPE_CHECKING:
    from .model import Model
    from .spec import EngineSpec

# The model of a state saved before models had names.
LEGACY_MODEL = "vips"


class ModelEntry(NamedTuple):
    """One registered model.

    Attributes:
        name: the key in specs, parameter files and saved states.
        kind: "streaming" (``update`` per window) or "batch" (``fit`` on a whole log).
        summary: one line for ``--help`` and errors.
        build: a fresh model from a spec and the input dimension.
        from_state: the model rebuilt from its ``state_dict()``.
        exact_settings: settings (for N data points) under which the model's posterior is the
            exact GP's on all the data at fixed θ; the contract tests check it.
        to_streaming: for a batch model whose posterior the streaming model can carry on
            (SOLVE-GP), the fitted model and the spec (its streaming settings: the node's) to
            a streaming model's state; None otherwise.
        target: "scalar" (y [N]: ‖B‖ or one component) or "vector" (y [N, 3]: the field in
            map_frame; the posterior also has ``predict_field``).
        support_label: what the posterior's support is (the PNG's legend and title).
        takes_components: the model removes nuisance components (heading, run, drift) given in
            ``components``; any other model refuses them.
        dense_points: for a fit that factors a dense kernel matrix over the data, how many
            points it spans for N samples under a spec (the memory check); None otherwise.
    """

    name: str
    kind: ModelKind
    summary: str
    build: Callable[[EngineSpec, int], Model]
    from_state: Callable[[Mapping[str, Any], str | torch.device], Model]
    exact_settings: Callable[[int], dict[str, Any]]
    to_streaming: Callable[[Any, EngineSpec], dict[str, np.ndarray]] | None = None
    target: str = "scalar"
    support_label: str = "inducing points"
    takes_components: bool = False
    dense_points: Callable[[EngineSpec, int], int] | None = None


def _vips() -> ModelEntry:
    from .spec import build_online_sgp
    from .vips import OnlineSparseGP

    return ModelEntry(
        "vips",
        _kind("vips"),
        "continual sparse GP, VIPS inducing points on the Bui et al. online bound (seed 000)",
        build_online_sgp,
        OnlineSparseGP.from_state,
        lambda n: {"selector": "fixed", "fixed_size": n, "max_inducing": n, "fit_iterations": 0},
    )


def _exact() -> ModelEntry:
    from .exact import ExactGP
    from .spec import build_exact

    return ModelEntry(
        "exact",
        _kind("exact"),
        "exact GP on all the data (O(N³): a reference, for logs of a few thousand samples)",
        build_exact,
        ExactGP.from_state,
        lambda n: {"fit_iterations": 0},
        support_label="data points",
        dense_points=lambda spec, n: n,
    )


def _acgp() -> ModelEntry:
    from .acgp import AdaptiveCholeskyGP
    from .spec import build_acgp

    return ModelEntry(
        "acgp",
        _kind("acgp"),
        "Adaptive Cholesky GP: exact GP on the subset its evidence bounds say suffices (seed 004)",
        build_acgp,
        AdaptiveCholeskyGP.from_state,
        lambda n: {"acgp_rel_tol": 0.0, "fit_iterations": 0},  # never stops: all n kept
        support_label="kept points",
        # its factor grows until the bounds agree: at most the cap, else every sample
        dense_points=lambda spec, n: min(n, spec.acgp_max_points) if spec.acgp_max_points else n,
    )


def _solvegp() -> ModelEntry:
    from .solvegp import SolveGP
    from .spec import build_solvegp, solvegp_streaming_state

    return ModelEntry(
        "solvegp",
        _kind("solvegp"),
        "SOLVE-GP: sparse variational GP with orthogonal inducing points, fitted by minibatch "
        "SVI, continued live by the streaming model (seed 002)",
        build_solvegp,
        SolveGP.from_state,
        lambda n: {
            "solve_family": "full",  # Z = X with q at its optimum: the exact GP at fixed θ
            "solve_inducing": n,
            "solve_orthogonal": 0,
            "solve_epochs": 0,
            "solve_optimal_q": True,
            "solve_validation": 0.0,
            "fit_iterations": 0,
        },
        solvegp_streaming_state,
    )


def _cagp(name: str) -> ModelEntry:
    from .cagp import CaGP, CaGPCG
    from .spec import build_cagp, build_cagp_cg

    opt = name == "cagp"
    return ModelEntry(
        name,
        _kind(name),
        "computation-aware GP (seed 001): variance that counts the approximation error, "
        + ("block-sparse learned actions (CaGP-Opt)" if opt else "conjugate-gradient actions"),
        build_cagp if opt else build_cagp_cg,
        CaGP.from_state if opt else CaGPCG.from_state,
        lambda n: {  # n actions span the data: the exact GP at fixed θ
            "cagp_actions": n,
            "cagp_epochs": 0,
            "cagp_validation": 0.0,
            "cagp_cg_tolerance": 0.0,
            "fit_iterations": 0,
        },
        support_label="data points",
    )


def _gam() -> ModelEntry:
    from .gam import AdditiveGP
    from .spec import build_gam

    return ModelEntry(
        "gam",
        _kind("gam"),
        "additive sparse variational GP (seed 003): declared components (offset + map) with "
        "a coupled posterior, per-component and subset predictions",
        build_gam,
        AdditiveGP.from_state,
        lambda n: {  # the map's inducing points are all n data, q at Titsias' optimum
            "gam_posterior": "full_coupled",
            "gam_map_inducing": n,
            "fit_iterations": 0,
        },
        takes_components=True,
    )


def _gam_stream() -> ModelEntry:
    from .gam import StreamingAdditiveGP
    from .spec import build_gam_stream

    return ModelEntry(
        "gam_stream",
        _kind("gam_stream"),
        "additive map (seed 003) streamed by VIPS on the online bound: offset + map with "
        "heading, run and drift components (components), a coupled posterior over all",
        build_gam_stream,
        StreamingAdditiveGP.from_state,
        lambda n: {"selector": "fixed", "fixed_size": n, "max_inducing": n, "fit_iterations": 0},
        takes_components=True,
    )


def _potential() -> ModelEntry:
    from .potential import VectorFieldGP
    from .spec import build_potential

    return ModelEntry(
        "potential",
        _kind("potential"),
        "three-axis field B = −∇φ + uniform field, φ a GP; inducing points on φ chosen by VIPS "
        "on the online bound (target: vector)",
        build_potential,
        VectorFieldGP.from_state,
        lambda n: {"potential_inducing": "readings", "fit_iterations": 0},
        target="vector",
    )


# Each model's kind and the loader of its entry, so that listing the models (the settings table
# does, without torch's models) imports none of them.
_MODELS: dict[str, tuple[ModelKind, Callable[[], ModelEntry]]] = {
    "vips": ("streaming", _vips),
    "exact": ("batch", _exact),
    "acgp": ("batch", _acgp),
    "solvegp": ("batch", _solvegp),
    "cagp": ("batch", lambda: _cagp("cagp")),
    "cagp_cg": ("batch", lambda: _cagp("cagp_cg")),
    "gam": ("batch", _gam),
    "potential": ("streaming", _potential),
    "gam_stream": ("streaming", _gam_stream),
}


def _kind(name: str) -> ModelKind:
    return _MODELS[name][0]


def model_names(kind: ModelKind | None = None) -> tuple[str, ...]:
    """Registered names, of one kind or all (no model is imported)."""
    return tuple(name for name, (k, _) in _MODELS.items() if kind is None or k == kind)


def model_entry(name: str) -> ModelEntry:
    """The entry of a registered model.

    Raises:
        ValueError: no model of that name (the message lists the registered ones).
    """
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; registered: {', '.join(_MODELS)}")
    return _MODELS[name][1]()


def saved_model_name(state: Mapping[str, Any]) -> str:
    """The model a state was saved by (``vips`` for states from before models had names).

    Raises:
        StateError: the key is there but is not a string.
    """
    if "model" not in state:
        return LEGACY_MODEL
    value = np.asarray(state["model"])
    if value.shape != () or value.dtype.kind not in "US":
        raise StateError(f"the saved model name must be a string; got {value!r}")
    return str(value)


def model_from_state(
    state: Mapping[str, Any], device: str | torch.device = "auto", expected: str | None = None
) -> Model:
    """Rebuild whichever model saved ``state``.

    Args:
        state: a ``state_dict()`` (or ``np.load`` of one).
        device: where to put it.
        expected: if given, the state must be this model's.

    Raises:
        StateError: the state names another model than ``expected``, an unknown model, or is
            malformed (the model's own ``from_state`` says how).
    """
    name = saved_model_name(state)
    if expected is not None and name != expected:
        raise StateError(f"the state holds a {name!r} model; expected a {expected!r} model")
    try:
        entry = model_entry(name)
    except ValueError as err:
        raise StateError(str(err)) from err
    return entry.from_state(state, device)
