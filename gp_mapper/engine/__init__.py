"""The continual Gaussian-process engine: kernels, the online sparse GP, selectors, fitting.

Pure torch: no ROS, no files, no threads. Float64 by default, on the CPU or a CUDA device.
"""

from .core.device import resolve_device, set_cpu_threads
from .core.kernels import Constant, Kernel, Matern52, SquaredExponential, Sum, kernel_from_spec
from .core.linalg import Jitter
from .core.noise import GaussianNoise
from .errors import EngineError, NumericalError, StateError
from .exact import ExactGP
from .spec import EngineSpec, build_engine, build_kernel, build_selector
from .vips import (
    CarriedPosterior,
    OnlineSparseGP,
    Posterior,
    RunningStats,
    UpdateReport,
    noise_model_log_likelihood,
    online_bound,
    reference_bound,
    upper_bound,
)
from .vips.selectors import (
    ConditionalVariance,
    FixedSize,
    Oips,
    Selection,
    SelectionProblem,
    Selector,
    Vips,
    selector_from_spec,
)
from .warmup import warm_up

__all__ = [
    "CarriedPosterior",
    "ConditionalVariance",
    "Constant",
    "EngineError",
    "EngineSpec",
    "ExactGP",
    "FixedSize",
    "GaussianNoise",
    "Jitter",
    "Kernel",
    "Matern52",
    "NumericalError",
    "Oips",
    "OnlineSparseGP",
    "Posterior",
    "RunningStats",
    "Selection",
    "SelectionProblem",
    "Selector",
    "SquaredExponential",
    "StateError",
    "Sum",
    "UpdateReport",
    "Vips",
    "build_engine",
    "build_kernel",
    "build_selector",
    "kernel_from_spec",
    "noise_model_log_likelihood",
    "online_bound",
    "reference_bound",
    "resolve_device",
    "selector_from_spec",
    "set_cpu_threads",
    "upper_bound",
    "warm_up",
]
