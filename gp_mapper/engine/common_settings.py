"""The settings every model shares: the model's name, the kernel, the noise and the numerics.

Defaults are the magnetometer model of Pescador-Barrios et al. 2024 (Sec. 5.4, App. D.4).
"""

from __future__ import annotations

from .setting import Setting, SettingTable

COMMON_SETTINGS: tuple[Setting, ...] = (
    Setting("model", "vips", "str",
            "the model: vips = the streaming sparse GP (the node's); potential = the "
            "three-axis curl-free field, streamed by VIPS (needs target: vector); gam_stream = "
            "the additive map (gam.components) streamed by VIPS; exact, acgp, "
            "solvegp, cagp, cagp_cg, gam = batch models for gp-mapper fit",
            pattern=r"[a-z][a-z0-9_]*", rule="a registered model (gp_mapper.engine.registry)",
            read_only=True),
    Setting("kernel", "matern52", "str", "stationary kernel added to the constant",
            choices=("matern52", "matern32", "se"), read_only=True),
    Setting("constant_variance", 500.0, "float",
            "initial variance of the constant kernel (absorbs the ~48 µT mean) [µT²]; 0 = off",
            min=0.0, max=1.0e6),
    Setting("kernel_variance", 1.0, "float", "initial stationary kernel variance [µT²]",
            min=1.0e-6, max=1.0e6),
    Setting("lengthscale", 1.0, "float", "initial kernel lengthscale [m]",
            min=1.0e-3, max=1.0e3),
    Setting("ard", False, "bool", "one lengthscale per input dimension", read_only=True),
    Setting("noise_variance", 0.1, "float", "initial observation noise variance [µT²]",
            min=1.0e-6, max=1.0e4),
    Setting("fit_iterations", 100, "int",
            "L-BFGS iterations of the hyperparameter fit (per update for vips); 0 = keep them "
            "fixed",
            min=0, max=10000),
    Setting("jitter", 1.0e-8, "float",
            "first jitter added to a kernel matrix before its Cholesky (larger ones follow on "
            "failure): times the mean kernel variance when jitter_relative, else in µT²",
            min=0.0, max=1.0, read_only=True),
    Setting("jitter_relative", True, "bool",
            "scale the jitter by the mean kernel variance (false: absolute, the convention "
            "of the VIPS authors' code)",
            read_only=True),
    Setting("device", "auto", "str", "torch device: auto, cpu, cuda or cuda:N",
            pattern=r"auto|cpu|cuda(:[0-9]+)?", read_only=True),
    Setting("dtype", "float64", "str", "engine floating-point type",
            choices=("float64", "float32"), read_only=True),
    Setting("seed", 0, "int",
            "seed of the random permutation (acgp), of the initialisation, split and "
            "minibatches (solvegp), of the actions and the validation split (cagp), of B's "
            "start and the map's inducing points (gam)",
            min=0, max=2**31 - 1, models=("acgp", "solvegp", "cagp", "cagp_cg", "gam")),
)  # fmt: skip

# Their defaults and checks, for a model's code.
COMMON = SettingTable(COMMON_SETTINGS)
