"""Additive sparse variational GPs: declared components, coupled posteriors.

The model of Adam, Durrande & John 2018 (Scalable GAM using sparse variational GPs).

``component.py`` (a component: name, kernel on its columns, inducing inputs), ``zero_mean.py``
(SE and Matérn-3/2 kernels projected to zero mean over an interval), ``heading.py`` (the
compass-deviation kernel), ``run_offset.py`` (one offset per run), ``magnetic.py`` (the
magnetometer's nuisance components), ``blocks.py`` (per-component kernel blocks),
``precision.py`` (the paper's precision form), ``whitened.py`` (mean field and full coupled),
``posterior.py`` (prediction per component, per subset, the map layer), ``model.py`` (the
batch model ``gam``); streamed: ``block_kernel.py`` (the components as one kernel over tagged
rows), ``block_selector.py`` (VIPS for the map, fixed rules for the nuisance), ``stream.py``
(the streaming model ``gam_stream``).
"""

from __future__ import annotations

from .block_kernel import COMPONENT_TAGS, OBSERVATION, BlockKernel, tagged_rows
from .block_selector import AdditiveVips
from .component import Component, component_kernel_from_spec, grid_inducing
from .heading import HEADING_INDUCING_RAD, CompassDeviation, deviation_features
from .magnetic import AUXILIARY_ORDER, auxiliary_inputs, nuisance_components
from .model import POSTERIOR_FORMS, AdditiveGP
from .posterior import AdditivePosterior, MapLayerPosterior, PrecisionPosterior, WhitenedPosterior
from .precision import default_rank, optimal_alpha, precision_elbo
from .run_offset import RunOffset
from .stream import AdditiveUpdateReport, Clock, StreamingAdditiveGP
from .whitened import optimal_whitened_q, titsias_bound, whitened_elbo, whitened_features
from .zero_mean import ZeroMeanMatern32, ZeroMeanSE

__all__ = [
    "AUXILIARY_ORDER",
    "COMPONENT_TAGS",
    "HEADING_INDUCING_RAD",
    "OBSERVATION",
    "POSTERIOR_FORMS",
    "AdditiveGP",
    "AdditivePosterior",
    "AdditiveUpdateReport",
    "AdditiveVips",
    "BlockKernel",
    "Clock",
    "CompassDeviation",
    "Component",
    "MapLayerPosterior",
    "PrecisionPosterior",
    "RunOffset",
    "StreamingAdditiveGP",
    "WhitenedPosterior",
    "ZeroMeanMatern32",
    "ZeroMeanSE",
    "auxiliary_inputs",
    "component_kernel_from_spec",
    "default_rank",
    "deviation_features",
    "grid_inducing",
    "nuisance_components",
    "optimal_alpha",
    "optimal_whitened_q",
    "precision_elbo",
    "tagged_rows",
    "titsias_bound",
    "whitened_elbo",
    "whitened_features",
]
