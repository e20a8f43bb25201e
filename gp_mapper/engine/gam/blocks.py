"""The kernel blocks of an additive model at a batch of inputs, one set per component."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from torch import Tensor

from .component import Component


class Blocks(NamedTuple):
    """Per component c: ``K_c = k_c(Z_c, Z_c)``, ``K_cx = k_c(Z_c, X)``, ``k_c(x, x)``.

    Attributes:
        Kuu: [M_c, M_c] each.
        Kux: [M_c, N] each.
        kdiag: [N] each.
    """

    Kuu: tuple[Tensor, ...]
    Kux: tuple[Tensor, ...]
    kdiag: tuple[Tensor, ...]


def kernel_blocks(components: Sequence[Component], X: Tensor) -> Blocks:
    """The blocks of every component at X [N, D] (differentiable in the kernels' parameters)."""
    return Blocks(
        tuple(c.kernel.K(c.inducing) for c in components),
        tuple(c.kernel.K(c.inducing, X) for c in components),
        tuple(c.kernel.K_diag(X) for c in components),
    )
