"""The Gaussian-process engine: one model interface, the models of the cited papers, and what
they share.

Layout: ``core/`` (kernels, linear algebra, transforms, noise, fitting, device) is shared by
every model; each model is a package holding its code, its ``settings.py`` and its
``entry.py`` (builder and registry entry): ``vips/``, ``potential/``, ``exact/``, ``acgp/``,
``solvegp/``, ``cagp/``, ``gam/``. ``model.py`` is the interface they meet, ``registry.py``
lists the packages and finds a model by name (as saved in a map file), ``settings/`` holds the
shared settings and the table of all of them, and ``spec.py`` builds a model from them.

Pure torch: no ROS, no files, no threads. Float64 by default, on the CPU or a CUDA device.
"""

from .core.device import resolve_device, set_cpu_threads
from .core.hyperparameters import node_hyperparameters
from .core.kernels import (
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
from .core.linalg import Jitter
from .core.noise import GaussianNoise
from .errors import EngineError, NotSupportedError, NumericalError, StateError
from .exact import ExactGP
from .exact.posterior import ExactPosterior
from .model import BatchModel, Model, ModelPosterior, Report, StreamingModel
from .model_table import ModelEntry
from .registry import (
    build_model,
    model_entry,
    model_names,
    register_model,
    saved_model_name,
    unregister_model,
)
from .report import FitReport
from .restore import model_from_state
from .spec import EngineSpec, build_kernel, build_selector
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
    "BatchModel",
    "CarriedPosterior",
    "ConditionalVariance",
    "Constant",
    "EngineError",
    "EngineSpec",
    "ExactGP",
    "ExactPosterior",
    "FitReport",
    "FixedSize",
    "GaussianNoise",
    "Jitter",
    "Kernel",
    "Matern32",
    "Matern52",
    "Model",
    "ModelEntry",
    "ModelPosterior",
    "NotSupportedError",
    "NumericalError",
    "Oips",
    "OnlineSparseGP",
    "Posterior",
    "Product",
    "Report",
    "RunningStats",
    "Selection",
    "SelectionProblem",
    "Selector",
    "SquaredExponential",
    "StateError",
    "Stationary",
    "StreamingModel",
    "Sum",
    "UpdateReport",
    "Vips",
    "build_kernel",
    "build_model",
    "build_selector",
    "kernel_from_spec",
    "model_entry",
    "model_from_state",
    "model_names",
    "node_hyperparameters",
    "noise_model_log_likelihood",
    "online_bound",
    "reference_bound",
    "register_model",
    "resolve_device",
    "saved_model_name",
    "selector_from_spec",
    "set_cpu_threads",
    "unregister_model",
    "upper_bound",
    "warm_up",
]
