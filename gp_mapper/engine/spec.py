"""A flat, frozen description of a model, and the factories that build one from it.

The mapping layer, the node parameters and ``gp-mapper fit`` speak in flat names; this is where
they become objects. Every default and range comes from the settings table
(``gp_mapper.engine.settings``); the defaults are the seed paper's magnetometer model (spec
seed000 §8.5) with the paper's recommended VIPS δ = 0.035.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .core.kernels import Constant, Kernel, kernel_from_spec
from .core.linalg import Jitter
from .settings import SETTING_BY_NAME, default
from .settings.gam import GAM_MAP_LAYER, parse_components
from .vips.selectors import ConditionalVariance, FixedSize, Oips, Selector, Vips

if TYPE_CHECKING:
    from .acgp import AdaptiveCholeskyGP
    from .cagp import CaGP, CaGPCG
    from .exact import ExactGP
    from .gam import AdditiveGP, StreamingAdditiveGP
    from .model import Model
    from .potential import VectorFieldGP
    from .solvegp import SolveGP
    from .vips import OnlineSparseGP

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class EngineSpec:
    """Model settings by name (units: inputs in m, targets in µT). See ``settings`` for each.

    Attributes:
        model: the model's registered name ("vips", "exact", "acgp").
        kernel: "matern52", "matern32" or "se" (added to a constant unless that is 0).
        constant_variance: variance of the constant offset kernel [µT²]; 0 leaves it out.
        kernel_variance: initial variance of the stationary kernel [µT²].
        lengthscale: initial lengthscale [m].
        ard: one lengthscale per input dimension.
        noise_variance: initial noise variance [µT²].
        fit_iterations: L-BFGS iterations (per batch for vips; 0 keeps θ fixed).
        jitter, jitter_relative: the first jitter of every Cholesky, relative or absolute.
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: "float64" or "float32".
        selector, delta, eta, rho, fixed_size, max_inducing, hyperprior_scale, outlier_z,
            pass_noise_variance, theta_memory: vips (all but selector, eta, rho, fixed_size:
            potential too).
        local_fit_inducing, fit_max_seconds: vips only.
        potential_offset, potential_inducing: potential only (see settings/potential.py).
        acgp_block_size, acgp_initial_block, acgp_rel_tol, acgp_abs_tol, acgp_max_points,
            acgp_refinements: acgp only.
        solve_*: solvegp only (see settings/solvegp.py).
        cagp_*: cagp and cagp_cg only (see settings/cagp.py).
        gam_*: gam only (see settings/gam.py); components, the heading, run and drift
            settings: gam_stream too.
        seed: acgp, solvegp, cagp, cagp_cg, gam.
    """

    model: str = default("model")
    kernel: str = default("kernel")
    constant_variance: float = default("constant_variance")
    kernel_variance: float = default("kernel_variance")
    lengthscale: float = default("lengthscale")
    ard: bool = default("ard")
    noise_variance: float = default("noise_variance")
    fit_iterations: int = default("fit_iterations")
    jitter: float = default("jitter")
    jitter_relative: bool = default("jitter_relative")
    device: str = default("device")
    dtype: str = default("dtype")
    selector: str = default("selector")
    delta: float = default("delta")
    eta: float = default("eta")
    rho: float = default("rho")
    fixed_size: int = default("fixed_size")
    max_inducing: int = default("max_inducing")
    hyperprior_scale: float = default("hyperprior_scale")
    outlier_z: float = default("outlier_z")
    pass_noise_variance: float = default("pass_noise_variance")
    theta_memory: bool = default("theta_memory")
    local_fit_inducing: int = default("local_fit_inducing")
    fit_max_seconds: float = default("fit_max_seconds")
    potential_offset: float = default("potential_offset")
    potential_inducing: str = default("potential_inducing")
    acgp_block_size: int = default("acgp_block_size")
    acgp_initial_block: int = default("acgp_initial_block")
    acgp_rel_tol: float = default("acgp_rel_tol")
    acgp_abs_tol: float = default("acgp_abs_tol")
    acgp_max_points: int = default("acgp_max_points")
    acgp_refinements: int = default("acgp_refinements")
    solve_inducing: int = default("solve_inducing")
    solve_orthogonal: int = default("solve_orthogonal")
    solve_family: str = default("solve_family")
    solve_whiten: bool = default("solve_whiten")
    solve_batch_size: int = default("solve_batch_size")
    solve_epochs: int = default("solve_epochs")
    solve_learning_rate: float = default("solve_learning_rate")
    solve_init: str = default("solve_init")
    solve_validation: float = default("solve_validation")
    solve_patience: int = default("solve_patience")
    solve_warm_start: bool = default("solve_warm_start")
    solve_optimal_q: bool = default("solve_optimal_q")
    solve_standardise: str = default("solve_standardise")
    solve_train_inducing: bool = default("solve_train_inducing")
    solve_prefit_points: int = default("solve_prefit_points")
    cagp_actions: int = default("cagp_actions")
    cagp_epochs: int = default("cagp_epochs")
    cagp_learning_rate: float = default("cagp_learning_rate")
    cagp_lbfgs: bool = default("cagp_lbfgs")
    cagp_validation: float = default("cagp_validation")
    cagp_validate_every: int = default("cagp_validate_every")
    cagp_patience: int = default("cagp_patience")
    cagp_chunk: int = default("cagp_chunk")
    cagp_block_order: str = default("cagp_block_order")
    cagp_cg_tolerance: float = default("cagp_cg_tolerance")
    components: str = default("components")
    gam_posterior: str = default("gam_posterior")
    gam_rank: int = default("gam_rank")
    gam_map_inducing: int = default("gam_map_inducing")
    gam_iterations: int = default("gam_iterations")
    gam_heading_variance: float = default("gam_heading_variance")
    gam_run_variance: float = default("gam_run_variance")
    gam_run_gap: float = default("gam_run_gap")
    gam_drift_variance: float = default("gam_drift_variance")
    gam_drift_lengthscale: float = default("gam_drift_lengthscale")
    gam_drift_inducing: int = default("gam_drift_inducing")
    gam_drift_spacing: float = default("gam_drift_spacing")
    gam_drift_window: float = default("gam_drift_window")
    seed: int = default("seed")

    def __post_init__(self) -> None:
        for f in fields(self):
            # Raises ValueError naming the setting; stores the canonical type (5 -> 5.0).
            object.__setattr__(self, f.name, SETTING_BY_NAME[f.name].check(getattr(self, f.name)))
        Jitter(self.jitter, self.jitter_relative)  # raises ValueError on a bad pair
        parse_components(self.components)  # raises ValueError naming a bad component

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def replace(self, **changes: Any) -> EngineSpec:
        """A copy with some settings changed, validated."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def build_kernel(spec: EngineSpec, input_dim: int) -> Kernel:
    """The prior kernel the spec names, for inputs of dimension ``input_dim``."""
    stationary = kernel_from_spec(
        {
            "type": spec.kernel,
            "variance": spec.kernel_variance,
            "lengthscale": [spec.lengthscale],
            "ard_dims": input_dim if spec.ard else 0,
        }
    )
    if spec.constant_variance > 0.0:
        return Constant(spec.constant_variance) + stationary
    return stationary


