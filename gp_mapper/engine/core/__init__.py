"""What every model shares: kernels, linear algebra, positive transforms, noise, fitting, device."""

from .device import resolve_device, set_cpu_threads
from .fit import FitResult, fit_hyperparameters
from .greedy import PivotedCholesky
from .kernels import Constant, Kernel, Matern52, SquaredExponential, Sum, kernel_from_spec
from .linalg import JITTER_LADDER, Jitter, cholesky_with_jitter
from .noise import GaussianNoise

__all__ = [
    "JITTER_LADDER",
    "Constant",
    "FitResult",
    "GaussianNoise",
    "Jitter",
    "Kernel",
    "Matern52",
    "PivotedCholesky",
    "SquaredExponential",
    "Sum",
    "cholesky_with_jitter",
    "fit_hyperparameters",
    "kernel_from_spec",
    "resolve_device",
    "set_cpu_threads",
]
