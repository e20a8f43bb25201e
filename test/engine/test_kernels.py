"""Kernels against closed forms; composition, constraints and spec round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import Constant, Matern52, SquaredExponential, kernel_from_spec
from gp_mapper.engine.core.kernels import LENGTHSCALE_FLOOR, VARIANCE_FLOOR


def test_matern52_and_se_match_closed_forms(rng: np.random.Generator) -> None:
    X = torch.as_tensor(rng.normal(size=(6, 2)))
    X2 = torch.as_tensor(rng.normal(size=(4, 2)))
    r = torch.cdist(X, X2) / 0.7
    m = Matern52(2.0, 0.7).double().K(X, X2)
    expected = 2.0 * (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)
    torch.testing.assert_close(m, expected.detach())
    se = SquaredExponential(1.5, 0.7).double().K(X, X2)
    torch.testing.assert_close(se, (1.5 * torch.exp(-0.5 * r**2)).detach())


def test_ard_lengthscales_scale_each_axis() -> None:
    k = Matern52(1.0, [1.0, 10.0], ard_dims=2).double()
    a = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    along_x = k.K(a, torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    along_y = k.K(a, torch.tensor([[0.0, 1.0]], dtype=torch.float64))
    assert float(along_y.detach()) > float(along_x.detach())


def test_sum_adds_and_exposes_the_constant_part() -> None:
    k = (Constant(500.0) + Matern52(3.0, 1.0)).double()
    X = torch.zeros((3, 2), dtype=torch.float64)
    torch.testing.assert_close(k.K_diag(X), torch.full((3,), 503.0, dtype=torch.float64))
    assert k.constant_variance() == pytest.approx(500.0)
    local = k.without_constant()
    assert isinstance(local, Matern52)
    assert set(k.hyperparameters()) == {
        "constant_variance",
        "matern52_variance",
        "matern52_lengthscale",
    }


def test_gradient_is_finite_at_zero_distance() -> None:
    k = Matern52(1.0, 1.0).double()
    X = torch.zeros((3, 1), dtype=torch.float64)
    k.K(X).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in k.parameters())


def test_positive_parameters_respect_their_floor() -> None:
    k = SquaredExponential(1.0, 1.0).double()
    with torch.no_grad():
        k.raw_lengthscale.fill_(-1e3)
    assert float(k.lengthscale) >= LENGTHSCALE_FLOOR
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        SquaredExponential(1.0, -2.0)


def test_spec_round_trip_rebuilds_the_same_kernel(rng: np.random.Generator) -> None:
    k = (Constant(480.0) + Matern52(12.0, [0.5, 0.9], ard_dims=2)).double()
    rebuilt = kernel_from_spec(k.to_spec()).double()
    X = torch.as_tensor(rng.normal(size=(5, 2)))
    torch.testing.assert_close(k.K(X), rebuilt.K(X))
    with pytest.raises(ValueError, match="unknown kernel type"):
        kernel_from_spec({"type": "periodic"})


def test_variance_limit_holds_for_any_raw_value_and_survives_a_spec_round_trip() -> None:
    k = SquaredExponential(1.0, 1.0, variance_max=2000.0).double()
    assert float(k.variance.detach()) == pytest.approx(1.0, rel=1e-12)
    for raw, expected in ((1e3, 2000.0), (-1e3, VARIANCE_FLOOR)):
        with torch.no_grad():
            k.raw_variance.fill_(raw)
        assert float(k.variance.detach()) == pytest.approx(expected, rel=1e-9)
    with torch.no_grad():
        k.raw_variance.fill_(40.0)  # on the limit to double precision
    rebuilt = kernel_from_spec(k.to_spec())
    assert rebuilt.variance_max == 2000.0
    assert float(rebuilt.variance.detach()) == pytest.approx(2000.0, rel=1e-12)
    # The gradient still reaches the raw value inside the limits.
    k2 = SquaredExponential(10.0, 1.0, variance_max=2000.0).double()
    k2.K(torch.zeros(1, 1, dtype=torch.float64)).sum().backward()
    assert float(k2.raw_variance.grad) > 0.0
    assert "variance_max" not in SquaredExponential().to_spec()
    with pytest.raises(ValueError, match=r"must be in"):
        SquaredExponential(3000.0, variance_max=2000.0)
    with pytest.raises(ValueError, match="variance_max"):
        SquaredExponential(1.0, variance_max=0.0)