def build_selector(spec: EngineSpec) -> Selector:
    return {
        "vips": lambda: Vips(spec.delta),
        "cv": lambda: ConditionalVariance(spec.eta),
        "oips": lambda: Oips(spec.rho),
        "fixed": lambda: FixedSize(spec.fixed_size),
    }[spec.selector]()


def _engine_options(spec: EngineSpec) -> dict[str, Any]:
    """The streaming engine's options, shared by every model that runs it."""
    return {
        "device": spec.device,
        "dtype": DTYPES[spec.dtype],
        "max_inducing": spec.max_inducing,
        "fit_iterations": spec.fit_iterations,
        "hyperprior_scale": spec.hyperprior_scale,
        "outlier_z": spec.outlier_z,
        "pass_noise_variance": spec.pass_noise_variance,
        "jitter": Jitter(spec.jitter, spec.jitter_relative),
    }


def build_online_sgp(spec: EngineSpec, input_dim: int) -> OnlineSparseGP:
    """The streaming VIPS model (seed 000) the spec describes."""
    from .vips import OnlineSparseGP

    return OnlineSparseGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        build_selector(spec),
        **_engine_options(spec),
        **_vips_options(spec),
    )


def _vips_options(spec: EngineSpec) -> dict[str, Any]:
    """The options of the VIPS model's engine beyond the shared ones."""
    return {
        "theta_memory": spec.theta_memory,
        "local_fit_inducing": spec.local_fit_inducing,
        "fit_max_seconds": spec.fit_max_seconds,
    }


def solvegp_streaming_state(model: SolveGP, spec: EngineSpec) -> dict[str, np.ndarray]:
    """A fitted SOLVE-GP as the state of the stream that continues it, with the spec's
    streaming settings (selector, cap, hyperprior, outlier screen, neighbourhood fit, fit
    budget); θ, the jitter, the device and the dtype are the fit's.

    The stream keeps the fit's θ (``fit_iterations`` 0): θ was fitted on the whole log, and a
    window's fit against a carried posterior that summarises it ran θ off (on the Aalto run 6
    after runs 1-5: the lengthscale 0.52 m onto its floor or to 0.02-0.04 m, the kernel
    variance to 2·10⁸ µT², the map hundreds of µT off).
    """
    from .solvegp import to_streaming_state

    options = {**_engine_options(spec), **_vips_options(spec), "fit_iterations": 0}
    for own in ("device", "dtype", "jitter"):  # the fit's
        del options[own]
    return to_streaming_state(model, build_selector(spec), **options)


