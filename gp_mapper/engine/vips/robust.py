"""Screening a batch for gross outliers before the inducing-point selection and the fit see it.

A Gaussian likelihood has no defence against a reading of 10⁶ µT: one such target is worth more
to the bound than every other reading together, and the fit answers by inflating the noise and
collapsing the kernel. A reading is an outlier here when its residual is far outside what the
current map allows (the predictive distribution of y), measured robustly:

- against the map, the residual ``r = y − μ(x)`` over ``s = sqrt(var f(x) + σ²)``; before the
  first batch there is no map, so against the batch itself: ``r = y − median(y)`` over
  ``s = 1.4826 · MAD(r)`` (floored at σ, so a constant batch flags nothing);
- a real change of the field (an anomaly the map has not seen, an object moved) is not an
  outlier: its readings agree with their neighbours in the batch. A reading far from the map is
  kept when the running median of the signed z-scores around it is itself off the map on the
  same side (beyond half the threshold) and its residual is still plausible under the prior
  (``|r| ≤ z · sqrt(k(x, x) + σ²)``), so a stretch of new field is fitted the first time it is
  seen, while a burst of 10⁶ µT is refused however long.

Where the map knows nothing its predictive variance is the prior's, so new ground is judged
only against the prior. Neighbours are taken in the order the batch gives (the pipeline's
windows are in stamp order, so along the path); a batch in random order loses only the
agreement test's power, never the screen itself.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from .posterior import Posterior

# σ = 1.4826 · MAD for Gaussian data: 1 / Φ⁻¹(3/4), the consistency constant of the MAD.
MAD_TO_STD = 1.4826
# Readings either side in the running median of the agreement test: 9 readings, 0.18 s of a
# 50 Hz magnetometer. A glitch of up to 4 readings is an outlier; a deviation that lasts 5 or
# more (the majority of a window) is treated as field, unless the prior rules it out.
AGREEMENT_HALF_WIDTH = 4
# Neighbours agree when their median signed z-score lies beyond this fraction of the threshold
# on the reading's side: clearly off the map themselves (3.5 σ at the default), not just noisy,
# while the flanks of a real feature, less far out than its peak, still count.
AGREEMENT_FRACTION = 0.5


class Screen(NamedTuple):
    """The outcome of screening one batch.

    Attributes:
        keep: [N] bool, the readings that go on to selection and the fit.
        z: [N] |residual| over its scale (against the map, or the batch before the first map).
    """

    keep: Tensor
    z: Tensor

    @property
    def num_outliers(self) -> int:
        return int((~self.keep).sum())


def screen_outliers(
    X: Tensor,
    y: Tensor,
    kernel: Kernel,
    noise_variance: Tensor,
    posterior: Posterior | None,
    z_max: float,
    group: Tensor | None = None,
) -> Screen:
    """Flag readings whose residual is more than ``z_max`` robust standard deviations out.

    Args:
        X: inputs [N, D] (m).
        y: targets [N] (µT).
        kernel: the prior at the current θ (its diagonal bounds a plausible change).
        noise_variance: σ² at the current θ (µT²), a 0-d tensor.
        posterior: the current map, or None before the first batch.
        z_max: the threshold in standard deviations; 0 keeps every reading.
        group: the target group [N] of each row (``Kernel.target_groups``): before the first
            map each group is judged against its own median and MAD; None: one group.

    Returns:
        Which readings to keep and every reading's z-score.
    """
    n = y.shape[0]
    if z_max == 0.0:
        return Screen(torch.ones(n, dtype=torch.bool, device=y.device), torch.zeros_like(y))
    with torch.no_grad():
        noise_variance = noise_variance.detach()
        if posterior is None:
            residual, scale = _batch_residuals(y, group)
            scale = torch.clamp(scale, min=noise_variance.sqrt())
        else:
            mean, var = posterior.predict(X)
            residual = y - mean
            scale = (var.clamp(min=0.0) + noise_variance).sqrt()
        prior_scale = (kernel.K_diag(X).clamp(min=0.0) + noise_variance).sqrt()
        signed_z = residual / scale
        consensus = _running_median(signed_z, AGREEMENT_HALF_WIDTH)
        agrees = consensus * signed_z.sign() > AGREEMENT_FRACTION * z_max
        implausible = residual.abs() > z_max * prior_scale
        outlier = (signed_z.abs() > z_max) & (~agrees | implausible)
    return Screen(~outlier, signed_z.abs())


def _batch_residuals(y: Tensor, group: Tensor | None) -> tuple[Tensor, Tensor]:
    """Residuals from the median of each group and the group's robust scale, both [N]."""
    if group is None:
        group = torch.zeros(y.shape[0], dtype=torch.long, device=y.device)
    residual, scale = torch.empty_like(y), torch.empty_like(y)
    for g in group.unique():
        rows = group == g
        r = y[rows] - y[rows].median()
        residual[rows] = r
        scale[rows] = MAD_TO_STD * r.abs().median()
    return residual, scale


def _running_median(values: Tensor, half_width: int) -> Tensor:
    """The median of each value and its ``half_width`` neighbours either side [N] -> [N].

    Windows are cut short at the ends (NaN padding, ignored by ``nanmedian``).
    """
    pad = torch.full((half_width,), torch.nan, dtype=values.dtype, device=values.device)
    windows = torch.cat([pad, values, pad]).unfold(0, 2 * half_width + 1, 1)  # [N, 2h + 1]
    return windows.nanmedian(dim=1).values
