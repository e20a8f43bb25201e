"""A flat, frozen description of an engine, and the factory that builds one from it.

The mapping layer and the node parameters are flat names; this is where they become objects.
Defaults are the seed paper's magnetometer model (spec seed000 §8.5) with the paper's
recommended VIPS δ = 0.035.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch

from .core.kernels import Constant, Kernel, Matern52, SquaredExponential
from .core.linalg import JITTER_LADDER, Jitter
from .vips.online_sgp import DEFAULT_FIT_ITERATIONS, DEFAULT_MAX_INDUCING, OnlineSparseGP
from .vips.selectors import ConditionalVariance, FixedSize, Oips, Selector, Vips

KERNELS = ("matern52", "se")
SELECTORS = ("vips", "cv", "oips", "fixed")
DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class EngineSpec:
    """Engine settings by name (units: inputs in m, targets in µT).

    Attributes:
        kernel: "matern52" (Matérn-5/2) or "se" (squared exponential).
        constant_variance: variance of the constant offset kernel [µT²]; 0 leaves it out.
        kernel_variance: initial variance of the stationary kernel [µT²].
        lengthscale: initial lengthscale [m].
        ard: one lengthscale per input dimension.
        noise_variance: initial noise variance [µT²].
        selector: "vips", "cv" (conditional variance), "oips" or "fixed".
        delta: VIPS threshold (fraction of the gain over a noise model that may be lost).
        eta: CV trace threshold (absolute, µT²).
        rho: OIPS correlation threshold.
        fixed_size: inducing points of the "fixed" selector.
        max_inducing: hard cap on inducing points.
        fit_iterations: L-BFGS iterations per batch (0 keeps θ fixed).
        hyperprior_scale: log-space std of the weak log-normal hyperprior (0: maximum
            likelihood, as the paper; 0.5 keeps fits sensible on short robot batches).
        jitter: first jitter of the Cholesky of K(Z, Z); larger ones follow on failure.
        jitter_relative: ``jitter`` multiplies mean(diag K) (default); false makes it absolute
            [µT²], the seed paper's convention (ε = 1e-6 on standardised UCI targets).
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: "float64" or "float32".
    """

    kernel: str = "matern52"
    constant_variance: float = 500.0
    kernel_variance: float = 1.0
    lengthscale: float = 1.0
    ard: bool = False
    noise_variance: float = 0.1
    selector: str = "vips"
    delta: float = 0.035
    eta: float = 0.06
    rho: float = 0.93
    fixed_size: int = 100
    max_inducing: int = DEFAULT_MAX_INDUCING
    fit_iterations: int = DEFAULT_FIT_ITERATIONS
    hyperprior_scale: float = 0.5
    jitter: float = JITTER_LADDER[0]
    jitter_relative: bool = True
    device: str = "auto"
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.selector not in SELECTORS:
            raise ValueError(f"selector must be one of {SELECTORS}, got {self.selector!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")
        for name in ("kernel_variance", "lengthscale", "noise_variance"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.hyperprior_scale < 0.0:
            raise ValueError(f"hyperprior_scale must be >= 0, got {self.hyperprior_scale}")
        Jitter(self.jitter, self.jitter_relative)  # raises ValueError on a bad pair
        if self.constant_variance < 0.0:
            raise ValueError(f"constant_variance must be >= 0, got {self.constant_variance}")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def build_kernel(spec: EngineSpec, input_dim: int) -> Kernel:
    """The prior kernel the spec names, for inputs of dimension ``input_dim``."""
    cls = Matern52 if spec.kernel == "matern52" else SquaredExponential
    stationary = cls(spec.kernel_variance, spec.lengthscale, input_dim if spec.ard else 0)
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


def build_engine(spec: EngineSpec, input_dim: int) -> OnlineSparseGP:
    """A fresh engine as the spec describes it."""
    return OnlineSparseGP(
        build_kernel(spec, input_dim),
        spec.noise_variance,
        build_selector(spec),
        device=spec.device,
        dtype=DTYPES[spec.dtype],
        max_inducing=spec.max_inducing,
        fit_iterations=spec.fit_iterations,
        hyperprior_scale=spec.hyperprior_scale,
        jitter=Jitter(spec.jitter, spec.jitter_relative),
    )
