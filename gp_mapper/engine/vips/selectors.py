"""Inducing-point selectors: one small strategy interface, four strategies.

Every selector sees the batch and the old model (θ_o, σ²_o, q_o) and returns the new inducing
inputs; the rest of the engine (bound, fit, commit) is shared. Pescador-Barrios et al. 2024,
Sec. 4 and App. B (Algorithms 4, 5 and 6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

from ..core.greedy import PivotedCholesky
from ..core.kernels import Kernel
from ..core.linalg import Jitter
from .bound import whitened_bound_last, whitened_bound_prefixes
from .posterior import CarriedPosterior
from .settings import check, default

# Above this many new points L* is no longer the value with every datum inducing but the bound
# with this many greedy pivots, a lower proxy of it (the authors' code uses 5000 random points;
# App. B.1 computes L* once per batch).
REFERENCE_PIVOTS = 3000
# L* runs the greedy sequence to the floor for up to max(MIN, N / FRACTION) pivots, the point
# where its O(N k²) matrix-vector work meets the O(N³/3) Cholesky of the whole batch.
GREEDY_REFERENCE_MIN = 64
GREEDY_REFERENCE_FRACTION = 4


class SelectionProblem(NamedTuple):
    """What a selector may look at. Everything is under the OLD hyperparameters."""

    X: Tensor  # [N, D]
    y: Tensor  # [N]
    kernel: Kernel
    noise_variance: Tensor
    old: CarriedPosterior | None
    noise_model_lml: float  # L_noise of this batch under the running statistics
    max_inducing: int
    jitter: Jitter
    seed: int


class Selection(NamedTuple):
    """The chosen inducing inputs and how the choice was made."""

    Z: Tensor  # [M_b, D]
    num_added: int
    stop_reason: str
    bound: float | None = None  # L̂ at the chosen set, under θ_o (VIPS)
    reference: float | None = None  # L* (VIPS)
    threshold: float | None = None  # γ = L* − δ|L* − L_noise| (VIPS)


class Selector(Protocol):
    """A strategy that picks the inducing inputs of the next model."""

    name: str

    def select(self, problem: SelectionProblem) -> Selection: ...

    def to_spec(self) -> dict[str, Any]: ...


def _old_Z(problem: SelectionProblem) -> Tensor:
    old = problem.old
    if old is None:
        return problem.X.new_zeros((0, problem.X.shape[1]))
    return old.Z


def _decoupled(problem: SelectionProblem, max_new: int) -> PivotedCholesky:
    """Pivoted Cholesky over the batch X, the old points forced first.

    Its rows need no columns at Z_a: they begin with the old variables themselves, so
    ``whitened_bound_prefixes`` knows their whitened map onto Z_a (``U=None``).
    """
    X, old = problem.X, problem.old
    Za = _old_Z(problem)
    candidates = torch.ones(X.shape[0], dtype=torch.bool, device=X.device)
    return PivotedCholesky(
        problem.kernel,
        X,
        candidates,
        old.jitter if old is not None else problem.jitter,
        prefix_Z=Za if old is not None else None,
        prefix_L=old.L if old is not None else None,
        max_new=max_new,
    )


@dataclass(frozen=True)
class Vips:
    """VIPS: add greedy-variance points until ``L̂ ≥ L* − δ|L* − L_noise|``.

    Sec. 4.3 and Algorithm 1 (App. B.1, Algorithm 4). The paper's text writes the tolerance
    δ(L* − L_noise) and its algorithms print the loop condition with ≤; as its authors' code,
    we keep adding while the gap exceeds δ|L* − L_noise|, which stays positive when the old
    model predicts the batch worse than the noise model.

    L̂ is non-decreasing along the nested greedy sequence (θ fixed), so the first prefix that
    passes is found by doubling then bisection: O(log M) bound evaluations, each
    O(N M² + M³), instead of one per added point.

    Args:
        delta: the fraction of the GP's gain over a noise model that may be lost (the paper
            recommends 0.035; its magnetometer experiment uses 0.095).
    """

    delta: float = default("vips.delta")
    name: str = "vips"

    def __post_init__(self) -> None:
        check("vips.delta", self.delta)  # the node's parameter range, so both agree

    def to_spec(self) -> dict[str, Any]:
        return {"type": "vips", "delta": self.delta}

    def select(self, problem: SelectionProblem) -> Selection:
        X, y, old = problem.X, problem.y, problem.old
        N = X.shape[0]
        # The sequence may run past max_new: L* does not depend on the cap.
        pc = _decoupled(problem, min(N, REFERENCE_PIVOTS))
        kff = problem.kernel.K_diag(X)

        def bounds_of(R: Tensor) -> Tensor:
            """L̂ at every prefix of the rows ``L_b⁻¹ K(b, X)`` of an inducing set b."""
            return whitened_bound_prefixes(R, None, y, kff, problem.noise_variance, old)

        saturated = data_side_reference(y, kff, problem.noise_variance, old)
        found = vips_search(pc, problem, N, bounds_of, self.delta, saturated_bound=saturated)
        Z = torch.cat([_old_Z(problem), X[pc.pivots[: found.num_added]]])
        return Selection(Z, found.num_added, found.reason, found.bound, found.reference,
                         found.threshold)  # fmt: skip


class VipsResult(NamedTuple):
    """Where the VIPS search stopped along a greedy sequence."""

    num_added: int  # new pivots taken (a prefix of the sequence)
    reason: str  # "threshold", "max_inducing" or "no_information"
    bound: float | None  # L̂ there
    reference: float | None  # L* (None: not needed, the cap was reached)
    threshold: float | None  # γ


class _SequenceBounds:
    """L̂ at prefixes of the greedy sequence, each factorisation serving every shorter prefix."""

    def __init__(self, pc: PivotedCholesky, bounds_of: Callable[[Tensor], Tensor]) -> None:
        self._pc = pc
        self._bounds_of = bounds_of
        self._values: list[float] = []

    def at(self, size: int) -> float:
        """L̂ with the first ``size`` rows of the sequence as the inducing set."""
        if size > len(self._values):  # rows are nested: the longest built serves them all
            self._values = self._bounds_of(self._pc.rows()).tolist()
        return self._values[size - 1]


def vips_search(
    pc: PivotedCholesky,
    problem: SelectionProblem,
    num_candidates: int,
    bounds_of: Callable[[Tensor], Tensor],
    delta: float,
    greedy_budget: int | None = None,
    saturated_bound: Callable[[PivotedCholesky], float | None] | None = None,
) -> VipsResult:
    """The shortest prefix of the greedy sequence ``pc`` with ``L̂ ≥ L* − δ|L* − L_noise|``.

    L̂ is non-decreasing along the nested sequence (θ fixed), so the prefix is found by doubling
    then bisection. ``pc`` starts with the forced prefix (the old inducing points);
    ``bounds_of`` gives L̂ at every prefix of a set of rows (``whitened_bound_prefixes``), so
    one evaluation answers every shorter prefix; ``num_candidates`` is how many pivots the
    sequence could take; ``greedy_budget`` how many it may take towards L* before the Schur
    complement is cheaper (``_reachable_reference``; default from ``num_candidates``);
    ``saturated_bound`` L̂ with every candidate inducing (None: no such factor), by default
    the last of ``bounds_of`` at ``pc.saturated_rows()``.
    """
    M_a = pc.num_prefix
    max_new = max(0, min(num_candidates, problem.max_inducing - M_a))
    if max_new == 0:  # at the cap nothing can be added: L*, the costliest step, decides nothing
        return VipsResult(0, "max_inducing", None, None, None)
    sequence = _SequenceBounds(pc, bounds_of)

    def bound_at(k: int) -> float:
        return sequence.at(M_a + k)

    if greedy_budget is None:
        greedy_budget = max(GREEDY_REFERENCE_MIN, num_candidates // GREEDY_REFERENCE_FRACTION)
    if saturated_bound is None:

        def saturated_bound(pc: PivotedCholesky) -> float | None:
            R = pc.saturated_rows()
            return None if R is None else float(bounds_of(R)[-1])

    l_star = _reachable_reference(pc, num_candidates, sequence, saturated_bound, greedy_budget)
    gamma = l_star - delta * abs(l_star - problem.noise_model_lml)

    # Doubling: the first k (new points) with L̂ ≥ γ, or the largest k that can be built.
    k_fail, k_pass, value = 0, None, None
    k = 0 if M_a > 0 else 1
    while True:
        k = min(pc.extend_to(M_a + k), M_a + k) - M_a
        value = bound_at(k)
        if value >= gamma:
            k_pass = k
            break
        k_fail = k
        if k >= max_new or (pc.size - M_a <= k and pc.next_pivot() is None):
            break
        k = min(max(1, 2 * k), max_new)
    if k_pass is None:
        reason = "max_inducing" if k_fail >= max_new else "no_information"
        return VipsResult(k_fail, reason, value, l_star, gamma)
    # Bisection on (k_fail, k_pass]: bound(k_fail) < γ ≤ bound(k_pass).
    lo, hi = k_fail, k_pass
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_value = bound_at(mid)
        if mid_value >= gamma:
            hi, value = mid, mid_value
        else:
            lo = mid
    return VipsResult(hi, "threshold", value, l_star, gamma)


def data_side_reference(
    y: Tensor,
    kff_diag: Tensor,
    noise_variance: Tensor,
    old: CarriedPosterior | None,
    num_columns: int | None = None,
) -> Callable[[PivotedCholesky], float | None]:
    """``vips_search``'s ``saturated_bound`` for rows that begin with the old variables
    (``U=None``) and whose first ``num_columns`` columns (all by default) are the data's: L̂
    with every candidate inducing from N × N factors (``whitened_bound_last``)."""

    def saturated_bound(pc: PivotedCholesky) -> float | None:
        rows = pc.saturated_rows(num_columns)
        if rows is None:
            return None
        return float(whitened_bound_last(rows, y, kff_diag, noise_variance, old))

    return saturated_bound


def _reachable_reference(
    pc: PivotedCholesky,
    N: int,
    sequence: _SequenceBounds,
    saturated_bound: Callable[[PivotedCholesky], float | None],
    greedy_budget: int,
) -> float:
    """L*: the best L̂ the greedy sequence can reach, every informative new datum inducing.

    Why not the closed form ``reference_bound``: each inducing point keeps a residual of about
    the jitter ε in Q_ff, which costs ε/2σ² nats, and points under the conditional-variance
    floor can never be added. When σ² falls to the jitter's size (near-noiseless data) the
    closed form sits hundreds of nats above anything L̂ can reach, and VIPS would take every
    point of every batch. The authors' code has the same consistency: L* = L_SGPR(Z = X).

    Cost: the greedy sequence is run to the floor while that is cheaper than a Cholesky of
    the batch (a robot's dense batches have low numerical rank), and its one evaluation then
    gives L̂ at every prefix the search asks for; otherwise the Schur complement of the old
    points gives every datum at once in O(N³ + N² M_a), and ``saturated_bound`` its bound
    from N × N factors (``whitened_bound_last``). Above REFERENCE_PIVOTS new points L* is the
    bound at that many greedy points, a lower proxy.
    """
    M_a = pc.num_prefix
    pc.extend_to(M_a + min(N, greedy_budget))
    if pc.next_pivot() is None:
        return sequence.at(pc.size)
    if N <= REFERENCE_PIVOTS:
        value = saturated_bound(pc)
        if value is not None:
            return value
    pc.extend_to(M_a + min(N, REFERENCE_PIVOTS))
    return sequence.at(pc.size)


@dataclass(frozen=True)
class ConditionalVariance:
    """CV: greedy variance over old and new points until tr(K_ff − Q_ff) < η.

    App. B.2, Algorithm 5 (whose loop condition is printed with ≤: it adds while the trace
    exceeds η).

    η is absolute (not relative to N or the kernel variance), so it needs tuning per dataset;
    old inducing points can be dropped.
    """

    eta: float = default("vips.eta")
    name: str = "cv"

    def __post_init__(self) -> None:
        if self.eta < 0.0:
            raise ValueError(f"CV eta must be non-negative, got {self.eta}")

    def to_spec(self) -> dict[str, Any]:
        return {"type": "cv", "eta": self.eta}

    def select(self, problem: SelectionProblem) -> Selection:
        return _restart_greedy(problem, problem.max_inducing, self.eta)


@dataclass(frozen=True)
class FixedSize:
    """A fixed number of inducing points, re-chosen by greedy variance over old and new points."""

    size: int = default("vips.fixed_size")
    name: str = "fixed"

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"fixed size must be at least 1, got {self.size}")

    def to_spec(self) -> dict[str, Any]:
        return {"type": "fixed", "size": self.size}

    def select(self, problem: SelectionProblem) -> Selection:
        return _restart_greedy(problem, min(self.size, problem.max_inducing), 0.0)


def _restart_greedy(problem: SelectionProblem, cap: int, eta: float) -> Selection:
    """Greedy variance from scratch over the pool [X; Z_a]; stop at trace < η or ``cap`` points."""
    pool = torch.cat([problem.X, _old_Z(problem)])
    candidates = torch.ones(pool.shape[0], dtype=torch.bool, device=pool.device)
    pc = PivotedCholesky(problem.kernel, pool, candidates, problem.jitter, max_new=cap)
    reason = "max_inducing"
    while pc.size < cap:
        if pc.size > 0 and pc.residual_trace() < eta:
            reason = "threshold"
            break
        j = pc.next_pivot()
        if j is None:
            reason = "no_information"
            break
        pc.add(j)
    added = sum(1 for j in pc.pivots if j < problem.X.shape[0])
    return Selection(pool[pc.pivots], added, reason)


@dataclass(frozen=True)
class Oips:
    """OIPS: one pass over the batch; add x if max_z k(x, z) < ρ σ_f² (App. B.3, Algorithm 6).

    The constant part of the kernel is left out of both k(x, z) and σ_f², as the authors do for
    the magnetometer's Constant + Matérn kernel.

    Args:
        rho: correlation threshold in (0, 1); larger gives more points.
        initial: random points of the first batch to start from (the authors use 10).
    """

    rho: float = default("vips.rho")
    initial: int = 10
    name: str = "oips"

    def __post_init__(self) -> None:
        check("vips.rho", self.rho)  # the node's parameter range, so both agree

    def to_spec(self) -> dict[str, Any]:
        return {"type": "oips", "rho": self.rho, "initial": self.initial}

    def select(self, problem: SelectionProblem) -> Selection:
        X = problem.X
        local = problem.kernel.without_constant() or problem.kernel
        threshold = self.rho * float(local.K_diag(X[:1])[0])
        Z = _old_Z(problem)
        start = 0
        if Z.shape[0] == 0:
            gen = torch.Generator().manual_seed(problem.seed)
            n0 = min(self.initial, X.shape[0], problem.max_inducing)
            Z = X[torch.randperm(X.shape[0], generator=gen)[:n0].to(X.device)]
            start = n0
        chosen: list[Tensor] = []
        kept = Z
        reason = "threshold"
        for i in range(X.shape[0]):
            if kept.shape[0] >= problem.max_inducing:
                reason = "max_inducing"
                break
            x = X[i : i + 1]
            if float(local.K(x, kept).max()) < threshold:
                kept = torch.cat([kept, x])
                chosen.append(x)
        return Selection(kept, start + len(chosen), reason)


_SELECTORS: dict[str, Callable[..., Selector]] = {
    "vips": Vips,
    "cv": ConditionalVariance,
    "oips": Oips,
    "fixed": FixedSize,
}


def register_selector(kind: str, build: Callable[..., Selector]) -> None:
    """Let :func:`selector_from_spec` rebuild a selector defined outside this module."""
    if kind in ("vips", "cv", "oips", "fixed"):
        raise ValueError(f"selector {kind!r} is built in")
    _SELECTORS[kind] = build


def selector_from_spec(spec: dict[str, Any]) -> Selector:
    """Rebuild a selector from its ``to_spec`` output."""
    spec = dict(spec)
    kind = spec.pop("type", None)
    if kind not in _SELECTORS:
        raise ValueError(f"unknown selector {kind!r}; expected one of {sorted(_SELECTORS)}")
    return _SELECTORS[kind](**spec)