def build_potential(spec: EngineSpec, input_dim: int) -> VectorFieldGP:
    """The three-axis curl-free field model: ``kernel`` is the potential's (se or matern52),
    ``kernel_variance`` one component's local variance and ``constant_variance`` the uniform
    field's per component."""
    from .potential import CurlFreeKernel, FieldReadings, PotentialVips, VectorFieldGP

    if spec.kernel not in ("se", "matern52"):
        raise ValueError(
            f"the potential model needs a twice-differentiable kernel (se or matern52); got "
            f"kernel: {spec.kernel}"
        )
    if spec.ard:
        raise ValueError("the potential model's kernel is isotropic: set ard: false")
    base = kernel_from_spec(
        {"type": spec.kernel, "variance": spec.kernel_variance,
         "lengthscale": [spec.lengthscale], "ard_dims": 0}
    )  # fmt: skip
    # The uniform field is part of the model: a zero constant_variance still leaves it a floor.
    kernel = CurlFreeKernel(base, max(spec.constant_variance, 1.0))
    selector = (
        PotentialVips(spec.delta, spec.potential_offset)
        if spec.potential_inducing == "vips"
        else FieldReadings()
    )
    return VectorFieldGP(
        kernel,
        spec.noise_variance,
        selector,
        input_dim=input_dim,
        **_engine_options(spec),
        theta_memory=spec.theta_memory,
    )


def build_exact(spec: EngineSpec, input_dim: int) -> ExactGP:
    """The exact GP the spec describes."""
    from .exact import ExactGP

    return ExactGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        fit_iterations=spec.fit_iterations,
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


def build_acgp(spec: EngineSpec, input_dim: int) -> AdaptiveCholeskyGP:
    """The Adaptive Cholesky GP (seed 004) the spec describes."""
    from .acgp import AdaptiveCholeskyGP

    return AdaptiveCholeskyGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        block_size=spec.acgp_block_size,
        initial_block_size=spec.acgp_initial_block or None,
        rel_tol=spec.acgp_rel_tol,
        abs_tol=spec.acgp_abs_tol,
        max_points=spec.acgp_max_points or None,
        fit_iterations=spec.fit_iterations,
        refinements=spec.acgp_refinements,
        seed=spec.seed,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


def build_solvegp(spec: EngineSpec, input_dim: int) -> SolveGP:
    """SOLVE-GP (seed 002) as the spec describes it."""
    from .solvegp import SolveGP

    return SolveGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        num_inducing=spec.solve_inducing,
        num_orthogonal=spec.solve_orthogonal,
        family=spec.solve_family,
        whiten=spec.solve_whiten,
        batch_size=spec.solve_batch_size,
        epochs=spec.solve_epochs,
        learning_rate=spec.solve_learning_rate,
        init=spec.solve_init,
        validation=spec.solve_validation,
        patience=spec.solve_patience,
        warm_start=spec.solve_warm_start,
        optimal_q=spec.solve_optimal_q,
        standardise=spec.solve_standardise,
        train_inducing=spec.solve_train_inducing,
        train_hyperparameters=spec.fit_iterations > 0,
        prefit_points=spec.solve_prefit_points,
        seed=spec.seed,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )


def _cagp_arguments(spec: EngineSpec) -> dict[str, Any]:
    """The settings CaGP-Opt and CaGP-CG share."""
    return {
        "actions": spec.cagp_actions,
        "epochs": spec.cagp_epochs,
        "learning_rate": spec.cagp_learning_rate,
        "optimizer": "lbfgs" if spec.cagp_lbfgs else "adam",
        "validation": spec.cagp_validation,
        "validate_every": spec.cagp_validate_every,
        "patience": spec.cagp_patience,
        "chunk": spec.cagp_chunk,
        "seed": spec.seed,
        "device": spec.device,
        "dtype": DTYPES[spec.dtype],
        "jitter": Jitter(spec.jitter, spec.jitter_relative),
    }


def build_cagp(spec: EngineSpec, input_dim: int) -> CaGP:
    """CaGP-Opt (seed 001) as the spec describes it."""
    from .cagp import CaGP

    return CaGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        block_order=spec.cagp_block_order,
        **_cagp_arguments(spec),
    )


def build_cagp_cg(spec: EngineSpec, input_dim: int) -> CaGPCG:
    """CaGP-CG (seed 001) as the spec describes it."""
    from .cagp import CaGPCG

    return CaGPCG(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        cg_tolerance=spec.cagp_cg_tolerance,
        **_cagp_arguments(spec),
    )


