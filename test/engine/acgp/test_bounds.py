"""EvaluateBounds on hand-made block statistics, and the stopping rule.

EvaluateBounds is Algorithm 2 of Bartels et al. 2023 (ACGP), corrected as ``acgp/bounds.py`` says.
"""

from __future__ import annotations

import math

import pytest
import torch

from gp_mapper.engine.acgp import (
    BlockBounds,
    BlockStatistics,
    block_statistics,
    evaluate_bounds,
    should_stop,
)
from gp_mapper.engine.core.linalg import LOG_2PI

NOISE = 0.1
STATS = BlockStatistics(
    mu_D=math.log(0.3), rho_D=0.05, mu_Q=1.1, rho_QL=0.01, rho_QU=0.02, mu_Q_bar=2.5
)


def test_bounds_collapse_to_the_processed_values_at_s_equal_n() -> None:
    b = evaluate_bounds(STATS, 500, 600, logdet_s=-123.4, quad_s=456.7, noise_variance=NOISE,
                        n_total=500)  # fmt: skip
    assert (b.L_D, b.U_D, b.L_Q, b.U_Q) == (-123.4, -123.4, 456.7, 456.7)
    assert b.lower == b.upper == -0.5 * (-123.4 + 456.7 + 500 * LOG_2PI)


def test_bounds_follow_the_corrected_formulas() -> None:
    s, N, D_s, Q_s = 100, 1000, -50.0, 120.0
    b = evaluate_bounds(STATS, s, s + 50, D_s, Q_s, NOISE, N)
    rest = N - s
    log_s2 = math.log(NOISE)
    p_D = min(rest, max(0, math.floor((STATS.mu_D - log_s2) / STATS.rho_D + 0.5)))
    L_D = D_s + p_D * (STATS.mu_D - (p_D - 1) / 2 * STATS.rho_D) + (rest - p_D) * log_s2
    # No factor 2 on μ_Q (Alg. 2's misprint), clamped at Q_s.
    L_Q = Q_s + max(0.0, rest * (STATS.mu_Q - (rest - 1) * STATS.rho_QL))
    p_Q = min(rest, max(0, math.floor((STATS.mu_Q_bar - STATS.mu_Q) / STATS.rho_QU + 0.5)))
    # The "+" sign of Thm 14 (Alg. 2 prints "−").
    U_Q = Q_s + p_Q * (STATS.mu_Q + (p_Q - 1) / 2 * STATS.rho_QU) + (rest - p_Q) * STATS.mu_Q_bar
    expected = (L_D, D_s + rest * STATS.mu_D, L_Q, U_Q)
    got = b[2:6]  # (L_D, U_D, L_Q, U_Q)
    assert got == pytest.approx(expected, rel=1e-14)
    assert b.L_D <= b.U_D and b.L_Q <= b.U_Q


def test_switch_steps_are_clamped() -> None:
    # ρ ≤ 0: the switch is at N (no deterministic floor); a negative pair correlation is ignored.
    flat = STATS._replace(rho_D=0.0, rho_QU=0.0, rho_QL=-1.0)
    b = evaluate_bounds(flat, 10, 20, 0.0, 0.0, NOISE, 110)
    expected = (100 * flat.mu_D, 100 * flat.mu_D, 100 * flat.mu_Q, 100 * flat.mu_Q)
    got = b[2:6]
    assert got == pytest.approx(expected)
    # μ_D below log σ² (round-off): ψ − s clamps at 0, not a negative step.
    low = STATS._replace(mu_D=math.log(NOISE) - 1e-9)
    b = evaluate_bounds(low, 10, 20, 0.0, 0.0, NOISE, 110)
    lower_logdet = b.L_D
    assert lower_logdet == pytest.approx(100 * math.log(NOISE))


def test_block_statistics_floor_the_variance_at_the_noise() -> None:
    v = torch.tensor([NOISE * (1 - 1e-12), 0.2, 0.3], dtype=torch.float64)
    c = torch.tensor([0.01, 0.02], dtype=torch.float64)
    e = torch.tensor([0.5, -0.2, 0.1], dtype=torch.float64)
    stats = block_statistics(v, c, e, NOISE)
    v_floored = torch.clamp(v, min=NOISE)
    assert stats.mu_D == pytest.approx(float(torch.log(v_floored).mean()), rel=1e-15)
    assert stats.mu_D >= math.log(NOISE)
    assert stats.rho_D == pytest.approx(float((c**2).mean()) / NOISE**2)
    assert stats.rho_QU == pytest.approx(
        float((e[1:] ** 2 * c**2 / (v_floored[1:] * NOISE**2)).mean())
    )


def _bounds(lower: float, upper: float) -> BlockBounds:
    return BlockBounds(0, 2, 0.0, 0.0, 0.0, 0.0, lower, upper)


def test_stop_on_a_small_relative_gap_of_one_sign() -> None:
    assert should_stop(_bounds(-1010.0, -1000.0), rel_tol=0.01, abs_tol=0.0)
    assert not should_stop(_bounds(-1030.0, -1000.0), rel_tol=0.01, abs_tol=0.0)
    assert should_stop(_bounds(1000.0, 1010.0), rel_tol=0.01, abs_tol=0.0)


def test_stop_needs_one_sign() -> None:
    """Bounds of opposite sign give a ratio ≥ 1: without the sign test r = 1.5 would stop."""
    straddling = _bounds(-1.0, 1.0)
    assert straddling.relative_gap == pytest.approx(1.0)
    assert not should_stop(straddling, rel_tol=1.5, abs_tol=0.0)
    assert not should_stop(_bounds(0.0, 1e-9), rel_tol=1.5, abs_tol=0.0)
    assert should_stop(_bounds(1e-3, 1e-3 + 1e-9), rel_tol=1.5, abs_tol=0.0)


def test_stop_on_an_absolute_gap_whatever_the_sign() -> None:
    assert should_stop(_bounds(-0.1, 0.1), rel_tol=0.0, abs_tol=0.5)
    assert not should_stop(_bounds(-0.1, 0.1), rel_tol=0.0, abs_tol=0.1)
    assert not should_stop(_bounds(-5.0, -5.0), rel_tol=0.0, abs_tol=0.0)
