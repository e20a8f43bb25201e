"""The zero-mean SE kernel: its closed-form integrals, and that it integrates to zero.

The kernel of Adam, Durrande & John 2018, Sec. 7 eq. 8 (after Durrande et al. 2013).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine.core.kernels import Product
from gp_mapper.engine.gam import ZeroMeanSE, component_kernel_from_spec
from gp_mapper.engine.gam.zero_mean import se_interval_double_integral, se_interval_integral

DTYPE = torch.float64
# Gauss–Legendre nodes: exact for polynomials of degree < 2·QUADRATURE; SE at ℓ ≥ 0.1 needs few.
QUADRATURE = 80


def legendre(low: float, high: float) -> tuple[torch.Tensor, torch.Tensor]:
    x, w = np.polynomial.legendre.leggauss(QUADRATURE)
    half = 0.5 * (high - low)
    nodes = torch.as_tensor(low + half * (x + 1.0), dtype=DTYPE)
    return nodes, torch.as_tensor(half * w, dtype=DTYPE)


@pytest.mark.parametrize("lengthscale", [0.1, 0.5, 3.0, 80.0])
def test_closed_form_integrals_match_quadrature(lengthscale: float) -> None:
    low, high = -0.5, 1.5
    nodes, weights = legendre(low, high)
    ell = torch.tensor(lengthscale, dtype=DTYPE)
    x = torch.tensor([-0.5, 0.0, 0.7, 1.5], dtype=DTYPE)
    g = torch.exp(-0.5 * ((x[:, None] - nodes[None, :]) / ell) ** 2)
    torch.testing.assert_close(se_interval_integral(x, ell, low, high), g @ weights)
    G = torch.exp(-0.5 * ((nodes[:, None] - nodes[None, :]) / ell) ** 2)
    torch.testing.assert_close(se_interval_double_integral(ell, low, high), weights @ G @ weights)


CASES = [(0.2, (0.0, 1.0)), (1.1, (0.0, 1.0)), (80.0, (0.0, 1.0)), (0.7, (-2.0, 3.0))]


@pytest.mark.parametrize(("lengthscale", "interval"), CASES)
def test_zero_mean_kernel_integrates_to_zero(
    lengthscale: float, interval: tuple[float, float]
) -> None:
    kernel = ZeroMeanSE(2.5, lengthscale, (1,), interval).double()
    nodes, weights = legendre(*interval)
    X = torch.zeros(QUADRATURE, 3, dtype=DTYPE)
    X[:, 1] = nodes
    Y = torch.zeros(5, 3, dtype=DTYPE)
    Y[:, 1] = torch.linspace(interval[0] - 0.3, interval[1] + 0.3, 5, dtype=DTYPE)
    integral = weights @ kernel.K(X, Y)  # ∫ s(x, y) dx at five y, two outside the interval
    assert integral.abs().max() < 1e-8 * float(kernel.variance.detach())
    assert torch.linalg.eigvalsh(kernel.K(X)).min() > -1e-9 * float(kernel.variance.detach())
    torch.testing.assert_close(kernel.K_diag(Y), torch.diagonal(kernel.K(Y)))


def test_product_of_zero_mean_kernels_has_zero_marginals() -> None:
    """s7(x1) s8(x2) integrates to 0 over x1 and over x2 alone: the ANOVA interaction."""
    kernel = Product(ZeroMeanSE(1.0, 0.6, (0,)), ZeroMeanSE(1.0, 0.4, (1,))).double()
    nodes, weights = legendre(0.0, 1.0)
    X = torch.stack([nodes, torch.full_like(nodes, 0.37)], 1)
    Y = torch.tensor([[0.2, 0.9], [0.8, 0.1]], dtype=DTYPE)
    assert (weights @ kernel.K(X, Y)).abs().max() < 1e-9


def test_spec_round_trip() -> None:
    kernel = Product(ZeroMeanSE(1.3, 0.6, (0,), (0.0, 2.0)), ZeroMeanSE(0.7, 0.4, (2,)))
    again = component_kernel_from_spec(kernel.to_spec())
    X = torch.rand(6, 3, dtype=DTYPE)
    torch.testing.assert_close(again.double().K(X), kernel.double().K(X))
    with pytest.raises(ValueError, match="exactly one column"):
        ZeroMeanSE(1.0, 1.0, (0, 1))
