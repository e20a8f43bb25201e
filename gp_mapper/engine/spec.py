"""A flat, frozen description of a model, and the factories that build one from it.

The mapping layer, the node parameters and ``gp-mapper fit`` speak in flat names; this is where
they become objects. Every default and range comes from the settings table
(``gp_mapper.engine.settings``); the defaults are the magnetometer model of Pescador-Barrios et
al. 2024 (Sec. 5.4, App. D.4) with that paper's recommended VIPS δ = 0.035 (App. D.3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from .core.kernels import Constant, Kernel, kernel_from_spec
from .core.linalg import Jitter
from .gam.settings import parse_components
from .model_table import model_names
from .setting import AUTO
from .settings import default, setting_by_name
from .vips.selectors import ConditionalVariance, FixedSize, Oips, Selector, Vips

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
            pass_noise_variance, theta_memory, cell_size: vips (all but selector, eta, rho,
            fixed_size: potential too).
        local_fit_inducing, fit_max_seconds: vips only.
        potential_offset, potential_inducing, hard_iron_variance: potential only (see
            potential/settings.py).
        acgp_block_size, acgp_initial_block, acgp_rel_tol, acgp_abs_tol, acgp_max_points,
            acgp_refinements: acgp only.
        solve_*: solvegp only (see solvegp/settings.py).
        cagp_*: cagp and cagp_cg only (see cagp/settings.py).
        gam_*: gam only (see gam/settings.py); components, the heading, run and drift
            settings: gam_stream too.
        seed: acgp, solvegp, cagp, cagp_cg, gam.
        options: the settings of a model registered from outside the engine
            (``register_model``), as (name, value) pairs; ``option(name)`` reads one.
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
    pass_noise_variance: float | str = default("pass_noise_variance")
    theta_memory: bool = default("theta_memory")
    cell_size: float = default("cell_size")
    local_fit_inducing: int = default("local_fit_inducing")
    fit_max_seconds: float = default("fit_max_seconds")
    potential_offset: float = default("potential_offset")
    potential_inducing: str = default("potential_inducing")
    hard_iron_variance: float = default("hard_iron_variance")
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
    cagp_prefit_points: int = default("cagp_prefit_points")
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
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        table = setting_by_name()
        for f in fields(self):
            if f.name == "options":
                continue
            # Raises ValueError naming the setting; stores the canonical type (5 -> 5.0).
            object.__setattr__(self, f.name, table.check(f.name, getattr(self, f.name)))
        if self.model not in model_names():  # the registry's, read now: a model added later
            raise ValueError(
                f"model must be one of: {', '.join(model_names())}; got {self.model!r}"
            )
        options = {}
        for name, value in dict(self.options).items():
            if name not in table or name in self.field_names():
                raise ValueError(f"options holds the settings of registered models outside the "
                                 f"engine; {name!r} is not one")  # fmt: skip
            options[name] = table.check(name, value)
        object.__setattr__(self, "options", tuple(sorted(options.items())))
        Jitter(self.jitter, self.jitter_relative)  # raises ValueError on a bad pair
        parse_components(self.components)  # raises ValueError naming a bad component

    def option(self, name: str) -> Any:
        """A setting of a model registered from outside the engine: as set, else its default.

        Raises:
            KeyError: no such setting.
        """
        return dict(self.options).get(name, setting_by_name().default(name))

    def to_dict(self) -> dict[str, object]:
        """Every setting by name, a registered model's own (``options``) among them."""
        out = asdict(self)
        del out["options"]
        return {**out, **dict(self.options)}

    @property
    def pass_noise_auto(self) -> bool:
        """Whether σ²_pass is measured from the map's data (``pass_noise_variance: auto``)
        rather than set: the model then starts with none."""
        return self.pass_noise_variance == AUTO

    def replace(self, **changes: Any) -> EngineSpec:
        """A copy with some settings changed, validated; a setting that is not a field goes to
        ``options`` (a registered model's own)."""
        names = self.field_names()
        own = {k: v for k, v in changes.items() if k in names}
        others = {k: v for k, v in changes.items() if k not in names}
        if others:
            own["options"] = tuple({**dict(own.get("options", self.options)), **others}.items())
        return dataclasses.replace(self, **own)

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


def stream_options(spec: EngineSpec) -> dict[str, Any]:
    """The options of the stream (``OnlineSparseGP``) every streaming model runs."""
    return {
        "device": spec.device,
        "dtype": DTYPES[spec.dtype],
        "max_inducing": spec.max_inducing,
        "fit_iterations": spec.fit_iterations,
        "hyperprior_scale": spec.hyperprior_scale,
        "outlier_z": spec.outlier_z,
        # "auto": the map measures it from its data and sets it (mapping/pass_noise.py).
        "pass_noise_variance": 0.0 if spec.pass_noise_auto else spec.pass_noise_variance,
        "cell_size": spec.cell_size,
        "jitter": Jitter(spec.jitter, spec.jitter_relative),
    }


def vips_options(spec: EngineSpec) -> dict[str, Any]:
    """The options of the VIPS model's engine beyond the shared ones."""
    return {
        "theta_memory": spec.theta_memory,
        "local_fit_inducing": spec.local_fit_inducing,
        "fit_max_seconds": spec.fit_max_seconds,
    }
