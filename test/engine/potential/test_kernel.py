"""The curl-free kernel's closed forms against autograd of the scalar potential kernel."""

from __future__ import annotations

import math

import pytest
import torch

from gp_mapper.engine import Matern32, Matern52, SquaredExponential
from gp_mapper.engine.core.hyperparameters import node_hyperparameters
from gp_mapper.engine.core.kernels import kernel_from_spec
from gp_mapper.engine.potential import CurlFreeKernel

from .conftest import DTYPE

EARTH_VARIANCE = 5.0


def potential_kernel(kernel: CurlFreeKernel, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """σ_φ² times the base profile at |a − b| / ℓ, written out independently of kernel.py."""
    r = torch.sqrt(((a - b) ** 2).sum() / kernel.lengthscale[0] ** 2 + 1e-300)
    if kernel.base.kind == "se":
        profile = torch.exp(-0.5 * r * r)
    else:
        s = math.sqrt(5.0) * r
        profile = (1.0 + s + s * s / 3.0) * torch.exp(-s)
    return kernel.potential_variance() * profile


def reference(kernel: CurlFreeKernel, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Every covariance by autograd of the potential kernel (module docstring of kernel.py)."""
    out = torch.zeros(A.shape[0], B.shape[0], dtype=DTYPE)
    for i in range(A.shape[0]):
        for j in range(B.shape[0]):
            ta, tb = int(A[i, 3]), int(B[j, 3])
            a = A[i, :3].clone().requires_grad_(True)
            b = B[j, :3].clone().requires_grad_(True)
            k = potential_kernel(kernel, a, b)
            if ta == 0 and tb == 0:
                value = k
            elif ta in (1, 2, 3) and tb == 0:
                value = -torch.autograd.grad(k, a)[0][ta - 1]
            elif ta == 0 and tb in (1, 2, 3):
                value = -torch.autograd.grad(k, b)[0][tb - 1]
            elif ta in (1, 2, 3) and tb in (1, 2, 3):
                da = torch.autograd.grad(k, a, create_graph=True)[0][ta - 1]
                value = torch.autograd.grad(da, b)[0][tb - 1]  # cov(−∂φ, −∂φ') = ∂∂'k
                value = value + (EARTH_VARIANCE if ta == tb else 0.0)
            elif ta == 0 or tb == 0:
                value = torch.tensor(0.0)  # the uniform field is independent of φ
            else:
                same = (ta - 1) % 3 == (tb - 1) % 3
                value = torch.tensor(EARTH_VARIANCE if same else 0.0)
            out[i, j] = float(value.detach())
    return out


def every_functional(P: torch.Tensor) -> torch.Tensor:
    tags = torch.arange(7, dtype=DTYPE).repeat_interleave(P.shape[0])[:, None]
    return torch.cat([P.repeat(7, 1), tags], dim=1)


@pytest.mark.parametrize("base", [SquaredExponential(3.0, 0.7), Matern52(3.0, 0.7)])
def test_closed_form_covariances_equal_autograd_of_the_potential(base) -> None:
    kernel = CurlFreeKernel(base, EARTH_VARIANCE).double()
    generator = torch.Generator().manual_seed(0)
    A = every_functional(torch.randn(3, 3, generator=generator, dtype=DTYPE))
    B = every_functional(torch.randn(2, 3, generator=generator, dtype=DTYPE))
    with torch.no_grad():
        K = kernel.K(A, B)
    torch.testing.assert_close(K, reference(kernel, A, B), rtol=1e-10, atol=1e-12)
    with torch.no_grad():
        torch.testing.assert_close(torch.diagonal(kernel.K(A)), kernel.K_diag(A))


@pytest.mark.parametrize("base", [SquaredExponential(3.0, 0.7), Matern52(3.0, 0.7)])
def test_field_variance_is_the_base_variance_and_gradients_are_finite_at_zero(base) -> None:
    kernel = CurlFreeKernel(base, EARTH_VARIANCE).double()
    rows = torch.tensor([[0.1, 0.2, 0.0, 1.0], [0.1, 0.2, 0.0, 2.0]], dtype=DTYPE)
    K = kernel.K(rows)  # one reading's x and y: independent, each σ_B² + σ_E²
    torch.testing.assert_close(K.detach(), (3.0 + EARTH_VARIANCE) * torch.eye(2, dtype=DTYPE))
    K.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in kernel.parameters())


def test_gram_matrix_of_field_and_potential_rows_is_positive_semidefinite() -> None:
    kernel = CurlFreeKernel(Matern52(2.0, 0.5), EARTH_VARIANCE).double()
    P = torch.rand(15, 3, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    with torch.no_grad():
        K = kernel.K(every_functional(P))
    assert float(torch.linalg.eigvalsh(K).min()) > -1e-9 * float(K.diagonal().max())


def test_refuses_a_once_differentiable_or_anisotropic_potential() -> None:
    with pytest.raises(ValueError, match="twice-differentiable"):
        CurlFreeKernel(Matern32(1.0, 1.0))
    with pytest.raises(ValueError, match="isotropic"):
        CurlFreeKernel(SquaredExponential(1.0, [1.0, 2.0], ard_dims=2))
    with pytest.raises(ValueError, match=r"\[n, 4\]"):
        CurlFreeKernel(SquaredExponential()).K(torch.zeros(2, 3, dtype=DTYPE))


def test_spec_round_trip_and_node_parameters() -> None:
    kernel = CurlFreeKernel(Matern52(40.0, 0.3), 800.0)
    again = kernel_from_spec(kernel.to_spec())
    assert isinstance(again, CurlFreeKernel) and again.to_spec() == kernel.to_spec()
    theta = node_hyperparameters(kernel, 0.5)
    assert theta["kernel"] == "matern52" and theta["noise_variance"] == 0.5
    assert theta["kernel_variance"] == pytest.approx(40.0)
    assert theta["constant_variance"] == pytest.approx(800.0)
    assert theta["lengthscale"] == pytest.approx(0.3)
