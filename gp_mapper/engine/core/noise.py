"""Gaussian observation noise with a positive, floored variance."""

from __future__ import annotations

import math

from torch import Tensor, nn

from .transforms import inverse_softplus_with_floor, softplus_with_floor

# The smallest noise variance a fit may reach (µT² for the magnetometer); keeps σ⁻² finite.
NOISE_FLOOR = 1e-6


class GaussianNoise(nn.Module):
    """``y = f(x) + ε``, ``ε ~ N(0, σ² + σ²_pass)``: σ² fitted, σ²_pass fixed.

    σ² is stored raw through a softplus with NOISE_FLOOR. σ²_pass is the part of a reading's
    error that stays the same over a pass along the path (a heading-dependent calibration
    residue, a pose offset): within a window it looks like field, so a fit cannot identify it;
    it is added as a fixed variance instead. ``variance`` is the sum, what a reading's
    predictive adds to the latent variance.

    Args:
        variance: initial fitted σ² [µT²], at least NOISE_FLOOR; a value on the floor (where a
            fit can end) is stored as the raw value ``-transforms.RAW_AT_LIMIT``.
        pass_variance: the fixed σ²_pass [µT²], at least 0.
    """

    def __init__(self, variance: float = 0.1, pass_variance: float = 0.0) -> None:
        super().__init__()
        if not (math.isfinite(pass_variance) and pass_variance >= 0.0):
            raise ValueError(f"pass_variance must be finite and >= 0, got {pass_variance}")
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, NOISE_FLOOR))
        self.pass_variance = float(pass_variance)

    @property
    def fitted_variance(self) -> Tensor:
        """The fitted σ² alone [µT²]."""
        return softplus_with_floor(self.raw_variance, NOISE_FLOOR)

    @property
    def variance(self) -> Tensor:
        """σ² + σ²_pass [µT²]."""
        return self.fitted_variance + self.pass_variance

    def cell_variance(self, counts: Tensor) -> Tensor:
        """[C] the noise of the mean of ``counts`` readings of one pass: σ²/n + σ²_pass
        (``cells.py``)."""
        return self.fitted_variance / counts + self.pass_variance
