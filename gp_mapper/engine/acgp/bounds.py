"""ACGP's bounds on log det K and yᵀK⁻¹y from one downdated block, and the stopping rule.

Bartels et al. 2023 (ACGP), Algorithm 2: the experiments' ``EvaluateBounds``, with the paper's
misprints corrected as its theorems and the authors' code have them: the switch step is
ψ = min(N, …) (Eq. 8 prints max(N, …); Eq. 40 has min), L_Q has μ_Q where Algorithm 2 prints
2μ_Q (Thm. 19), U_Q has (ψ − s)(μ_Q + (ψ − s − 1)ρ/2) where Algorithm 2 prints a minus
(Thm. 14), D_s = 2 Σ log L_jj (Algorithm 2 prints Σ log A_jj), and U_Q is what is returned
beside U_D (Algorithm 2 prints U_C).
Notation: s points are factorised, the block holds points s+1..t (m = t − s), N is the full data
size. After the downdate of the block, its diagonal is ``v_j = k_s(x_j, x_j) + σ²``, its first
sub-diagonal ``c_j = k_s(x_j, x_{j+1})`` and the partially solved right-hand side holds the
residuals ``e_j = y_j − m_s(x_j)``.

The bounds hold in conditional expectation only (Sec. 3.4, Thm. 2): the relative tolerance is a
target, not a guarantee. As in the authors' experiments the switch steps ψ are computed from the
current block (not F_s-measurable, Remarks 6 and 11) and every adjacent pair (j, j+1) is used
(Remark 5).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.linalg import LOG_2PI

# The block statistics need at least one adjacent pair (the check is skipped otherwise).
MIN_BLOCK_FOR_BOUNDS = 2


class BlockStatistics(NamedTuple):
    """The six averages over one downdated block that the bounds read (Algorithm 2).

    Attributes:
        mu_D: mean_j log v_j.
        rho_D: mean over adjacent pairs of c_j² / σ⁴.
        mu_Q: mean_j e_j² / v_j (the calibration).
        rho_QL: mean over adjacent pairs of e_j e_{j+1} c_j / (v_j v_{j+1}) (not yet clamped).
        rho_QU: mean over adjacent pairs of e_{j+1}² c_j² / (v_{j+1} σ⁴).
        mu_Q_bar: mean_j e_j² / σ² (the worst case: the variance floor σ²).
    """

    mu_D: float
    rho_D: float
    mu_Q: float
    rho_QL: float
    rho_QU: float
    mu_Q_bar: float


class BlockBounds(NamedTuple):
    """The bounds evaluated at one block [s, t), before its factorisation.

    Attributes:
        s: points factorised before the block.
        t: end of the block (s + m, or the last materialised point).
        L_D, U_D: lower and upper bound on log det(K + σ²I) over all N points.
        L_Q, U_Q: lower and upper bound on yᵀ(K + σ²I)⁻¹y over all N points.
        lower: 𝓛 = −½(U_D + U_Q + N log 2π), lower bound on log p(y) (nats).
        upper: 𝓤 = −½(L_D + L_Q + N log 2π), upper bound on log p(y) (nats).
    """

    s: int
    t: int
    L_D: float
    U_D: float
    L_Q: float
    U_Q: float
    lower: float
    upper: float

    @property
    def midpoint(self) -> float:
        """(𝓤 + 𝓛)/2, the estimator whose error Lemma 21 bounds by r·|log p| (Thm. 3)."""
        return 0.5 * (self.lower + self.upper)

    @property
    def relative_gap(self) -> float:
        """(𝓤 − 𝓛) / (2 min(|𝓤|, |𝓛|)), the quantity the stopping rule compares with r."""
        denominator = 2.0 * min(abs(self.lower), abs(self.upper))
        return math.inf if denominator == 0.0 else (self.upper - self.lower) / denominator


def block_statistics(v: Tensor, c: Tensor, e: Tensor, noise_variance: float) -> BlockStatistics:
    """The averages of Algorithm 2 from a downdated block, in one device-to-host transfer.

    The diagonal is floored at σ² first [ours]: ``v_j = k_s(x_j, x_j) + σ²`` with a posterior
    variance that cannot be negative, so ``v_j < σ²`` is round-off. Without the floor
    ``μ_D < log σ²`` can happen where the data are dense, and then ``L_D > U_D`` (the clamp of the
    switch step at 0 turns the round-off into a crossing of size (N − s)·|μ_D − log σ²|).

    Args:
        v: downdated diagonal [m], m ≥ 2.
        c: downdated first sub-diagonal [m − 1].
        e: residuals [m].
        noise_variance: σ² (the minimum noise if it were heteroscedastic).

    Returns:
        The statistics as Python floats.
    """
    s2 = noise_variance
    v = torch.clamp(v, min=s2)
    e2 = e * e
    c2 = c * c
    stats = torch.stack(
        [
            torch.log(v).mean(),
            (c2 / (s2 * s2)).mean(),
            (e2 / v).mean(),
            (e[:-1] * e[1:] * c / (v[:-1] * v[1:])).mean(),
            # The later point of each pair, as the authors' code (Alg. 2 prints e_j, v_j).
            (e2[1:] * c2 / (v[1:] * s2 * s2)).mean(),
            (e2 / s2).mean(),
        ]
    )
    return BlockStatistics(*stats.tolist())


def _switch_step(numerator: float, rho: float, remaining: int) -> int:
    """ψ − s = clamp(floor(numerator/ρ + ½), 0, N − s), or N − s when ρ ≤ 0 (Algorithm 2).

    The clamp at 0 is [ours]: round-off can make the numerator negative.
    """
    if rho <= 0.0:
        return remaining
    p = numerator / rho + 0.5
    if not math.isfinite(p) or p >= remaining:
        return remaining
    return max(0, math.floor(p))


def evaluate_bounds(
    stats: BlockStatistics,
    s: int,
    t: int,
    logdet_s: float,
    quad_s: float,
    noise_variance: float,
    n_total: int,
) -> BlockBounds:
    """Corrected ``EvaluateBounds(s, t)`` of Algorithm 2 (module docstring).

    Args:
        stats: the block averages (:func:`block_statistics`).
        s: points factorised before the block.
        t: end of the block.
        logdet_s: D_s = log det K_{:s,:s} = 2 Σ_{i≤s} log L_ii.
        quad_s: Q_s = y_{:s}ᵀ K_{:s,:s}⁻¹ y_{:s} = Σ_{i≤s} α_i².
        noise_variance: σ².
        n_total: N, the size of the whole data set (may exceed the materialised points).

    Returns:
        The bounds; at s = N all four equal the exact D_s and Q_s.
    """
    log_s2 = math.log(noise_variance)
    remaining = n_total - s
    # Log-determinant (Thm 10 with ψ = min(N, ...), not Eq. 8's max).
    p_D = _switch_step(stats.mu_D - log_s2, stats.rho_D, remaining)
    U_D = logdet_s + remaining * stats.mu_D
    L_D = logdet_s + p_D * (stats.mu_D - 0.5 * (p_D - 1) * stats.rho_D) + (remaining - p_D) * log_s2
    # Quadratic form: the lower bound is clamped at Q_s and its pair term at 0 (Algorithm 2),
    # without Alg. 2's misprinted factor 2 on μ_Q; the upper bound takes Thm 14's "+" sign.
    rho_QL = max(0.0, stats.rho_QL)
    L_Q = quad_s + max(0.0, remaining * (stats.mu_Q - (remaining - 1) * rho_QL))
    p_Q = _switch_step(stats.mu_Q_bar - stats.mu_Q, stats.rho_QU, remaining)
    U_Q = (
        quad_s
        + p_Q * (stats.mu_Q + 0.5 * (p_Q - 1) * stats.rho_QU)
        + (remaining - p_Q) * stats.mu_Q_bar
    )
    constant = n_total * LOG_2PI
    return BlockBounds(
        s,
        t,
        L_D,
        U_D,
        L_Q,
        U_Q,
        lower=-0.5 * (U_D + U_Q + constant),
        upper=-0.5 * (L_D + L_Q + constant),
    )


def should_stop(bounds: BlockBounds, rel_tol: float, abs_tol: float) -> bool:
    """The stopping rule of Sec. 3.2 eq. 4 / Alg. 1: absolute gap, or relative gap with one sign.

    Stops when ``𝓤 − 𝓛 < abs_tol``, or when 𝓤 and 𝓛 have the same non-zero sign and
    ``(𝓤 − 𝓛) / (2 min(|𝓤|, |𝓛|)) < rel_tol``. The sign condition is the paper's (Eqs. 30–31);
    the authors' code leaves it out (and takes |𝓤 − 𝓛|, as its bounds can cross). With ordered
    bounds of opposite sign the ratio is at least 1, so here the condition decides for r ≥ 1,
    where the ratio no longer bounds a relative error; a zero bound never passes the relative test.
    """
    gap = bounds.upper - bounds.lower
    if gap < abs_tol:
        return True
    sign_lower = math.copysign(1.0, bounds.lower) if bounds.lower != 0.0 else 0.0
    sign_upper = math.copysign(1.0, bounds.upper) if bounds.upper != 0.0 else 0.0
    if sign_lower == 0.0 or sign_lower != sign_upper:
        return False
    return bounds.relative_gap < rel_tol
