"""A reading error shared by a window's readings: the pass noise as a per-window offset.

Between passes, readings of one place differ by more than within a pass (a heading-dependent
calibration residue, a pose offset): the error stays the same along a pass. Treated as white
noise it averages away over the hundreds of readings of a pass, and the map claims to know a
place to a fraction of what the passes disagree by. Here it is what it is: one offset per
window (and per output group of a model of the field vector), ``c_w ~ N(0, σ²_pass)``, shared
by the window's readings. Marginalising it, a window's noise covariance is

    Σ = σ² I + σ²_pass Σ_g 1_g 1_gᵀ

(g: the window's output groups, one for ‖B‖). Titsias' collapsed bound and the online bound
of Bui et al. (2017) hold for any Gaussian noise covariance, with ``log N(y; 0, Q_ff + Σ)``
and the trace term ``tr(Σ⁻¹ (K_ff − Q_ff))``. With ``Σ^{-1/2} = σ⁻¹ T``,
``T = I − Σ_g c_g 1_g 1_gᵀ`` and ``c_g = (1 − (1 + n_g ρ)^{-1/2}) / n_g``, ``ρ = σ²_pass / σ²``,
the bound is the white-noise bound of the whitened window ``(T y, K_bf T)`` at σ², less
``½ Σ_g log(1 + n_g ρ)``, with ``tr(T² K_ff) = tr K_ff − Σ_g γ_g 1_gᵀ K_ff 1_g`` and
``γ_g = ρ / (1 + n_g ρ)``: every quantity of the bound and of the carried posterior keeps its
form, and the window's information along its offset direction is what one offset leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.kernels import Kernel


@dataclass(frozen=True)
class WindowOffset:
    """The whitening of one window under a shared offset per output group.

    Attributes:
        onehot: [N, G] each reading's group.
        c: [G] the whitening's rank-one coefficients.
        gamma: [G] ρ / (1 + n_g ρ).
        group_sums: [G] 1_gᵀ K_ff 1_g at the kernel it was made with.
        log_det: Σ_g log(1 + n_g ρ), the offset's share of log |Σ| beyond N log σ².
    """

    onehot: Tensor
    c: Tensor
    gamma: Tensor
    group_sums: Tensor
    log_det: Tensor

    @classmethod
    def of(
        cls,
        kernel: Kernel,
        X: Tensor,
        noise_variance: Tensor,
        pass_variance: float,
        group: Tensor | None = None,
    ) -> WindowOffset | None:
        """The window's whitening under (kernel, σ²); None without a pass noise (white).

        Args:
            kernel: the kernel at the θ the bound is evaluated under (differentiable).
            X: the window's inputs [N, D] (the rows the kernel takes).
            noise_variance: the white σ² (without the pass noise), a 0-d tensor.
            pass_variance: σ²_pass [µT²].
            group: [N] each row's output group (``kernel.target_groups``); None: one group.
        """
        if pass_variance <= 0.0:
            return None
        n = X.shape[0]
        if group is None:
            onehot = X.new_ones((n, 1))
        else:
            labels = torch.unique(group, return_inverse=True)[1]
            onehot = torch.nn.functional.one_hot(labels).to(X.dtype)
        counts = onehot.sum(0)
        rho = pass_variance / noise_variance
        scale = torch.rsqrt(1.0 + counts * rho)
        c = (1.0 - scale) / counts
        gamma = rho / (1.0 + counts * rho)
        group_sums = ((onehot.mT @ kernel.K(X)) * onehot.mT).sum(-1)
        return cls(onehot, c, gamma, group_sums, torch.log1p(counts * rho).sum())

    def rows(self, V: Tensor) -> Tensor:
        """``V T`` for rows V [M, N] over the window's readings."""
        return V - ((V @ self.onehot) * self.c) @ self.onehot.mT

    def targets(self, y: Tensor) -> Tensor:
        """``T y`` [N]."""
        return y - self.onehot @ (self.c * (self.onehot.mT @ y))

    def kff_sum(self, kff_diag_sum: Tensor) -> Tensor:
        """``tr(T² K_ff)`` from ``tr K_ff``."""
        return kff_diag_sum - (self.gamma * self.group_sums).sum()
