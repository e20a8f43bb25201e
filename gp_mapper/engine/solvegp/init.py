"""Initial inducing inputs Z [M, D] and O [M2, D]: k-means, or the greedy pivoted-Cholesky order.

The authors' notebook for Shi, Titsias & Mnih 2020 (github.com/thjashin/solvegp; the paper
states no placement) runs k-means into M + M2 centres and gives the first M to Z, the rest to
O. The centres here come in k-means++ seeding order, whose first centres are
spread over the data, so Z is the coarse backbone and O fills in. The greedy alternative takes
the pivots of a pivoted Cholesky of the kernel matrix (``core.greedy``, largest conditional prior
variance first): the first M to Z, the next M2 to O, so O starts where Z explains least.
With no more data than M + M2 the data themselves are the inducing inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from ..core.greedy import PivotedCholesky
from ..core.kernels import Kernel
from ..core.linalg import Jitter

InitMethod = Literal["kmeans", "greedy"]
INIT_METHODS: tuple[str, ...] = ("kmeans", "greedy")
# Lloyd iterations after the k-means++ seeding; the seeding is already O(log k)-competitive
# (Arthur & Vassilvitskii 2007), a few dozen iterations only polish it.
KMEANS_ITERATIONS = 25
# Seeded centres between two progress ticks of k-means++.
TICK_CENTRES = 256
# k-means runs on a random subsample of at most this many points: O(n·k·D) per iteration,
# and 10⁵ samples cover a building-sized map at the ~0.1 m scale of its anomalies.
KMEANS_MAX_POINTS = 100_000
# The greedy order is taken over a random pool of at most this many points: its row buffer is
# (M + M2) × pool doubles (160 MB at M + M2 = 2048).
GREEDY_POOL_POINTS = 10_000
# Rows per chunk of the point-to-centre distances: a [chunk, k] block at a time.
DISTANCE_CHUNK = 8192


def _subsample(X: Tensor, n: int, generator: torch.Generator) -> Tensor:
    if X.shape[0] <= n:
        return X
    index = torch.randperm(X.shape[0], generator=generator)[:n]
    return X[index.to(X.device)]


def _nearest(X: Tensor, centres: Tensor) -> tuple[Tensor, Tensor]:
    """Index of the nearest centre [N] and the squared distance to it [N]."""
    idx, dist = [], []
    for s in range(0, X.shape[0], DISTANCE_CHUNK):
        d2 = torch.cdist(X[s : s + DISTANCE_CHUNK], centres) ** 2
        value, index = d2.min(1)
        idx.append(index)
        dist.append(value)
    return torch.cat(idx), torch.cat(dist)


def kmeans(
    X: Tensor, k: int, generator: torch.Generator, tick: Callable[[str], None] | None = None
) -> Tensor:
    """k-means++ seeding then Lloyd iterations; the centres in seeding order.

    Args:
        X: [N, D] with N ≥ k.
        k: number of centres.
        generator: CPU generator (the result is reproducible from its seed).
        tick: called with a status every ``TICK_CENTRES`` seeded centres and after each Lloyd
            iteration (seconds each for thousands of centres: a log shows the work going on).

    Returns:
        [k, D]. A centre left without points keeps its previous place.
    """
    N = X.shape[0]
    first = int(torch.randint(N, (1,), generator=generator))
    centres = [X[first]]
    d2 = ((X - X[first]) ** 2).sum(1)
    for _ in range(1, k):
        total = float(d2.sum())
        if total > 0.0:
            weights = (d2 / total).cpu()
            j = int(torch.multinomial(weights, 1, generator=generator))
        else:  # fewer distinct points than centres: duplicates are left to the jitter
            j = int(torch.randint(N, (1,), generator=generator))
        centres.append(X[j])
        d2 = torch.minimum(d2, ((X - X[j]) ** 2).sum(1))
        if tick is not None and len(centres) % TICK_CENTRES == 0:
            tick(f"k-means++ seeding: {len(centres)}/{k} centres")
    C = torch.stack(centres)
    for iteration in range(KMEANS_ITERATIONS):
        if tick is not None:
            tick(f"k-means: Lloyd iteration {iteration + 1}/{KMEANS_ITERATIONS} of {k} centres")
        assign, _ = _nearest(X, C)
        sums = torch.zeros_like(C).index_add_(0, assign, X)
        counts = torch.zeros(k, dtype=X.dtype, device=X.device).index_add_(
            0, assign, torch.ones_like(X[:, 0])
        )
        moved = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1.0)[:, None], C)
        if torch.equal(moved, C):
            break
        C = moved
    return C


def greedy_order(
    X: Tensor, k: int, kernel: Kernel, jitter: Jitter, generator: torch.Generator
) -> Tensor:
    """The first k pivots of a pivoted Cholesky of k(X, X) (largest conditional variance first).

    If fewer than k points carry information (duplicates, a robot standing still), the rest
    are random other points of the pool; the jitter ladder of the prior factor absorbs them.

    Returns:
        [k, D].
    """
    pool = _subsample(X, GREEDY_POOL_POINTS, generator)
    candidates = torch.ones(pool.shape[0], dtype=torch.bool, device=pool.device)
    with torch.no_grad():
        pivoted = PivotedCholesky(kernel, pool, candidates, jitter, max_new=k)
        pivoted.extend_to(k)
    chosen = list(pivoted.pivots)
    if len(chosen) < k:
        taken = set(chosen)
        rest = [
            int(i)
            for i in torch.randperm(pool.shape[0], generator=generator)
            if int(i) not in taken
        ]
        chosen += rest[: k - len(chosen)]
    return pool[torch.as_tensor(chosen, device=pool.device)]


def initial_inducing(
    X: Tensor,
    num_inducing: int,
    num_orthogonal: int,
    method: InitMethod,
    kernel: Kernel,
    jitter: Jitter,
    seed: int,
    tick: Callable[[str], None] | None = None,
) -> tuple[Tensor, Tensor]:
    """Initial Z [M, D] and O [M2, D] from the training inputs X [N, D].

    Args:
        X: training inputs.
        num_inducing: M ≥ 1.
        num_orthogonal: M2 ≥ 0.
        method: "kmeans" or "greedy".
        kernel: the initial kernel (the greedy order depends on it).
        jitter: the jitter of the greedy factorisation.
        seed: seed of the subsampling and of k-means++.
        tick: progress of a k-means placement (:func:`kmeans`).

    Returns:
        (Z, O); with N ≤ M + M2 they are X's first min(M, N) rows and the rest.
    """
    if method not in INIT_METHODS:
        raise ValueError(f"init must be one of {', '.join(INIT_METHODS)}; got {method!r}")
    total = num_inducing + num_orthogonal
    if X.shape[0] <= total:
        W = X.detach().clone()
    else:
        generator = torch.Generator().manual_seed(seed)
        if method == "kmeans":
            W = kmeans(_subsample(X, KMEANS_MAX_POINTS, generator).detach(), total, generator, tick)
        else:
            W = greedy_order(X.detach(), total, kernel, jitter, generator)
    M = min(num_inducing, W.shape[0])
    return W[:M].clone(), W[M:].clone()
