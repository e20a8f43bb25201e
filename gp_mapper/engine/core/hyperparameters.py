"""A kernel's hyperparameters as the node's flat parameters (what ``theta.yaml`` holds).

The node builds its prior as ``Constant(constant_variance) + <kernel>(kernel_variance,
lengthscale)`` (the constant only when its variance is positive), with one lengthscale or, with
``ard``, one per input column. :func:`node_hyperparameters` reads a fitted kernel back into
those names, so a fit can be handed to the node as a parameter file.
"""

from __future__ import annotations

from typing import Any

from .kernels import Constant, Kernel, Stationary, Sum


def node_hyperparameters(kernel: Kernel, noise_variance: float) -> dict[str, Any]:
    """The kernel and noise in the node's parameter names.

    Args:
        kernel: ``Constant + Stationary`` (either order) or a ``Stationary`` alone, each on all
            input columns.
        noise_variance: the Gaussian noise variance σ² [µT²].

    Returns:
        ``{"kernel": "matern52" | "matern32" | "se", "kernel_variance": float [µT²],
        "lengthscale": float, or list[float] [m] with ARD, "ard": bool,
        "constant_variance": float [µT²] (0.0 without a constant part),
        "noise_variance": float [µT²]}``. An upper limit on the variance (``variance_max``)
        is a fit setting, not a value, and is not part of it.

    Raises:
        ValueError: the kernel has no such flat form (another structure, a product, or parts
            restricted to some input columns).
    """
    node_parts = getattr(kernel, "node_parts", None)
    if node_parts is not None:  # a kernel that reads its flat form itself (the potential's)
        constant_variance, base = node_parts()
        return {
            **node_hyperparameters(base, noise_variance),
            "constant_variance": float(constant_variance.detach()),
        }
    constant: Constant | None = None
    stationary: Kernel = kernel
    if isinstance(kernel, Sum):
        first, second = kernel.first, kernel.second
        constant, stationary = (first, second) if isinstance(first, Constant) else (second, first)
        if not isinstance(constant, Constant):
            raise ValueError(
                f"no node parameters for a sum without a constant part: {kernel.to_spec()}"
            )
    if not isinstance(stationary, Stationary) or any(
        k.active_dims is not None for k in (stationary, constant) if k is not None
    ):
        raise ValueError(
            "node parameters need Constant + stationary kernel or a stationary kernel "
            f"alone, on all input columns; got {kernel.to_spec()}"
        )
    lengthscale = stationary.lengthscale.detach().cpu().tolist()
    return {
        "kernel": stationary.kind,
        "kernel_variance": float(stationary.variance.detach()),
        "lengthscale": lengthscale if stationary.ard else lengthscale[0],
        "ard": stationary.ard,
        "constant_variance": 0.0 if constant is None else float(constant.variance.detach()),
        "noise_variance": float(noise_variance),
    }