def build_gam(spec: EngineSpec, input_dim: int) -> AdditiveGP:
    """The additive GP (seed 003) with the spec's components (``components``).

    offset + map (the default) or map alone: the map reads the first two input columns (all
    of them for 2-D inputs, so its θ has the node's flat names); its inducing points are drawn
    from the log at the fit. With nuisance components (heading, run, drift; spec seed003 §9)
    the model reads one more column per nuisance input after the ``input_dim`` map inputs, in
    the order of :func:`gam.auxiliary_inputs` (yaw [rad], run label, time [s]), and publishes
    offset + map as its map layer.
    """
    from .gam import AdditiveGP, Component, auxiliary_inputs, nuisance_components

    names = parse_components(spec.components)
    auxiliary = auxiliary_inputs(names)
    width = input_dim + len(auxiliary)
    map_columns = None if width <= 2 else [0, 1]
    map_kernel = kernel_from_spec(
        {
            "type": spec.kernel,
            "variance": spec.kernel_variance,
            "lengthscale": [spec.lengthscale],
            "ard_dims": min(input_dim, 2) if spec.ard else 0,
            **({} if map_columns is None else {"active_dims": map_columns}),
        }
    )
    components = []
    if "offset" in names and spec.constant_variance > 0.0:
        offset = torch.zeros(1, width, dtype=DTYPES[spec.dtype])
        components.append(Component("offset", Constant(spec.constant_variance), offset))
    components.append(Component("map", map_kernel, from_data=spec.gam_map_inducing))
    components += nuisance_components(names, input_dim, spec, DTYPES[spec.dtype])
    layer = [c.name for c in components if c.name in GAM_MAP_LAYER]
    nuisance = len(components) > len(layer)
    return AdditiveGP(
        components,
        spec.noise_variance,
        posterior=spec.gam_posterior,
        rank=spec.gam_rank,
        iterations=spec.gam_iterations,
        learn_hyperparameters=spec.fit_iterations > 0,
        seed=spec.seed,
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        jitter=Jitter(spec.jitter, spec.jitter_relative),
        map_layer=layer if nuisance else None,
        map_input_dim=input_dim if nuisance else None,
        auxiliary_inputs=auxiliary,
    )


def build_gam_stream(spec: EngineSpec, input_dim: int) -> StreamingAdditiveGP:
    """The additive map streamed by VIPS (``components``; spec seed003 §9 "Streaming
    integration" (1)).

    The map component's kernel is the node's (:func:`build_kernel`: the offset is its constant
    part, present when ``offset`` is named and ``constant_variance`` > 0), so with
    ``offset+map`` the model is the VIPS engine. Heading: the compass-deviation kernel; run: an
    offset per run after the first; drift: a Matérn-3/2 in time, zero at the first reading
    (the level is the offset's: ``gam.block_kernel``). With
    nuisance components the inducing variables are chosen by :class:`gam.AdditiveVips`; with
    the map alone any selector of the VIPS engine does.
    """
    from .gam import AdditiveVips, BlockKernel, CompassDeviation, StreamingAdditiveGP
    from .gam.block_kernel import AnchoredMatern32, LaterRunOffset

    names = parse_components(spec.components)
    map_kernel = build_kernel(spec.replace(constant_variance=0.0), input_dim)
    if "offset" in names and spec.constant_variance > 0.0:
        map_kernel = build_kernel(spec, input_dim)
    parts: dict[str, Kernel] = {"map": map_kernel}
    if "heading" in names:
        parts["heading"] = CompassDeviation(spec.gam_heading_variance)
    if "run" in names:
        parts["run"] = LaterRunOffset(spec.gam_run_variance)
    if "drift" in names:
        parts["drift"] = AnchoredMatern32(spec.gam_drift_variance, spec.gam_drift_lengthscale)
    kernel = BlockKernel(parts, input_dim)
    if spec.selector == "vips":
        selector: Selector = AdditiveVips(spec.delta, spec.gam_drift_spacing, spec.gam_drift_window)
    elif kernel.single:
        selector = build_selector(spec)
    else:
        raise ValueError(
            f"gam_stream with nuisance components ({spec.components}) selects its inducing "
            f"points with selector: vips; got selector: {spec.selector}"
        )
    return StreamingAdditiveGP(
        kernel,
        spec.noise_variance,
        selector,
        run_gap=spec.gam_run_gap,
        **_engine_options(spec),
    )


def build_model(spec: EngineSpec, input_dim: int) -> Model:
    """A fresh model as the spec describes it (the registry dispatches on ``spec.model``)."""
    from .registry import model_entry

    return model_entry(spec.model).build(spec, input_dim)


def build_engine(spec: EngineSpec, input_dim: int) -> Model:
    """A fresh model as the spec describes it; the name predates the other models."""
    return build_model(spec, input_dim)
