"""The three-axis field model's builder from a spec and its registry entry."""

from __future__ import annotations

from ..core.kernels import kernel_from_spec
from ..model_table import ModelEntry, model_kind
from ..spec import EngineSpec, stream_options
from ..vips.options import StreamOptions
from ..vips.settings import VipsSettings
from .kernel import SPATIAL_DIMS, CurlFreeKernel
from .model import VectorFieldGP
from .selector import FieldReadings, PotentialVips
from .settings import PotentialSettings

UNIFORM_OVER_OFFSET = 100.0


def build_potential(spec: EngineSpec, input_dim: int) -> VectorFieldGP:
    """The three-axis curl-free field model: ``kernel`` is the potential's (se or matern52),
    ``kernel_variance`` one component's local variance and ``constant_variance`` the uniform
    field's per component."""
    potential = spec.section(PotentialSettings)
    vips = spec.section(VipsSettings)
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
    earth_variance = max(spec.constant_variance, 1.0)
    if potential.hard_iron_variance > 0.0:
        # Along an axis the device never turns about (z, for a planar robot) the offset is a
        # constant of the map frame like the uniform field: their prior variances split it.
        # At UNIFORM_OVER_OFFSET the offset takes 1 % and the map keeps the rest, as a map
        # without the offset would.
        earth_variance = max(earth_variance, UNIFORM_OVER_OFFSET * potential.hard_iron_variance)
    kernel = CurlFreeKernel(base, earth_variance, potential.hard_iron_variance)
    selector = (
        PotentialVips(vips.delta, potential.offset)
        if potential.inducing == "vips"
        else FieldReadings()
    )
    return VectorFieldGP(
        kernel,
        spec.noise_variance,
        selector,
        input_dim=input_dim,
        # Rows are (x, y, z, tag[, rotation row]): the cells' cube is the position, the
        # component kept apart, the rotation row binned.
        options=StreamOptions(
            **stream_options(spec),
            theta_memory=vips.theta_memory,
            cell_columns=SPATIAL_DIMS,
            cell_direction_columns=kernel.row_width - SPATIAL_DIMS - 1,
        ),
    )


def entry(name: str) -> ModelEntry:
    """The registry\'s entry of the model ``name``."""
    return ModelEntry(
        name,
        model_kind(name),
        "three-axis field B = −∇φ + uniform field, φ a GP; inducing points on φ chosen by VIPS "
        "on the online bound (target: vector)",
        build_potential,
        VectorFieldGP.from_state,
        lambda n: {"potential.inducing": "readings", "fit_iterations": 0},
        target="vector",
    )
