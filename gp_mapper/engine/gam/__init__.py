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

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "AUXILIARY_ORDER": ".magnetic",
    "COMPONENT_TAGS": ".block_kernel",
    "HEADING_INDUCING_RAD": ".heading",
    "OBSERVATION": ".block_kernel",
    "POSTERIOR_FORMS": ".model",
    "AdditiveGP": ".model",
    "AdditivePosterior": ".posterior",
    "AdditiveUpdateReport": ".stream",
    "AdditiveVips": ".block_selector",
    "BlockKernel": ".block_kernel",
    "Clock": ".stream",
    "CompassDeviation": ".heading",
    "Component": ".component",
    "MapLayerPosterior": ".posterior",
    "PrecisionPosterior": ".posterior",
    "RunOffset": ".run_offset",
    "StreamingAdditiveGP": ".stream",
    "WhitenedPosterior": ".posterior",
    "ZeroMeanMatern32": ".zero_mean",
    "ZeroMeanSE": ".zero_mean",
    "auxiliary_inputs": ".magnetic",
    "component_kernel_from_spec": ".component",
    "default_rank": ".precision",
    "deviation_features": ".heading",
    "grid_inducing": ".component",
    "nuisance_components": ".magnetic",
    "optimal_alpha": ".precision",
    "optimal_whitened_q": ".whitened",
    "precision_elbo": ".precision",
    "tagged_rows": ".block_kernel",
    "titsias_bound": ".whitened",
    "whitened_elbo": ".whitened",
    "whitened_features": ".whitened",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
