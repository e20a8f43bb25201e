"""Kernels against closed forms; composition, constraints and spec round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import Constant, Matern52, SquaredExponential, kernel_from_spec
from gp_mapper.engine.core import GaussianNoise, Matern32
from gp_mapper.engine.core.kernels import LENGTHSCALE_FLOOR, VARIANCE_FLOOR
from gp_mapper.engine.core.noise import NOISE_FLOOR
from gp_mapper.engine.core.transforms import (
    RAW_AT_LIMIT,
    bounded_sigmoid,
    inverse_bounded_sigmoid,
    inverse_softplus_scalar,
    inverse_softplus_with_floor,
    softplus_with_floor,
)

VARIANCE_MAX = 2000.0  # the VIPS authors' limit on their UCI runs
# Raw values across the whole range: past the underflow of softplus and sigmoid (±800: exactly on
# the floor or limit), ±40 (a sigmoid on its limit in double precision), and the middle.
EXTREME_RAWS = (-800.0, -40.0, 0.0, 40.0, 800.0)


def test_matern52_and_se_match_closed_forms(rng: np.random.Generator) -> None:
    X = torch.as_tensor(rng.normal(size=(6, 2)))
    X2 = torch.as_tensor(rng.normal(size=(4, 2)))
    r = torch.cdist(X, X2) / 0.7
    m = Matern52(2.0, 0.7).double().K(X, X2)
    expected = 2.0 * (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)
    torch.testing.assert_close(m, expected.detach())
    se = SquaredExponential(1.5, 0.7).double().K(X, X2)
    torch.testing.assert_close(se, (1.5 * torch.exp(-0.5 * r**2)).detach())


def test_matern32_matches_its_closed_form_isotropic_and_ard(rng: np.random.Generator) -> None:
    X = torch.as_tensor(rng.normal(size=(6, 2)))
    X2 = torch.as_tensor(rng.normal(size=(4, 2)))
    r = torch.cdist(X, X2) / 0.7
    expected = 2.0 * (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
    torch.testing.assert_close(Matern32(2.0, 0.7).double().K(X, X2).detach(), expected)
    ls = torch.tensor([0.5, 2.0], dtype=torch.float64)
    r_ard = torch.cdist(X / ls, X2 / ls)
    expected_ard = 2.0 * (1 + math.sqrt(3) * r_ard) * torch.exp(-math.sqrt(3) * r_ard)
    ard = Matern32(2.0, [0.5, 2.0], ard_dims=2).double()
    torch.testing.assert_close(ard.K(X, X2).detach(), expected_ard)
    torch.testing.assert_close(ard.K_diag(X).detach(), torch.full((6,), 2.0, dtype=torch.float64))
    rebuilt = kernel_from_spec(ard.to_spec())
    assert isinstance(rebuilt, Matern32) and rebuilt.to_spec() == ard.to_spec()
    # Matérn-3/2 decays more slowly than 5/2 in its tail: its negligible distance is longer.
    assert Matern32(1.0, 1.0).negligible_distance(1e-9) > Matern52(1.0, 1.0).negligible_distance(
        1e-9
    )


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
    assert float(k.lengthscale.detach()) >= LENGTHSCALE_FLOOR
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


def test_inverse_transforms_accept_values_on_their_limits() -> None:
    raw = inverse_softplus_with_floor(torch.tensor([VARIANCE_FLOOR, 1.0, 100.0]), VARIANCE_FLOOR)
    assert float(raw[0]) == -RAW_AT_LIMIT
    forward = softplus_with_floor(raw, VARIANCE_FLOOR)
    assert float(forward[0]) == VARIANCE_FLOOR  # exactly on the floor again
    torch.testing.assert_close(forward[1:], torch.tensor([1.0, 100.0], dtype=torch.float64))
    assert inverse_softplus_scalar(VARIANCE_FLOOR, VARIANCE_FLOOR) == -RAW_AT_LIMIT
    # The floor as a float32 parameter reads back a little below its float64 value.
    floor32 = float(torch.tensor(VARIANCE_FLOOR, dtype=torch.float32))
    assert floor32 < VARIANCE_FLOOR
    assert float(inverse_softplus_with_floor(floor32, VARIANCE_FLOOR)) == -RAW_AT_LIMIT
    for low_or_high, raw_limit in ((VARIANCE_FLOOR, -RAW_AT_LIMIT), (VARIANCE_MAX, RAW_AT_LIMIT)):
        raw = inverse_bounded_sigmoid(low_or_high, VARIANCE_FLOOR, VARIANCE_MAX)
        assert float(raw) == raw_limit
        assert float(bounded_sigmoid(raw, VARIANCE_FLOOR, VARIANCE_MAX)) == low_or_high


def test_inverse_transforms_refuse_values_no_raw_value_reaches() -> None:
    with pytest.raises(ValueError, match="at least its floor"):
        inverse_softplus_with_floor(0.5 * VARIANCE_FLOOR, VARIANCE_FLOOR)
    with pytest.raises(ValueError, match="at least its floor"):
        inverse_softplus_scalar(-1.0, VARIANCE_FLOOR)
    with pytest.raises(ValueError, match="at least its floor"):
        inverse_softplus_with_floor(float("nan"), VARIANCE_FLOOR)
    with pytest.raises(ValueError, match="must be in"):
        inverse_bounded_sigmoid(0.0, VARIANCE_FLOOR, VARIANCE_MAX)
    with pytest.raises(ValueError, match="must be in"):
        inverse_bounded_sigmoid(1.01 * VARIANCE_MAX, VARIANCE_FLOOR, VARIANCE_MAX)
    with pytest.raises(ValueError, match="at least its floor"):
        Constant(0.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("variance_max", [None, VARIANCE_MAX])
def test_every_raw_value_survives_a_spec_round_trip(
    dtype: torch.dtype, variance_max: float | None
) -> None:
    """Floors, limits and values between rebuild from the spec onto the same values."""
    for raw_variance in EXTREME_RAWS:
        for raw_lengthscale in EXTREME_RAWS:
            k = (Constant(1.0) + Matern52(1.0, [1.0, 1.0], 2, variance_max)).to(dtype)
            with torch.no_grad():
                k.first.raw_variance.fill_(raw_variance)
                k.second.raw_variance.fill_(raw_variance)
                k.second.raw_lengthscale.fill_(raw_lengthscale)
            rebuilt = kernel_from_spec(k.to_spec()).to(dtype)
            for name, value in k.hyperparameters().items():
                torch.testing.assert_close(
                    rebuilt.hyperparameters()[name], value, rtol=1e-12, atol=0.0, msg=name
                )
    noise = GaussianNoise(1.0).to(dtype)
    with torch.no_grad():
        noise.raw_variance.fill_(EXTREME_RAWS[0])
    rebuilt = GaussianNoise(float(noise.variance.detach()))
    assert float(rebuilt.variance.detach()) == pytest.approx(NOISE_FLOOR)


@pytest.mark.parametrize("kind", [SquaredExponential, Matern32, Matern52])
def test_a_fits_fused_kernel_matrix_has_the_same_values_and_gradients(kind) -> None:
    """Inside ``first_derivatives_only`` (a fit's closure) an isotropic kernel's matrix is one
    autograd node: the same values, the same first derivatives in θ; a graph for second
    derivatives through it is refused; an ARD kernel, or inputs with gradients, take the
    elementwise path."""
    from gp_mapper.engine.core.kernels import first_derivatives_only

    gen = torch.Generator().manual_seed(0)
    Z = torch.rand(15, 2, generator=gen, dtype=torch.float64) * 3.0
    X = torch.rand(25, 2, generator=gen, dtype=torch.float64) * 3.0
    W = torch.randn(15, 25, generator=gen, dtype=torch.float64)
    kernel = Constant(5.0) + kind(1.3, 0.7)
    params = list(kernel.parameters())

    def value() -> torch.Tensor:
        return (kernel.K(Z, X) * W).sum() + kernel.K(Z).logdet()

    plain = value()
    grads = torch.autograd.grad(plain, params)
    with first_derivatives_only():
        fused = value()
        assert fused.grad_fn is not None
    torch.testing.assert_close(fused, plain, rtol=0.0, atol=0.0)
    for a, b in zip(torch.autograd.grad(fused, params), grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=0.0)
    with first_derivatives_only():
        fused = value()
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(fused, params[-1], create_graph=True)
    ard = kind(0.7, [1.0, 2.0])
    with first_derivatives_only():
        assert "StationaryMatrix" not in type(ard.K(Z, X).grad_fn).__name__
        assert "StationaryMatrix" in type(kind(0.7, 1.0).K(Z, X).grad_fn).__name__
