"""Gaussian observation noise with a positive, floored variance."""

from __future__ import annotations

from torch import Tensor, nn

from .transforms import inverse_softplus_with_floor, softplus_with_floor

# The smallest noise variance a fit may reach (µT² for the magnetometer); keeps σ⁻² finite.
NOISE_FLOOR = 1e-6


class GaussianNoise(nn.Module):
    """``y = f(x) + ε``, ``ε ~ N(0, σ²)``; σ² stored raw through a softplus with NOISE_FLOOR.

    Args:
        variance: initial σ² [µT²], at least NOISE_FLOOR; a value on the floor (where a fit can
            end) is stored as the raw value ``-transforms.RAW_AT_LIMIT``.
    """

    def __init__(self, variance: float = 0.1) -> None:
        super().__init__()
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, NOISE_FLOOR))

    @property
    def variance(self) -> Tensor:
        return softplus_with_floor(self.raw_variance, NOISE_FLOOR)
