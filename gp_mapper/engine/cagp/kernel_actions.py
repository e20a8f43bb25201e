"""The kernel–actions product ``K S`` [N, I] without ever forming K [N, N].

Wenger et al. 2024 (CaGP), Sec. 4.1: the only expensive object of the CaGP ELBO and posterior is
``K S``. This module streams over row chunks of the inputs, evaluates one kernel block
``K(X_R, P)`` [R, P] at a time and contracts it with the actions at once, so memory is
O(N·I + chunk·P) with P ≈ N. The backward recomputes each chunk (as ``torch.utils.checkpoint``
does) and gives gradients to every kernel parameter that requires one, and to the action entries.

Actions come in two layouts (see ``actions.py``):

- **block** (CaGP-Opt, eq. 14): column b is non-zero only on its own block of data. The actions
  are ``points`` [I·k, D] (the inputs of each block, block after block; ragged blocks padded)
  and ``values`` [I, k] (the entries; padding entries are 0). The contraction of a kernel block
  ``K(X_R, points)`` viewed as [R, I, k] with ``values`` is O(R·P), not O(R·P·I).
- **dense** (CaGP-CG): ``points`` are the inputs X [N, D] and ``values`` is S [N, I]; the
  contraction is a matrix product.

The op works for any :class:`~gp_mapper.engine.core.kernels.Kernel`: Matérn-3/2, Matérn-5/2 and
SE, isotropic or ARD, with or without a constant part; it only calls ``kernel.K``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from ..core.kernels import Kernel
from .settings import default as setting_default

# Rows of X per kernel block: 256 rows of a 10⁵-point log are a 200 MB float64 block, the
# largest transient the op holds (plus autograd's recomputation in the backward, a few more).
DEFAULT_CHUNK = setting_default("cagp.chunk")
# A kernel block of at most this many bytes: larger temporaries are each a fresh mapping of
# memory (glibc maps blocks past 32 MB), whose page faults cost more than the arithmetic (at
# N 17 794, 256-row blocks of 36 MB spent half an epoch in the kernel).
BLOCK_BYTES = 16 * 2**20


def block_rows(chunk: int, columns: int, itemsize: int = 8) -> int:
    """Rows per kernel block against ``columns`` points: ``chunk``, fewer when a block would
    pass ``BLOCK_BYTES``."""
    return max(1, min(int(chunk), BLOCK_BYTES // max(1, columns * itemsize)))


def contract(K_rows: Tensor, values: Tensor, block: bool) -> Tensor:
    """``K(X_R, points)`` [R, P] times the actions: [R, I].

    Args:
        K_rows: a kernel block [R, P].
        values: [I, k] block entries (``block``) or [P, I] dense actions.
        block: the layout of ``values``.
    """
    if block:
        num, width = values.shape
        return torch.einsum("rik,ik->ri", K_rows.reshape(-1, num, width), values)
    return K_rows @ values


def _row_weights(grad_rows: Tensor, values: Tensor, block: bool) -> Tensor:
    """The weight of each kernel entry in ⟨Ḡ, K S⟩ for the rows of a chunk: [R, P]."""
    if block:
        return (grad_rows[:, :, None] * values[None, :, :]).reshape(grad_rows.shape[0], -1)
    return grad_rows @ values.mT


def _values_grad(K_rows: Tensor, grad_rows: Tensor, values: Tensor, block: bool) -> Tensor:
    """∂⟨Ḡ_R, K_R S⟩/∂values for one chunk: [I, k] or [P, I]."""
    if block:
        num, width = values.shape
        return torch.einsum("rik,ri->ik", K_rows.reshape(-1, num, width), grad_rows)
    return K_rows.mT @ grad_rows


class _KernelActionProduct(torch.autograd.Function):
    """Chunked ``K(X, points) · actions`` with a recomputing backward (see the module)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        X: Tensor,
        points: Tensor,
        values: Tensor,
        block: bool,
        kernel: Kernel,
        chunk: int,
        *params: Tensor,
    ) -> Tensor:
        out = torch.empty(
            X.shape[0], values.shape[0] if block else values.shape[1],
            dtype=values.dtype, device=values.device,
        )  # fmt: skip
        with torch.no_grad():
            for start in range(0, X.shape[0], chunk):
                rows = slice(start, start + chunk)
                out[rows] = contract(kernel.K(X[rows], points), values, block)
        ctx.save_for_backward(X, points, values, *params)
        ctx.block = block  # type: ignore[attr-defined]
        ctx.kernel = kernel  # type: ignore[attr-defined]
        ctx.chunk = chunk  # type: ignore[attr-defined]
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        X, points, values, *params = ctx.saved_tensors
        block, kernel, chunk = ctx.block, ctx.kernel, ctx.chunk
        wanted = [p for p in params if p.requires_grad]
        theta_grads = [torch.zeros_like(p) for p in wanted]
        values_grad = torch.zeros_like(values) if ctx.needs_input_grad[2] else None
        for start in range(0, X.shape[0], chunk):
            rows = slice(start, start + chunk)
            grad_rows = grad_out[rows]
            with torch.enable_grad():
                K_rows = kernel.K(X[rows], points)
                if wanted and K_rows.requires_grad:
                    parts = torch.autograd.grad(
                        K_rows,
                        wanted,
                        grad_outputs=_row_weights(grad_rows, values, block),
                        allow_unused=True,
                    )
                    for total, part in zip(theta_grads, parts, strict=True):
                        if part is not None:
                            total += part
            if values_grad is not None:
                values_grad += _values_grad(K_rows.detach(), grad_rows, values, block)
        by_param = iter(theta_grads)
        param_grads = [next(by_param) if p.requires_grad else None for p in params]
        return (None, None, values_grad, None, None, None, *param_grads)


def kernel_action_product(
    kernel: Kernel,
    X: Tensor,
    points: Tensor,
    values: Tensor,
    *,
    block: bool,
    chunk: int = DEFAULT_CHUNK,
) -> Tensor:
    """``K(X, X) S`` [N, I] in chunks of rows, differentiable in θ and in the action entries.

    Args:
        kernel: the prior kernel; gradients go to those of its parameters that require them.
        X: the inputs [N, D] (constant: no gradient).
        points: the inputs the actions sit on: [I·k, D] for block actions, X for dense ones.
        values: block entries [I, k] or dense actions [N, I].
        block: the layout of ``values``.
        chunk: rows of X per kernel block (memory O(chunk·P)).

    Returns:
        K S [N, I], in the dtype of ``values``.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    expected = values.shape[0] * values.shape[1] if block else values.shape[0]
    if points.ndim != 2 or points.shape[0] != expected or points.shape[1] != X.shape[1]:
        raise ValueError(
            f"points {tuple(points.shape)} do not match values {tuple(values.shape)} "
            f"({'block' if block else 'dense'} layout) and X {tuple(X.shape)}"
        )
    params = tuple(kernel.parameters())
    rows = block_rows(chunk, points.shape[0], values.element_size())
    return _KernelActionProduct.apply(X, points, values, block, kernel, rows, *params)
