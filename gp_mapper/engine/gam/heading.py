"""The heading component's kernel: the classic compass-deviation curve as a zero-mean GP on S¹.

A magnetometer carried by a robot also reads the robot's own magnetisation. In the horizontal
plane its effect on the reading is the compass-deviation curve of ship and aircraft compass
swinging, ``A + B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ`` in the heading (yaw) ψ: the first
harmonic from hard iron (a magnet fixed to the body), the second from soft iron (body material
magnetised by the field it turns in). Putting independent zero-mean Gaussian priors on
B, C (variance v₁) and D, E (variance v₂) gives the kernel

    k(ψ, ψ') = v₁ cos(ψ − ψ') + v₂ cos 2(ψ − ψ'),

which is stationary on the circle and zero-mean over it (every sample path integrates to 0 over a
turn: our identifiability rule, a zero-mean kernel wherever an input has a natural measure). A, the
constant, is left to the model's ``offset`` component, where it cannot be told from the field level
anyway.

Why this basis and not the periodic kernel minus its mean (the other zero-mean option): the
physics predicts these two harmonics and no others; the kernel has rank 4, so four inducing
headings represent it exactly (no sparse-approximation error, weight-space inducing points),
and its hyperparameters are the two harmonic powers, which read directly as hard- and
soft-iron strength. A periodic SE kernel would spend its prior on harmonics 3, 4, ... that a
rigid body does not produce, and would need 8-16 inducing headings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import VARIANCE_FLOOR, Kernel
from ..core.transforms import inverse_softplus_with_floor, softplus_with_floor

# Four headings at which the rank-4 kernel is full rank and well conditioned: the Gram matrix
# of [sin ψ, cos ψ, sin 2ψ, cos 2ψ] at 0°, 60°, 120°, 180° has condition number √3 (any four
# equally spaced headings are singular: the second harmonic repeats every 180°).
HEADING_INDUCING_RAD: tuple[float, ...] = tuple(k * math.pi / 3.0 for k in range(4))


def deviation_features(yaw: Tensor) -> Tensor:
    """``[sin ψ, cos ψ, sin 2ψ, cos 2ψ]`` [N, 4] at yaw [N] (radians)."""
    return torch.stack(
        [torch.sin(yaw), torch.cos(yaw), torch.sin(2.0 * yaw), torch.cos(2.0 * yaw)], -1
    )


class CompassDeviation(Kernel):
    """``v₁ cos(ψ − ψ') + v₂ cos 2(ψ − ψ')`` on one column, the heading ψ in radians.

    Args:
        variance: initial (v₁, v₂), the prior variances of the first-harmonic coefficients
            (B, C) and of the second-harmonic ones (D, E) [µT²]; one number sets both.
        active_dims: the one column holding ψ.
    """

    kind = "compass_deviation"

    def __init__(
        self, variance: float | Sequence[float] = 1.0, active_dims: Sequence[int] = (0,)
    ) -> None:
        super().__init__(active_dims)
        if self.active_dims is None or len(self.active_dims) != 1:
            raise ValueError(f"a compass-deviation kernel reads one column, got {active_dims}")
        v = torch.as_tensor(variance, dtype=torch.float64).reshape(-1)
        if v.numel() == 1:
            v = v.repeat(2)
        if v.numel() != 2 or not torch.isfinite(v).all() or (v <= 0).any():
            raise ValueError(f"variance must be one or two positive numbers, got {variance}")
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(v, VARIANCE_FLOOR))

    @property
    def variance(self) -> Tensor:
        """(v₁, v₂) [2], µT²."""
        return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        X2 = X if X2 is None else X2
        d = X[:, 0][:, None] - X2[:, 0][None, :]
        v = self.variance
        return v[0] * torch.cos(d) + v[1] * torch.cos(2.0 * d)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.variance.sum().expand(X.shape[0])

    def to_spec(self) -> dict[str, Any]:
        return self._leaf_spec(
            {"type": self.kind, "variance": self.variance.detach().cpu().tolist()}
        )

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(self.kind, {"variance": self.variance})]
