"""The additive models' builders from a spec and their registry entries."""

from __future__ import annotations

import torch

from ..core.kernels import Constant, Kernel, kernel_from_spec
from ..core.linalg import Jitter
from ..cost import FitCost
from ..model_table import ModelEntry, model_kind
from ..spec import DTYPES, EngineSpec, build_kernel, build_selector, stream_options
from ..vips.options import StreamOptions
from ..vips.selectors import Selector
from ..vips.settings import VipsSettings
from .block_kernel import AnchoredMatern32, BlockKernel, LaterRunOffset
from .block_selector import AdditiveVips
from .component import Component
from .heading import CompassDeviation
from .magnetic import auxiliary_inputs, nuisance_components
from .model import AdditiveGP
from .settings import GAM_MAP_LAYER, GamSettings, parse_components
from .stream import StreamingAdditiveGP


def build_gam(spec: EngineSpec, input_dim: int) -> AdditiveGP:
    """The additive GP (Adam, Durrande, John 2018) with the spec's components (``gam.components``).

    offset + map (the default) or map alone: the map reads the first two input columns (all
    of them for 2-D inputs, so its θ has the node's flat names); its inducing points are drawn
    from the log at the fit. With nuisance components (heading, run, drift)
    the model reads one more column per nuisance input after the ``input_dim`` map inputs, in
    the order of :func:`gam.auxiliary_inputs` (yaw [rad], run label, time [s]), and publishes
    offset + map as its map layer.
    """
    gam = spec.section(GamSettings)
    names = parse_components(gam.components)
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
    components.append(Component("map", map_kernel, from_data=gam.map_inducing))
    components += nuisance_components(names, input_dim, gam, DTYPES[spec.dtype])
    layer = [c.name for c in components if c.name in GAM_MAP_LAYER]
    nuisance = len(components) > len(layer)
    return AdditiveGP(
        components,
        spec.noise_variance,
        posterior=gam.posterior,
        rank=gam.rank,
        iterations=gam.iterations,
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
    """The additive map streamed by VIPS (``gam.components``): the components as one block kernel
    over tagged rows, under the online bound.

    The map component's kernel is the node's (:func:`build_kernel`: the offset is its constant
    part, present when ``offset`` is named and ``constant_variance`` > 0), so with
    ``offset+map`` the model is the VIPS engine. Heading: the compass-deviation kernel; run: an
    offset per run after the first; drift: a Matérn-3/2 in time, zero at the first reading
    (the level is the offset's: ``gam.block_kernel``). With
    nuisance components the inducing variables are chosen by :class:`gam.AdditiveVips`; with
    the map alone any selector of the VIPS engine does.
    """
    gam = spec.section(GamSettings)
    vips = spec.section(VipsSettings)
    names = parse_components(gam.components)
    map_kernel = build_kernel(spec.replace(constant_variance=0.0), input_dim)
    if "offset" in names and spec.constant_variance > 0.0:
        map_kernel = build_kernel(spec, input_dim)
    parts: dict[str, Kernel] = {"map": map_kernel}
    if "heading" in names:
        parts["heading"] = CompassDeviation(gam.heading_variance)
    if "run" in names:
        parts["run"] = LaterRunOffset(gam.run_variance)
    if "drift" in names:
        parts["drift"] = AnchoredMatern32(gam.drift_variance, gam.drift_lengthscale)
    kernel = BlockKernel(parts, input_dim)
    if vips.selector == "vips":
        selector: Selector = AdditiveVips(vips.delta, gam.drift_spacing, gam.drift_window)
    elif kernel.single:
        selector = build_selector(spec)
    else:
        raise ValueError(
            f"gam_stream with nuisance components ({gam.components}) selects its inducing "
            f"points with selector: vips; got selector: {vips.selector}"
        )
    return StreamingAdditiveGP(
        kernel,
        spec.noise_variance,
        selector,
        run_gap=gam.run_gap,
        options=StreamOptions(**stream_options(spec)),
    )


# One iteration of the batch fit takes as long as a product of ~120 flops per sample and
# squared map inducing point (measured 0.18, 0.74 and 1.21 s at N 2000, 4000 and 8000 with
# 256 map inducing points, float64, one thread).
ITERATION_FLOPS_PER_SAMPLE_M2 = 120.0


def gam_fit_cost(spec: EngineSpec, n: int) -> FitCost:
    """The batch fit's work: every iteration run (``gam.iterations``)."""
    gam = spec.section(GamSettings)
    per = ITERATION_FLOPS_PER_SAMPLE_M2 * float(n) * gam.map_inducing**2
    return FitCost(gam.iterations, "iterations", per, per)


def _batch_entry(name: str) -> ModelEntry:
    return ModelEntry(
        name,
        model_kind(name),
        "additive sparse variational GP (Adam, Durrande, John 2018): declared components "
        "(offset + map) with a coupled posterior, per-component and subset predictions",
        build_gam,
        AdditiveGP.from_state,
        lambda n: {  # the map's inducing points are all n data, q at Titsias' optimum
            "gam.posterior": "full_coupled",
            "gam.map_inducing": n,
            "fit_iterations": 0,
        },
        takes_components=True,
        fit_cost=gam_fit_cost,
    )


def _stream_entry(name: str) -> ModelEntry:
    return ModelEntry(
        name,
        model_kind(name),
        "additive map (Adam, Durrande, John 2018) streamed by VIPS on the online bound: "
        "offset + map with heading, run and drift components (gam.components), a coupled "
        "posterior over all",
        build_gam_stream,
        StreamingAdditiveGP.from_state,
        lambda n: {
            "vips.selector": "fixed",
            "vips.fixed_size": n,
            "vips.max_inducing": n,
            "fit_iterations": 0,
        },
        takes_components=True,
    )


def entry(name: str) -> ModelEntry:
    """``gam`` (the batch additive GP) or ``gam_stream`` (streamed by VIPS)."""
    return _stream_entry(name) if name == "gam_stream" else _batch_entry(name)
