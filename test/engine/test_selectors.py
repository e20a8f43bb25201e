"""Selectors: greedy variance, CV's trace rule, OIPS's correlation rule, fixed size, caps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    ConditionalVariance,
    FixedSize,
    Oips,
    OnlineSparseGP,
    SquaredExponential,
    Vips,
    selector_from_spec,
)
from gp_mapper.engine.core.greedy import PivotedCholesky
from gp_mapper.engine.vips.bound import reference_bound, whitened_bound

from .conftest import make_online_toy, sine


def stream(rng: np.random.Generator, n: int = 400, k: int = 4):
    X = torch.as_tensor(np.sort(rng.uniform(0.0, 20.0, n)))[:, None]
    y = sine(X[:, 0]) + 0.2 * torch.as_tensor(rng.standard_normal(n))
    size = n // k
    return [(X[i * size : (i + 1) * size], y[i * size : (i + 1) * size]) for i in range(k)]


def run(selector, parts, **kwargs) -> OnlineSparseGP:
    engine = OnlineSparseGP(SquaredExponential(1.0, 0.5), 0.05, selector, device="cpu", **kwargs)
    for Xb, yb in parts:
        assert engine.update(Xb, yb).accepted
    return engine


def test_pivoted_cholesky_rows_are_whitened_cross_covariances(rng: np.random.Generator) -> None:
    X = torch.as_tensor(rng.uniform(0, 5, (30, 1)))
    k = SquaredExponential(1.0, 0.8).double()
    pc = PivotedCholesky(k, X, torch.ones(30, dtype=torch.bool), 0.0)
    pc.extend_to(6)
    Z = X[pc.pivots]
    L = torch.linalg.cholesky(k.K(Z).detach())
    expected = torch.linalg.solve_triangular(L, k.K(Z, X).detach(), upper=False)
    torch.testing.assert_close(pc.rows(), expected, rtol=1e-8, atol=1e-10)
    # Greedy: the first pivot has the largest prior variance, each next the largest conditional.
    assert pc.pivots[0] == 0
    assert len(set(pc.pivots)) == 6


def test_pivoted_cholesky_stops_at_uninformative_or_taken_columns() -> None:
    X = torch.tensor([[0.0], [0.0], [3.0]], dtype=torch.float64)  # a repeat: nothing left in it
    k = SquaredExponential(1.0, 0.8).double()
    pc = PivotedCholesky(k, X, torch.ones(3, dtype=torch.bool), 0.0)
    assert pc.extend_to(3) == 2 and sorted(pc.pivots) in ([0, 2], [1, 2])
    assert pc.next_pivot() is None
    none = PivotedCholesky(k, X, torch.zeros(3, dtype=torch.bool), 0.0)
    assert none.next_pivot() is None and none.extend_to(2) == 0


def test_vips_grows_with_smaller_delta(rng: np.random.Generator) -> None:
    parts = stream(rng)
    sizes = [run(Vips(d), parts).num_inducing for d in (0.2, 0.05, 0.01)]
    assert sizes[0] < sizes[1] < sizes[2], sizes


def test_vips_keeps_old_points_and_respects_the_cap(rng: np.random.Generator) -> None:
    parts = stream(rng)
    engine = OnlineSparseGP(SquaredExponential(1.0, 0.5), 0.05, Vips(0.01), device="cpu")
    engine.update(*parts[0])
    Z_first = engine.posterior.Z.clone()
    engine.update(*parts[1])
    torch.testing.assert_close(engine.posterior.Z[: Z_first.shape[0]], Z_first)
    capped = run(Vips(0.001), parts, max_inducing=12)
    assert capped.num_inducing == 12
    # At the cap the set is kept as it is, and the reference bound is not computed at all.
    report = capped.update(*parts[0])
    assert report.accepted and report.reason == "max_inducing"
    assert report.num_added == 0 and report.reference is None and capped.num_inducing == 12


def test_cv_trace_rule_and_cap(rng: np.random.Generator) -> None:
    parts = stream(rng)
    loose, tight = run(ConditionalVariance(5.0), parts), run(ConditionalVariance(0.01), parts)
    assert loose.num_inducing < tight.num_inducing
    assert run(ConditionalVariance(0.0), parts, max_inducing=25).num_inducing == 25


def test_oips_adds_only_weakly_correlated_points(rng: np.random.Generator) -> None:
    parts = stream(rng)
    # θ fixed, so the kernel that chose the points is the one checked here.
    few = run(Oips(0.5), parts, fit_iterations=0)
    many = run(Oips(0.95), parts, fit_iterations=0)
    assert few.num_inducing < many.num_inducing
    Z = few.posterior.Z
    # Points added by the pass (after the 10 random initial ones) are below ρ to all earlier points.
    for i in range(10, Z.shape[0]):
        corr = few.kernel.K(Z[i : i + 1], Z[:i]) / few.kernel.K_diag(Z[:1])
        assert float(corr.max()) < 0.5 + 1e-12


def test_fixed_size_is_fixed(rng: np.random.Generator) -> None:
    parts = stream(rng)
    engine = OnlineSparseGP(SquaredExponential(1.0, 0.5), 0.05, FixedSize(15), device="cpu")
    for Xb, yb in parts:
        engine.update(Xb, yb)
        assert engine.num_inducing == 15


@pytest.mark.parametrize("selector", [Vips(0.1), ConditionalVariance(0.2), Oips(0.8), FixedSize(7)])
def test_selector_spec_round_trip(selector) -> None:
    assert selector_from_spec(selector.to_spec()) == selector


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Vips(0.0), "delta"),
        (lambda: Vips(1.5), "delta"),
        (lambda: ConditionalVariance(-1.0), "eta"),
        (lambda: Oips(1.0), "rho"),
        (lambda: FixedSize(0), "fixed size"),
        (lambda: selector_from_spec({"type": "random"}), "unknown selector"),
    ],
)
def test_bad_selector_settings_raise(make, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_saturated_rows_give_the_bound_with_every_datum_inducing(
    rng: np.random.Generator,
) -> None:
    """Schur-complement rows == a Cholesky of the whole [Z_a; X] set, with the same jitter."""
    toy = make_online_toy(rng)
    k, old, X, y = toy.kernel_old, toy.old, toy.X, toy.y
    N = X.shape[0]
    columns = torch.cat([X, old.Z])
    candidates = torch.zeros(columns.shape[0], dtype=torch.bool)
    candidates[:N] = True
    with torch.no_grad():
        pc = PivotedCholesky(k, columns, candidates, 1e-6, prefix_Z=old.Z, prefix_L=old.L)
        pc.extend_to(old.num_inducing + 5)  # pivots taken first must not change the result
        R = pc.saturated_rows()
        assert R is not None and R.shape == (old.num_inducing + N, columns.shape[0])
        # Reference: [Z_a; X] with the carried L' for Z_a and ε on the new block's diagonal.
        eps = 1e-6 * float(k.K_diag(columns).mean())
        K_all = k.K(torch.cat([old.Z, X]))
        K_all[old.num_inducing :, old.num_inducing :] += eps * torch.eye(N, dtype=K_all.dtype)
        K_all[: old.num_inducing, : old.num_inducing] = old.L @ old.L.mT
        L_all = torch.linalg.cholesky(K_all)
        # The old points as columns are the old inducing variables: their prior is L' L'ᵀ.
        K_cols = k.K(torch.cat([old.Z, X]), columns)
        K_cols[: old.num_inducing, N:] = old.L @ old.L.mT
        expected = torch.linalg.solve_triangular(L_all, K_cols, upper=False)
        torch.testing.assert_close(R, expected, rtol=1e-7, atol=1e-9)
        kff = k.K_diag(X).sum()
        value = float(
            whitened_bound(R[:, :N], R[:, N:], y, kff, toy.noise_old, old, old.L @ old.L.mT).value
        )
        closed = float(reference_bound(k, toy.noise_old, X, y, old))
    # With a jitter far below σ², the reachable L* is the closed form.
    assert value == pytest.approx(closed, abs=1e-2)
    assert value <= closed + 1e-6


def test_vips_reaches_its_threshold_on_near_noiseless_data(rng: np.random.Generator) -> None:
    """σ² at the jitter's size: L* must be what L̂ can reach, or VIPS takes every point."""
    X = torch.as_tensor(np.sort(rng.uniform(0.0, 20.0, 600)))[:, None]
    y = sine(X[:, 0])  # no noise at all
    engine = OnlineSparseGP(
        SquaredExponential(30.0, 2.0), 2e-6, Vips(0.095), device="cpu", fit_iterations=0
    )
    reports = [engine.update(X[i : i + 150], y[i : i + 150]) for i in range(0, 600, 150)]
    assert all(r.accepted and r.reason == "threshold" for r in reports), [r.reason for r in reports]
    assert all(r.bound_at_selection >= r.threshold for r in reports)
    assert engine.num_inducing < 300, engine.num_inducing
