"""The actions S [N, I] of a computation-aware GP: learned block-sparse (CaGP-Opt) or CG (CaGP-CG).

Whatever the policy, the model sees an :class:`Actions`: S with unit-norm, mutually orthogonal
columns, so ``SᵀS = I`` and the ELBO's ``log det(SᵀS)`` term is 0 (our stable form of Wenger et
al. 2024, eq. 11). The posterior depends only on the column space of S (Lemma S4, Cor. S1), so
this normalisation changes nothing but the conditioning, and it makes the loss invariant to
column scaling by construction, as eq. 11 is: the reference code (the GPyTorch branch of the
paper's S4.2) took the log of the sum of the squared column norms until its July-2025 fix.

- :class:`BlockSparseActions` (eq. 14, Sec. 4): block b holds the data points
  ``index[b]``; blocks are disjoint and together hold every point. With N = q·I + r, r blocks
  have q + 1 points and I − r have q (ragged blocks, padded with zero entries), so no point is
  dropped, unlike the reference code, which truncates to q·I points.
- :func:`cg_actions` (Sec. 4, CG residual actions): the residuals of conjugate gradients on
  ``K̂ v = y``, orthonormalised by QR twice, computed without gradients (the ELBO bounds the
  evidence for any S, so its θ-gradient at fixed S is that of a valid bound, as in the reference
  code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from ..core.kernels import Kernel
from .kernel_actions import DEFAULT_CHUNK, block_rows, kernel_action_product
from .settings import default as setting_default

# A block of all-zero entries has no direction; its norm is floored so that normalising it
# stays finite (a random initialisation never produces one).
_NORM_FLOOR = 1e-300
BlockOrder = Literal["random", "data"]
BLOCK_ORDERS: tuple[str, ...] = ("random", "data")
# The CG tolerance of Wenger et al. 2024, Table S1: stop when ‖r‖ ≤ 1e-4 ‖y‖.
DEFAULT_CG_TOLERANCE = setting_default("cagp.cg_tolerance")
# CG forms K + σ²I once and multiplies it densely when it takes at most this many bytes (3.2 GB
# at N 20 000 in float64): every step otherwise evaluates the kernel on all N² pairs again,
# 93 % of an epoch at N 6000 (1.2 s a step against 20 ms dense, one thread).
DENSE_CG_BYTES = 4 * 2**30


def dense_cg(n: int, itemsize: int = 8) -> bool:
    """Whether CG on N points multiplies a dense K + σ²I (``DENSE_CG_BYTES``)."""
    return n * n * itemsize <= DENSE_CG_BYTES


@dataclass(frozen=True)
class Actions:
    """S [N, I] with orthonormal columns, in the block or the dense layout.

    Attributes:
        values: block entries [I, k] (each row unit norm; padding entries 0), or the dense
            actions [N, I] (orthonormal columns).
        index: [I, k] the data index of each block entry (padding repeats a point of its own
            block, with entry 0); None for dense actions.
    """

    values: Tensor
    index: Tensor | None

    @property
    def block(self) -> bool:
        return self.index is not None

    @property
    def num_actions(self) -> int:
        """I, the number of columns of S."""
        return int(self.values.shape[0] if self.block else self.values.shape[1])

    def points(self, X: Tensor) -> Tensor:
        """The inputs the action entries sit on: [I·k, D] (block) or X [N, D] (dense)."""
        return X if self.index is None else X[self.index.reshape(-1)]

    def transpose_apply(self, V: Tensor) -> Tensor:
        """``Sᵀ V`` for V [N] or [N, M]: [I] or [I, M]."""
        if self.index is None:
            return self.values.mT @ V
        if V.ndim == 1:
            return (self.values * V[self.index]).sum(-1)
        return torch.einsum("ik,ikm->im", self.values, V[self.index])

    def kernel_product(self, kernel: Kernel, X: Tensor, chunk: int = DEFAULT_CHUNK) -> Tensor:
        """``K(X, X) S`` [N, I] by the chunked op (never forms K)."""
        return kernel_action_product(
            kernel, X, self.points(X), self.values, block=self.block, chunk=chunk
        )

    def dense(self, n: int) -> Tensor:
        """S as a dense [N, I] matrix (tests and small problems only)."""
        if self.index is None:
            return self.values
        S = torch.zeros(n, self.num_actions, dtype=self.values.dtype, device=self.values.device)
        columns = torch.arange(self.num_actions, device=self.values.device)[:, None]
        # index_put_ with accumulate: a padding entry (value 0) that repeats a point adds 0.
        S.index_put_((self.index, columns.expand_as(self.index)), self.values, accumulate=True)
        return S


def block_layout(n: int, num_actions: int, permutation: Tensor) -> tuple[Tensor, Tensor]:
    """Ragged blocks over a permutation of ``range(n)``: (index [I, k], mask [I, k]).

    The first ``n mod I`` blocks have one point more than the others; k = ⌈n / I⌉. Padding
    entries repeat the first point of their block and have mask 0.

    Raises:
        ValueError: I < 1 or I > n.
    """
    if not 1 <= num_actions <= n:
        raise ValueError(f"the number of actions must be in [1, {n}], got {num_actions}")
    base, extra = divmod(n, num_actions)
    width = base + (extra > 0)
    sizes = torch.full((num_actions,), base, dtype=torch.long)
    sizes[:extra] += 1
    starts = torch.cumsum(sizes, 0) - sizes
    offsets = torch.arange(width, dtype=torch.long)
    mask = offsets[None, :] < sizes[:, None]
    position = starts[:, None] + torch.where(mask, offsets[None, :], 0)
    return permutation[position], mask


class BlockSparseActions(nn.Module):
    """Learnable block-sparse actions (CaGP-Opt, Wenger et al. 2024 eq. 14).

    Args:
        index: [I, k] data index of each entry (see :func:`block_layout`).
        mask: [I, k] True for real entries, False for padding.
        raw: [I, k] initial entries (unnormalised; padding ignored).
    """

    def __init__(self, index: Tensor, mask: Tensor, raw: Tensor) -> None:
        super().__init__()
        if index.shape != mask.shape or raw.shape != index.shape or index.ndim != 2:
            raise ValueError(
                f"index {tuple(index.shape)}, mask {tuple(mask.shape)} and raw "
                f"{tuple(raw.shape)} must be the same [I, k]"
            )
        if not bool(mask.any(1).all()):
            raise ValueError("every block must hold at least one data point")
        self.register_buffer("index", index.to(torch.long))
        self.register_buffer("mask", mask.to(torch.bool))
        self.raw = nn.Parameter(raw.clone())

    @classmethod
    def random(
        cls,
        n: int,
        num_actions: int,
        generator: torch.Generator,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
        order: BlockOrder = "random",
    ) -> BlockSparseActions:
        """Blocks with entries N(0, 1)/√k (the reference code's ``initialization="random"``;
        the paper does not state its initialisation).

        Args:
            n: data points N.
            num_actions: I, 1 ≤ I ≤ N.
            generator: a seeded CPU generator (the permutation, then the entries).
            order: "random": blocks over a random permutation (the reference code's blocks are
                contiguous in shuffled data, so random subsets); "data": contiguous runs of the
                data as given, e.g. time-ordered stretches of a log, which are spatially local
                (the paper does not try them).
        """
        if order not in BLOCK_ORDERS:
            raise ValueError(f"order must be one of {BLOCK_ORDERS}, got {order!r}")
        if order == "random":
            permutation = torch.randperm(n, generator=generator)
        else:
            permutation = torch.arange(n)
        index, mask = block_layout(n, num_actions, permutation)
        width = index.shape[1]
        raw = torch.randn(index.shape, generator=generator, dtype=torch.float64) / math.sqrt(width)
        raw = torch.where(mask, raw, 0.0)
        return cls(index.to(device), mask.to(device), raw.to(device=device, dtype=dtype))

    @property
    def num_actions(self) -> int:
        return int(self.index.shape[0])

    def forward(self) -> Actions:
        """The current actions, each block scaled to unit norm (differentiable in ``raw``)."""
        entries = self.raw * self.mask
        norms = torch.sqrt(torch.clamp((entries * entries).sum(-1, keepdim=True), _NORM_FLOOR))
        return Actions(entries / norms, self.index)


class CGActions(NamedTuple):
    """What :func:`cg_actions` returns.

    Attributes:
        actions: the orthonormalised residuals (dense layout), I' ≤ I columns.
        solution: the CG iterate v after I' steps [N] (its ``K(·, X) v`` is CaGP-CG's mean).
        iterations: I', the steps taken.
        relative_residual: ‖y − K̂ v‖ / ‖y‖ at the end.
    """

    actions: Actions
    solution: Tensor
    iterations: int
    relative_residual: float


@torch.no_grad()
def cg_actions(
    kernel: Kernel,
    noise_variance: Tensor | float,
    X: Tensor,
    y: Tensor,
    max_actions: int,
    *,
    tolerance: float = DEFAULT_CG_TOLERANCE,
    chunk: int = DEFAULT_CHUNK,
) -> CGActions:
    """CG on ``(K + σ²I) v = y`` from v = 0; its residuals r₀ … r_{I'−1} as actions.

    The residuals span the Krylov space of the first I' steps, so the CaGP posterior mean on
    them is CG's own iterate (Wenger et al. 2022; Wenger et al. 2024, Sec. 4). They are
    orthonormalised by two QR passes (the reference code's practice), which leaves their span
    unchanged.

    Args:
        kernel: prior kernel (matrix–vector products by the chunked op).
        noise_variance: σ².
        X: inputs [N, D]; y: targets [N].
        max_actions: I, the most steps (and actions).
        tolerance: stop once ‖r‖ ≤ tolerance·‖y‖.
        chunk: rows per kernel block.
    """
    if max_actions < 1:
        raise ValueError(f"max_actions must be at least 1, got {max_actions}")
    noise = torch.as_tensor(noise_variance, dtype=y.dtype, device=y.device)
    n = y.shape[0]
    if dense_cg(n, y.element_size()):
        with torch.no_grad():  # filled a block of rows at a time: no N² temporaries
            K_hat = torch.empty(n, n, dtype=y.dtype, device=y.device)
            step = block_rows(chunk, n, y.element_size())
            for start in range(0, n, step):
                K_hat[start : start + step] = kernel(X[start : start + step], X)
            K_hat.diagonal().add_(noise)

        def matvec(p: Tensor) -> Tensor:
            return K_hat @ p

    else:

        def matvec(p: Tensor) -> Tensor:
            Kp = kernel_action_product(kernel, X, X, p[:, None], block=False, chunk=chunk)
            return Kp[:, 0] + noise * p

    y_norm = torch.linalg.vector_norm(y)
    v = torch.zeros_like(y)
    r = y.clone()
    p = r.clone()
    rr = r @ r
    residuals: list[Tensor] = []
    for _ in range(min(max_actions, y.shape[0])):
        if float(torch.sqrt(rr)) <= tolerance * float(y_norm):
            break
        residuals.append(r.clone())
        Ap = matvec(p)
        curvature = p @ Ap
        if not bool(torch.isfinite(curvature)) or float(curvature) <= 0.0:
            break  # breakdown at round-off level: r is still a valid direction, stop here
        alpha = rr / curvature
        v = v + alpha * p
        r = r - alpha * Ap
        rr_next = r @ r
        p = r + (rr_next / rr) * p
        rr = rr_next
    if not residuals:  # y = 0: nothing to learn; one direction keeps the posterior defined
        residuals.append(torch.ones_like(y))
    S = torch.stack(residuals, 1)
    Q, _ = torch.linalg.qr(S)
    Q, _ = torch.linalg.qr(Q)
    relative = float(torch.sqrt(rr) / torch.clamp(y_norm, min=torch.finfo(y.dtype).tiny))
    return CGActions(Actions(Q, None), v, len(residuals), relative)
