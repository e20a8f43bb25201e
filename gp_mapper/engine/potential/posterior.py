"""Predicting the field from the sparse posterior over potential functionals.

The scalar engine's :class:`~..vips.posterior.Posterior` predicts any functional's marginal;
here the three components at a point come as one block, with their 3 × 3 covariance, and ‖B‖
follows from them to first order (the delta method): ``E‖B‖ ≈ ‖μ‖`` and
``var ‖B‖ ≈ μᵀΣμ / ‖μ‖²``, the variance of the field along its own direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from ..model import ChangesEverywhere, Target
from ..vips.posterior import VARIANCE_CLAMP, Posterior
from .functionals import field_rows, hard_iron_rows, spatial
from .kernel import CurlFreeKernel
from .selector import potential_support

# Below this ‖μ‖ [µT] the field's direction is unknown: ‖B‖'s variance is then the mean of
# the three components' (the delta method divides by ‖μ‖²).
DIRECTION_FLOOR = 1e-9


def norm_moments(mean: Tensor, cov: Tensor) -> tuple[Tensor, Tensor]:
    """‖B‖'s mean and variance [S] from the field's mean [S, 3] and covariance [S, 3, 3]."""
    norm = mean.norm(dim=-1)
    along = (mean[:, None, :] @ cov @ mean[:, :, None])[:, 0, 0]
    isotropic = torch.diagonal(cov, dim1=-2, dim2=-1).mean(-1)
    safe = torch.clamp(norm, min=DIRECTION_FLOOR)
    var = torch.where(norm > DIRECTION_FLOOR, along / (safe * safe), isotropic)
    return norm, torch.clamp(var, min=VARIANCE_CLAMP)


@dataclass(frozen=True)
class FieldPosterior(ChangesEverywhere):
    """The map's posterior over B(p) in map_frame, and ‖B‖ for the scalar map products.

    Attributes:
        inner: the posterior over the tagged functionals (``functionals.py``).
        input_dim: 2 (positions (x, y), z = 0) or 3.
    """

    inner: Posterior
    input_dim: int
    target: ClassVar[Target] = "vector"

    def layers(self, Xs: Tensor) -> dict[str, Tensor]:
        return {}

    @property
    def kernel(self) -> CurlFreeKernel:
        kernel = self.inner.kernel
        assert isinstance(kernel, CurlFreeKernel)
        return kernel

    @property
    def support(self) -> Tensor:
        """The map positions of the inducing variables [M, D] (distinct ones)."""
        return potential_support(self.inner.Z, self.input_dim)

    @property
    def noise_variance(self) -> float:
        """σ² of each component of a reading [µT²]."""
        return self.inner.noise_variance

    @torch.no_grad()
    def predict_field(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Latent field mean [S, 3] and its covariance [S, 3, 3] at map inputs Xs [S, D]."""
        S = Xs.shape[0]
        # Rotation columns zero: the field alone, the magnetometer's offset left out.
        rows = field_rows(spatial(Xs), width=self.kernel.row_width)
        return self._moments(rows, S)

    @torch.no_grad()
    def hard_iron(self) -> tuple[Tensor, Tensor] | None:
        """The magnetometer's offset b in the device frame: mean [3] and covariance [3, 3]
        [µT, µT²]; None for a model without it."""
        if not self.kernel.has_hard_iron:
            return None
        mean, cov = self._moments(hard_iron_rows(self.inner.Z), 1)
        return mean[0], cov[0]

    def _moments(self, rows: Tensor, S: int) -> tuple[Tensor, Tensor]:
        """Mean [S, 3] and covariance [S, 3, 3] of component-major rows [3S, width] (the three
        components of S points, independent a priori)."""
        Ksb = self.kernel.K(rows, self.inner.Z)  # [3S, M]
        mean = (Ksb @ self.inner.alpha).reshape(3, S).mT
        A = Ksb.reshape(3, S, -1).transpose(0, 1)  # [S, 3, M]
        explained = (A @ self.inner.W) @ A.mT  # [S, 3, 3]
        prior = self.kernel.K_diag(rows).reshape(3, S).mT
        cov = torch.diag_embed(prior) - explained
        cov = 0.5 * (cov + cov.mT)
        diag = torch.clamp(torch.diagonal(cov, dim1=-2, dim2=-1), min=VARIANCE_CLAMP)
        cov = cov - torch.diag_embed(torch.diagonal(cov, dim1=-2, dim2=-1)) + torch.diag_embed(diag)
        return mean, cov

    @torch.no_grad()
    def predict(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """‖B‖: latent mean and variance [S] at Xs [S, D] (delta method, module docstring)."""
        return norm_moments(*self.predict_field(Xs))

    def predict_block(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`predict` (every inducing variable takes part: the uniform field is global)."""
        return self.predict(Xs)

    @torch.no_grad()
    def predict_block_with_field(self, Xs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """‖B‖'s moments [S] and the field's [S, 3], [S, 3, 3] from one prediction of the field."""
        mean, cov = self.predict_field(Xs)
        return (*norm_moments(mean, cov), mean, cov)

    @torch.no_grad()
    def prior_variance(self, Xs: Tensor) -> Tensor:
        """[S] one component's local prior variance: ‖B‖'s variance where no data are near.

        The uniform field is known from every reading, wherever it is; far from all data only
        the local part along the field's direction is unknown, which has this variance.
        """
        return self.kernel.local_field_variance().detach().expand(Xs.shape[0]).clone()
