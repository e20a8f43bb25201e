"""The online bound: its forms agree, it rises toward L*, and L* and Û are what they claim."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from gp_mapper.engine.core.greedy import PivotedCholesky
from gp_mapper.engine.errors import NumericalError
from gp_mapper.engine.vips import bound as bound_module
from gp_mapper.engine.vips.bound import (
    carry,
    old_predictive,
    online_bound,
    reference_bound,
    upper_bound,
    whitened_bound,
    whitened_bound_last,
    whitened_bound_prefixes,
)

from .conftest import OnlineToy, gauss_logpdf, naive_eq8, np64


def greedy_Z(toy: OnlineToy, extra: int, kernel=None) -> torch.Tensor:
    """Z_b = Z_a followed by ``extra`` greedy-variance points of the batch (under ``kernel``)."""
    kernel = kernel or toy.kernel_old
    cols = torch.cat([toy.X, toy.old.Z])
    cand = torch.zeros(cols.shape[0], dtype=torch.bool)
    cand[: toy.X.shape[0]] = True
    with torch.no_grad():
        pc = PivotedCholesky(kernel, cols, cand, 0.0, toy.old.Z, toy.old.L)
        pc.extend_to(toy.old.num_inducing + extra)
    return torch.cat([toy.old.Z, toy.X[pc.pivots]])


def new_theta_bound(toy: OnlineToy, Z_b: torch.Tensor) -> float:
    """L̂ at Z_b under the toy's new θ, by the engine's whitened form."""
    with torch.no_grad():
        ours, _ = online_bound(
            toy.kernel_new, toy.noise_new, Z_b, toy.X, toy.y, toy.old, jitter=0.0
        )
    return float(ours.value)


@pytest.mark.parametrize("extra", [0, 3, 10, 30])
def test_whitened_bound_equals_naive_eq8_with_new_theta(online_toy: OnlineToy, extra: int) -> None:
    Z_b = greedy_Z(online_toy, extra)
    naive = naive_eq8(online_toy, Z_b)
    assert new_theta_bound(online_toy, Z_b) == pytest.approx(naive, rel=1e-7)


@pytest.mark.parametrize("keep", [(0, 2, 4, 6), (1, 7), ()])
def test_whitened_bound_equals_naive_eq8_when_old_points_are_dropped(
    online_toy: OnlineToy, keep: tuple[int, ...]
) -> None:
    """CV and the fixed-size selector re-select from scratch: Z_b need not contain Z_a."""
    Z_b = torch.cat([online_toy.old.Z[list(keep)], online_toy.X[::4]])
    assert new_theta_bound(online_toy, Z_b) == pytest.approx(naive_eq8(online_toy, Z_b), rel=1e-7)


def test_bound_rises_with_M_toward_L_star(online_toy: OnlineToy) -> None:
    toy = online_toy
    with torch.no_grad():
        values = [
            float(
                online_bound(
                    toy.kernel_old, toy.noise_old, greedy_Z(toy, m), toy.X, toy.y, toy.old, 0.0
                )[0].value
            )
            for m in (0, 3, 10, 30, 50)
        ]
        l_star = float(reference_bound(toy.kernel_old, toy.noise_old, toy.X, toy.y, toy.old))
    assert all(a < b for a, b in itertools.pairwise(values[:-1])), values
    assert values[-2] <= l_star + 1e-6
    # Every batch point inducing: the bound reaches L*.
    assert values[-1] == pytest.approx(l_star, rel=1e-6, abs=1e-5)


def test_L_star_three_ways(online_toy: OnlineToy) -> None:
    """Closed form == L̂ with Z = [X_n; Z_a] == eq. 9 with K_f̂f̂, all under θ_o."""
    toy = online_toy
    with torch.no_grad():
        closed = float(reference_bound(toy.kernel_old, toy.noise_old, toy.X, toy.y, toy.old))
        Z_all = torch.cat([toy.old.Z, toy.X])
        via_bound = float(
            online_bound(toy.kernel_old, toy.noise_old, Z_all, toy.X, toy.y, toy.old, 0.0)[0].value
        )
        mean, cov = old_predictive(toy.kernel_old, toy.old, toy.X)
    direct = gauss_logpdf(
        np64(toy.y) - np64(mean), np64(cov) + float(toy.noise_old) * np.eye(len(toy.y))
    )
    assert closed == pytest.approx(direct, rel=1e-9)
    assert closed == pytest.approx(via_bound, rel=1e-6)


def test_upper_bound_is_above_L_star_and_tightens(online_toy: OnlineToy) -> None:
    toy = online_toy
    with torch.no_grad():
        l_star = float(reference_bound(toy.kernel_old, toy.noise_old, toy.X, toy.y, toy.old))
        uppers = [
            float(
                upper_bound(
                    toy.kernel_old, toy.noise_old, greedy_Z(toy, m), toy.X, toy.y, toy.old, 0.0
                )
            )
            for m in (0, 3, 10, 30, 50)
        ]
    assert all(u >= l_star - 1e-6 for u in uppers), (uppers, l_star)
    assert uppers[0] > uppers[-2] > l_star - 1e-6
    assert uppers[-1] == pytest.approx(l_star, abs=1e-4)


def test_first_batch_bound_is_titsias_sgpr(rng: np.random.Generator) -> None:
    """Without an old posterior the bound is log N(y; 0, Q + σ²I) − tr(K − Q)/(2σ²)."""
    from gp_mapper.engine import SquaredExponential

    X = torch.as_tensor(rng.uniform(0, 5, (40, 1)))
    y = torch.sin(X[:, 0])
    Z = X[:7]
    k = SquaredExponential(1.0, 0.7).double()
    s2 = torch.tensor(0.05, dtype=torch.float64)
    with torch.no_grad():
        ours = float(online_bound(k, s2, Z, X, y, None, 0.0)[0].value)
        Kuu, Kuf, kff = np64(k.K(Z)), np64(k.K(Z, X)), np64(k.K_diag(X))
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    ref = gauss_logpdf(np64(y), Q + 0.05 * np.eye(40)) - 0.5 / 0.05 * (kff.sum() - np.trace(Q))
    assert ours == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("with_old", [True, False])
def test_prefix_bounds_from_one_factorisation_equal_each_prefix_evaluated_alone(
    online_toy: OnlineToy, with_old: bool
) -> None:
    toy = online_toy
    old = toy.old if with_old else None
    k = toy.kernel_old
    cols = torch.cat([toy.X, toy.old.Z])
    cand = torch.zeros(cols.shape[0], dtype=torch.bool)
    cand[: toy.X.shape[0]] = True
    N = toy.X.shape[0]
    with torch.no_grad():
        pc = PivotedCholesky(k, cols, cand, 1e-8, old.Z if old else None,
                             old.L if old else None)  # fmt: skip
        pc.extend_to(pc.num_prefix + 25)
        R = pc.rows()
        kff = k.K_diag(toy.X).sum()
        Kaa = k.K(toy.old.Z)
        prefixes = whitened_bound_prefixes(R[:, :N], R[:, N:], toy.y, kff, toy.noise_old, old, Kaa)
        alone = torch.stack(
            [
                whitened_bound(R[:m, :N], R[:m, N:], toy.y, kff, toy.noise_old, old, Kaa).value
                for m in range(1, R.shape[0] + 1)
            ]
        )
    assert prefixes.shape == (R.shape[0],)
    torch.testing.assert_close(prefixes, alone, rtol=1e-10, atol=1e-8)


def test_rows_that_begin_with_the_old_variables_need_no_columns_at_them(
    online_toy: OnlineToy,
) -> None:
    """A selection's rows start with old.Z under old.L: with ``U=None`` the prefix bounds are
    those of the general form, whose rows carry columns at Z_a (where they are [L'ᵀ; ~0])."""
    toy = online_toy
    k, old, N = toy.kernel_old, toy.old, toy.X.shape[0]
    cols = torch.cat([toy.X, old.Z])
    cand = torch.zeros(cols.shape[0], dtype=torch.bool)
    cand[:N] = True
    with torch.no_grad():
        pc = PivotedCholesky(k, cols, cand, 1e-8, old.Z, old.L)
        pc.extend_to(pc.num_prefix + 25)
        R = pc.rows()
        kff = k.K_diag(toy.X)
        general = whitened_bound_prefixes(R[:, :N], R[:, N:], toy.y, kff, toy.noise_old, old)
        implied = whitened_bound_prefixes(R[:, :N], None, toy.y, kff, toy.noise_old, old)
        with pytest.raises(ValueError, match="carried"):
            whitened_bound_prefixes(R[:, :N], None, toy.y, kff, toy.noise_old, old, k.K(old.Z))
    assert torch.equal(R[: old.num_inducing, N:], old.L.mT)
    assert float(R[old.num_inducing :, N:].abs().max()) < 1e-10
    torch.testing.assert_close(implied, general, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(("with_old", "per_row"), list(itertools.product([True, False], repeat=2)))
def test_the_bound_at_every_candidate_from_the_data_side_equals_the_rows_form(
    online_toy: OnlineToy, with_old: bool, per_row: bool
) -> None:
    """L* from N × N factors (``whitened_bound_last``) is the last prefix bound of the
    saturated rows, with one σ² or one per row (a window's cells)."""
    toy = online_toy
    k, N = toy.kernel_old, toy.X.shape[0]
    old = toy.old if with_old else None
    cand = torch.ones(N, dtype=torch.bool)
    with torch.no_grad():
        pc = PivotedCholesky(k, toy.X, cand, 1e-6, old.Z if old else None,
                             old.L if old else None)  # fmt: skip
        R = pc.saturated_rows()
        assert R is not None and R.shape[0] == N + (old.num_inducing if old else 0)
        kff = k.K_diag(toy.X)
        noise = toy.noise_old
        if per_row:
            noise = noise * torch.linspace(0.5, 2.0, N, dtype=torch.float64)
        else:
            kff = kff.sum()
        rows_form = whitened_bound_prefixes(R, None, toy.y, kff, noise, old)[-1]
        data_form = whitened_bound_last(R, toy.y, kff, noise, old)
        # the candidates' columns are not needed for it
        half = pc.saturated_rows(N // 2)
        torch.testing.assert_close(half, R[:, : N // 2], rtol=1e-12, atol=1e-12)
    assert float(data_form) == pytest.approx(float(rows_form), rel=1e-10, abs=1e-8)


def test_the_same_set_under_the_same_theta_needs_no_new_factor(online_toy: OnlineToy) -> None:
    """At the cap (Z_b = Z_a, θ kept) the fast path equals the general one. Z is dense enough
    (SE, 40 points on [0, 10], ℓ = 0.8) that K_aa has eigenvalues far below the jitter: without
    the jitter on a kept point's covariance with itself, A's old block is not I there."""
    toy = online_toy
    Z = torch.linspace(0.0, 10.0, 40, dtype=toy.X.dtype)[:, None]
    with torch.no_grad():
        assert float(torch.linalg.eigvalsh(toy.kernel_old.K(Z))[0]) < 1e-9
        terms, f = online_bound(toy.kernel_old, toy.noise_old, Z, toy.X_old, toy.y_old, None, 1e-6)
        carried = carry(Z, f, terms)
        general, fg = online_bound(toy.kernel_old, toy.noise_old, Z, toy.X, toy.y, carried, 1e-6)
        fast, ff = online_bound(
            toy.kernel_old, toy.noise_old, Z, toy.X, toy.y, carried, 1e-6, keeps_old=True
        )
    assert ff.U is None and torch.equal(ff.L_b, carried.L)
    assert float(fast.value) == pytest.approx(float(general.value), rel=1e-9)
    scale = float(general.P.abs().max())
    assert float((fast.P - general.P).abs().max()) < 1e-7 * scale
    assert torch.allclose(fast.v, general.v, rtol=1e-7, atol=1e-7 * float(general.v.abs().max()))
    # Kept points map onto themselves: A = L_b⁻¹ (K_ba + εI) L_a⁻ᵀ is I on the old block.
    A = torch.linalg.solve_triangular(carried.L, fg.U.mT, upper=False).mT
    assert torch.allclose(A, torch.eye(40, dtype=A.dtype), atol=1e-6)


@pytest.mark.parametrize("extra", [1, 5, 20])
def test_a_set_that_begins_with_the_old_one_extends_its_factor(
    online_toy: OnlineToy, extra: int
) -> None:
    """A window that keeps θ and adds points: old.L extended by the new rows gives the bound
    and the carried factors of the general path (up to the jitter, which the old variables
    keep as they were made)."""
    toy = online_toy
    Z_a = torch.linspace(0.0, 10.0, 12, dtype=toy.X.dtype)[:, None]
    Z_b = torch.cat([Z_a, toy.X[:: max(1, toy.X.shape[0] // extra)][:extra]])
    with torch.no_grad():
        k, s2 = toy.kernel_old, toy.noise_old
        terms, f = online_bound(k, s2, Z_a, toy.X_old, toy.y_old, None, 1e-6)
        carried = carry(Z_a, f, terms)
        general, fg = online_bound(k, s2, Z_b, toy.X, toy.y, carried, 1e-6)
        fast, ff = online_bound(
            toy.kernel_old, toy.noise_old, Z_b, toy.X, toy.y, carried, 1e-6, keeps_old=True
        )
        with pytest.raises(ValueError, match="begin with"):
            online_bound(toy.kernel_old, toy.noise_old, Z_b.flip(0), toy.X, toy.y, carried, 1e-6,
                         keeps_old=True)  # fmt: skip
    assert ff.U is None and torch.equal(ff.L_b[:12, :12], carried.L)
    assert torch.equal(ff.L_b[:12, 12:], torch.zeros(12, extra, dtype=Z_b.dtype))
    assert float(fast.value) == pytest.approx(float(general.value), rel=1e-9)
    torch.testing.assert_close(ff.L_b @ ff.L_b.mT, fg.L_b @ fg.L_b.mT, rtol=1e-6, atol=1e-6)
    # The same posterior: the whitened mean L_b⁻ᵀ D⁻¹ v and covariance factor agree.
    mean_fast = torch.linalg.solve_triangular(
        ff.L_b.mT, torch.cholesky_solve(fast.v[:, None], fast.L_D), upper=True
    )
    mean_general = torch.linalg.solve_triangular(
        fg.L_b.mT, torch.cholesky_solve(general.v[:, None], general.L_D), upper=True
    )
    K_sz = toy.kernel_old.K(toy.X[:7], Z_b)
    torch.testing.assert_close(K_sz @ mean_fast, K_sz @ mean_general, rtol=1e-6, atol=1e-6)


def test_an_extension_that_fails_takes_the_general_path(
    online_toy: OnlineToy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Schur complement no rung factors falls back to the general factor, whose ladder
    starts again on the whole K_bb (a valid kernel's complement is PSD, so the failure is
    forced here)."""
    toy = online_toy
    Z_a = torch.linspace(0.0, 10.0, 12, dtype=toy.X.dtype)[:, None]
    k, s2 = toy.kernel_old, toy.noise_old
    with torch.no_grad():
        terms, f = online_bound(k, s2, Z_a, toy.X_old, toy.y_old, None, 1e-6)
        carried = carry(Z_a, f, terms)
        Z_b = torch.cat([Z_a, Z_a[:1] + 0.05])

        def fails(*args: object) -> None:
            raise NumericalError("the new points' Schur complement is not positive definite")

        monkeypatch.setattr(bound_module, "_extended_factors", fails)
        fallback, ff = online_bound(k, s2, Z_b, toy.X, toy.y, carried, 1e-6, keeps_old=True)
        general, fg = online_bound(k, s2, Z_b, toy.X, toy.y, carried, 1e-6)
    assert ff.U is not None and torch.equal(ff.L_b, fg.L_b)
    assert float(fallback.value) == float(general.value)


@pytest.mark.parametrize("prefix", [True, False])
def test_factors_read_the_old_blocks_off_k_bb_when_z_begins_with_the_old_points(
    prefix: bool,
) -> None:
    """VIPS keeps the old points first: K(Z, Z_a) and K_aa are then K_bb's blocks, the same
    numbers as the kernel's own matrices (and another order still gets those)."""
    from gp_mapper.engine import Constant, Matern52
    from gp_mapper.engine.core.linalg import Jitter, solve_lower
    from gp_mapper.engine.vips.bound import factors
    from gp_mapper.engine.vips.posterior import CarriedPosterior

    gen = torch.Generator().manual_seed(3)
    Z_a = torch.rand(12, 2, generator=gen, dtype=torch.float64) * 4.0
    new = torch.rand(5, 2, generator=gen, dtype=torch.float64) * 4.0
    Z = torch.cat([Z_a, new]) if prefix else torch.cat([new, Z_a])
    X = torch.rand(30, 2, generator=gen, dtype=torch.float64) * 4.0
    eye = torch.eye(12, dtype=torch.float64)
    old = CarriedPosterior(Z_a, eye, eye * 0.0, torch.zeros(12, dtype=torch.float64), eye,
                           Jitter(1e-8, True))  # fmt: skip
    kernel = Constant(5.0) + Matern52(2.0, 0.8)
    f = factors(kernel, Z, X, old, Jitter(1e-8, True))
    eps = f.jitter.amount(torch.diagonal(kernel.K(Z)).mean())
    same = (Z[:, None, :] == Z_a[None, :, :]).all(-1).to(Z.dtype)
    torch.testing.assert_close(f.U, solve_lower(f.L_b, kernel.K(Z, Z_a) + eps * same))
    torch.testing.assert_close(f.Kaa, kernel.K(Z_a) + eps * eye)
