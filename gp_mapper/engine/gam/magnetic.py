"""The magnetometer's nuisance components (our design on Adam et al. 2018): heading, run, drift.

Each reads one input column after the map inputs (x, y[, z]); the columns come in the order of
:data:`AUXILIARY_ORDER`, one per nuisance component present:

- ``heading``: the yaw ψ [rad] under the compass-deviation kernel (``heading.py``), four
  inducing headings that represent it exactly;
- ``run``: a run label under an independent offset per run (``run_offset.py``), one inducing
  input per run seen at the fit;
- ``drift``: the time [s] under a Matérn-3/2 kernel made zero-mean over the log's time span
  (``zero_mean.py``), inducing times evenly spaced over it.

The zero-mean kernels leave the field level to ``offset``; the run offsets are independent
a priori and share it with ``offset`` through the coupled posterior, which is why the map
layer published is offset + map (a subset's posterior, in which the shared level cancels)
and a new run gets its offset's prior variance.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .component import Component, grid_inducing
from .heading import HEADING_INDUCING_RAD, CompassDeviation
from .run_offset import RunOffset
from .settings import GamSettings
from .zero_mean import ZeroMeanMatern32

# The input each nuisance component reads, and the order of their columns.
AUXILIARY_INPUT = {"heading": "yaw", "run": "run", "drift": "time"}
AUXILIARY_ORDER = ("yaw", "run", "time")
# Runs a fit can tell apart: a cap on the distinct labels drawn as inducing inputs.
MAX_RUNS = 10_000


def auxiliary_inputs(names: Sequence[str]) -> tuple[str, ...]:
    """The auxiliary input columns the named components need, in column order."""
    wanted = {AUXILIARY_INPUT[n] for n in names if n in AUXILIARY_INPUT}
    return tuple(a for a in AUXILIARY_ORDER if a in wanted)


def nuisance_components(
    names: Sequence[str], input_dim: int, settings: GamSettings, dtype: torch.dtype
) -> list[Component]:
    """The heading, run and drift components among ``names``, for map inputs of ``input_dim``.

    Args:
        names: component names (others than the nuisance ones are ignored).
        input_dim: the number of map input columns before the auxiliary ones.
        settings: initial θ and inducing counts.
        dtype: of the fixed inducing inputs.
    """
    auxiliary = auxiliary_inputs(names)
    width = input_dim + len(auxiliary)

    def column(component: str) -> int:
        return input_dim + auxiliary.index(AUXILIARY_INPUT[component])

    out = []
    if "heading" in names:
        c = column("heading")
        angles = torch.tensor(HEADING_INDUCING_RAD, dtype=dtype)[:, None]
        kernel = CompassDeviation(settings.heading_variance, (c,))
        out.append(Component("heading", kernel, grid_inducing(angles, [c], width)))
    if "run" in names:
        kernel = RunOffset(settings.run_variance, (column("run"),))
        out.append(Component("run", kernel, from_data=MAX_RUNS, draw="distinct"))
    if "drift" in names:
        kernel = ZeroMeanMatern32(
            settings.drift_variance, settings.drift_lengthscale, (column("drift"),)
        )
        out.append(Component("drift", kernel, from_data=settings.drift_inducing, draw="grid"))
    return out
