"""What every model shares: kernels, linear algebra, positive transforms, noise, fitting, device."""

from .device import resolve_device, set_cpu_threads
from .fit import FitResult, fit_hyperparameters
from .greedy import PivotedCholesky
from .hyperparameters import node_hyperparameters
from .kernels import (
    Constant,
    Kernel,
    Matern32,
    Matern52,
    Product,
    SquaredExponential,
    Stationary,
    Sum,
    kernel_from_spec,
)
from .linalg import JITTER_LADDER, Jitter, cholesky_with_jitter
from .noise import GaussianNoise

__all__ = [
    "JITTER_LADDER",
    "Constant",
    "FitResult",
    "GaussianNoise",
    "Jitter",
    "Kernel",
    "Matern32",
    "Matern52",
    "PivotedCholesky",
    "Product",
    "SquaredExponential",
    "Stationary",
    "Sum",
    "cholesky_with_jitter",
    "fit_hyperparameters",
    "kernel_from_spec",
    "node_hyperparameters",
    "resolve_device",
    "set_cpu_threads",
]
