"""The chunked ``K S`` op against dense ``K @ S``: values and gradients."""

from __future__ import annotations

import pytest
import torch

from gp_mapper.engine import Constant, Kernel, Matern32, Matern52, SquaredExponential
from gp_mapper.engine.cagp import BlockSparseActions, kernel_action_product

from .conftest import DTYPE, INPUT_DIM, make_problem

# Both sides are float64 sums of the same terms in another order.
TOL = {"rtol": 1e-10, "atol": 1e-11}


def kernels() -> list[tuple[str, Kernel]]:
    return [
        ("matern32_ard", Matern32(1.3, [0.6, 1.1], ard_dims=INPUT_DIM)),
        ("matern52_ard", Matern52(0.8, [0.9, 0.4], ard_dims=INPUT_DIM)),
        ("se_ard", SquaredExponential(1.7, [0.5, 0.8], ard_dims=INPUT_DIM)),
        ("se_iso_plus_constant", Constant(2.0) + SquaredExponential(1.0, 0.7)),
    ]


def dense_and_chunked(kernel: Kernel, block: bool, n: int, num: int, chunk: int):
    X = make_problem(n).X
    kernel = kernel.to(DTYPE)
    if block:
        actions = BlockSparseActions.random(n, num, torch.Generator().manual_seed(3))
        values = actions().values.detach().clone().requires_grad_(True)
        index = actions.index
        points = X[index.reshape(-1)]
    else:
        values = torch.randn(n, num, dtype=DTYPE, generator=torch.Generator().manual_seed(4))
        values.requires_grad_(True)
        points = X
    KS = kernel_action_product(kernel, X, points, values, block=block, chunk=chunk)
    # Dense reference: the block entries scattered into S [N, I].
    if block:
        S = torch.zeros(n, num, dtype=DTYPE)
        columns = torch.arange(num)[:, None].expand_as(index)
        S = S.index_put((index, columns), values, accumulate=True)
    else:
        S = values
    reference = kernel.K(X) @ S
    return kernel, values, KS, reference


@pytest.mark.parametrize("block", [True, False], ids=["block", "dense"])
@pytest.mark.parametrize(("name", "kernel"), kernels(), ids=[k[0] for k in kernels()])
def test_chunked_product_and_its_gradients_equal_dense_autograd(
    name: str, kernel: Kernel, block: bool
) -> None:
    # 203 points in 17 ragged blocks, chunks of 37 rows: no size divides another.
    kernel, values, KS, reference = dense_and_chunked(kernel, block, 203, 17, chunk=37)
    torch.testing.assert_close(KS, reference, **TOL)
    weight = torch.randn(KS.shape, dtype=DTYPE, generator=torch.Generator().manual_seed(5))
    params = [values, *kernel.parameters()]
    grads = torch.autograd.grad((KS * weight).sum(), params)
    grads_ref = torch.autograd.grad((reference * weight).sum(), params)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(g, g_ref, **TOL)


def test_frozen_kernel_parameters_get_no_gradient_and_actions_still_do() -> None:
    kernel = Matern32(1.0, [0.6, 1.1], ard_dims=INPUT_DIM).to(DTYPE)
    kernel.raw_variance.requires_grad_(False)
    kernel, values, KS, _ = dense_and_chunked(kernel, True, 120, 12, chunk=50)
    KS.sum().backward()
    assert kernel.raw_variance.grad is None
    assert kernel.raw_lengthscale.grad is not None and values.grad is not None


def test_memory_is_chunked_the_full_matrix_is_never_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = SquaredExponential(1.0, 0.5).to(DTYPE)
    n, chunk = 150, 16
    X = make_problem(n).X
    actions = BlockSparseActions.random(n, 10, torch.Generator().manual_seed(2))
    largest: list[int] = []
    original = SquaredExponential._K

    def spy(self: Kernel, A: torch.Tensor, B: torch.Tensor | None) -> torch.Tensor:
        largest.append(A.shape[0])
        return original(self, A, B)

    monkeypatch.setattr(SquaredExponential, "_K", spy)
    values = actions().values
    KS = kernel_action_product(
        kernel, X, X[actions.index.reshape(-1)], values, block=True, chunk=chunk
    )
    KS.sum().backward()
    assert max(largest) <= chunk


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_product_and_gradients_equal_the_cpu_ones() -> None:
    _, kernel = kernels()[0]
    kernel_cpu, values_cpu, KS_cpu, _ = dense_and_chunked(kernel, True, 203, 17, chunk=37)
    grads_cpu = torch.autograd.grad(KS_cpu.sum(), [values_cpu, *kernel_cpu.parameters()])
    X = make_problem(203).X.cuda()
    kernel_gpu = kernel_cpu.cuda()
    actions = BlockSparseActions.random(203, 17, torch.Generator().manual_seed(3))
    index = actions.index.cuda()
    values = values_cpu.detach().cuda().requires_grad_(True)
    KS = kernel_action_product(kernel_gpu, X, X[index.reshape(-1)], values, block=True, chunk=37)
    torch.testing.assert_close(KS.cpu(), KS_cpu.detach(), **TOL)
    grads = torch.autograd.grad(KS.sum(), [values, *kernel_gpu.parameters()])
    for g, g_cpu in zip(grads, grads_cpu, strict=True):
        torch.testing.assert_close(g.cpu(), g_cpu, rtol=1e-9, atol=1e-9)
