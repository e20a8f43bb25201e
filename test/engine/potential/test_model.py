"""The three-axis field model: exact in its limit, curl-free, the scalar model where they meet."""

from __future__ import annotations

import pytest
import torch

from gp_mapper.engine import EngineSpec, OnlineSparseGP, build_model
from gp_mapper.engine.core.kernels import Constant, SquaredExponential
from gp_mapper.engine.core.linalg import Jitter, cholesky_with_jitter, solve_lower
from gp_mapper.engine.potential import (
    CurlFreeKernel,
    ExactFieldGP,
    FieldPivots,
    FieldReadings,
    VectorFieldGP,
    field_rows,
    potential_rows,
)
from gp_mapper.engine.potential.functionals import earth_rows
from gp_mapper.engine.vips.options import StreamOptions
from gp_mapper.engine.vips.selectors import FixedSize

from .conftest import DTYPE, dipole_field, lawnmower

NOISE = 0.04


def planar(P2: torch.Tensor) -> torch.Tensor:
    return torch.cat([P2, torch.zeros(P2.shape[0], 1, dtype=DTYPE)], dim=1)


def readings(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    P = lawnmower(n)
    noise = NOISE**0.5 * torch.randn(n, 3, generator=torch.Generator().manual_seed(seed))
    return P, dipole_field(planar(P)) + noise.to(DTYPE)


def kernel() -> CurlFreeKernel:
    return CurlFreeKernel(SquaredExponential(30.0, 0.45), 1000.0)


def test_with_every_reading_inducing_the_stream_is_the_exact_vector_gp() -> None:
    P, B = readings(60)
    # A tiny jitter: the equality is exact up to what is added to K_ZZ.
    options = StreamOptions(fit_iterations=0, device="cpu", jitter=1e-12)
    model = VectorFieldGP(kernel(), NOISE, FieldReadings(), options=options)
    for part in torch.split(torch.arange(60), 20):  # three batches through the online bound
        assert model.update(P[part], B[part]).accepted
    exact = ExactFieldGP(kernel().double(), NOISE, P, B, jitter=1e-12)
    Xs = torch.tensor([[0.4, 0.3], [1.7, 2.2], [2.9, 1.0], [6.0, 6.0]], dtype=DTYPE)
    mean, cov = model.predict_field(Xs)
    mean_ref, cov_ref = exact.predict_field(Xs)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(cov, cov_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.predict(Xs)[0], mean_ref.norm(dim=1), rtol=1e-6, atol=1e-5)


def test_a_dipole_field_is_recovered_and_the_posterior_mean_has_no_curl() -> None:
    P, B = readings(600)
    spec = EngineSpec(model="potential", kernel="se", lengthscale=0.5, kernel_variance=30.0,
                      noise_variance=0.1, constant_variance=1000.0, fit_iterations=15,
                      device="cpu")  # fmt: skip
    model = build_model(spec, input_dim=3)
    for part in torch.split(torch.arange(600), 150):
        report = model.update(planar(P[part]), B[part])
        assert report.accepted, report.reason
    # M potential points, not 3 per reading: fewer than the readings themselves.
    assert 0 < model.num_inducing < 600
    near = planar(lawnmower(200)[::2] + 0.02)
    truth = dipole_field(near)
    mean, cov = model.predict_field(near)
    rmse = ((mean - truth) ** 2).mean(0).sqrt()
    spread = truth.std(0)
    assert bool((rmse < 0.2 * spread).all()), (rmse, spread)
    assert bool((torch.diagonal(cov, dim1=1, dim2=2) > 0).all())
    # curl B = ∇ × B by central differences: zero for a gradient field (up to round-off).
    h = 1e-4
    J = torch.stack(
        [
            (model.predict_field(near + h * e)[0] - model.predict_field(near - h * e)[0]) / (2 * h)
            for e in torch.eye(3, dtype=DTYPE)
        ],
        dim=2,
    )  # J[s, i, j] = ∂B_i/∂p_j
    curl = torch.stack(
        [J[:, 2, 1] - J[:, 1, 2], J[:, 0, 2] - J[:, 2, 0], J[:, 1, 0] - J[:, 0, 1]], dim=1
    )
    gradient_scale = J.abs().amax()
    assert float(curl.abs().max()) < 1e-5 * float(gradient_scale)


def test_one_axis_observed_on_a_line_is_the_scalar_model_there() -> None:
    # On a line x = c, cov(B_x, B_x') = σ_E² + σ_B² g: the scalar model's Constant + SE.
    n = 25
    y_pos = torch.linspace(0.0, 3.0, n, dtype=DTYPE)
    P = torch.stack([torch.full_like(y_pos, 1.2), y_pos, torch.zeros_like(y_pos)], dim=1)
    bx = dipole_field(P)[:, 0]
    rows = field_rows(P)[:n]  # the x component of each reading only
    vector = OnlineSparseGP(kernel(), NOISE, FieldReadings(), fit_iterations=0, device="cpu",
                            outlier_z=0.0)  # fmt: skip
    scalar = OnlineSparseGP(Constant(1000.0) + SquaredExponential(30.0, 0.45), NOISE,
                            FixedSize(n), max_inducing=n, fit_iterations=0, device="cpu",
                            outlier_z=0.0)  # fmt: skip
    assert vector.update(rows, bx).accepted and scalar.update(P[:, 1:2], bx).accepted
    test_y = torch.linspace(-0.5, 3.5, 9, dtype=DTYPE)
    test = torch.stack([torch.full_like(test_y, 1.2), test_y, torch.zeros_like(test_y)], 1)
    mean_v, var_v = vector.predict(field_rows(test)[:9])
    mean_s, var_s = scalar.predict(test[:, 1:2])
    torch.testing.assert_close(mean_v, mean_s, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(var_v, var_s, rtol=1e-5, atol=1e-6)


def field_pivots(
    k: CurlFreeKernel, points: int, max_new: int
) -> tuple[FieldPivots, torch.Tensor, torch.Tensor]:
    """Greedy pivots over one candidate per reading of a planar lawnmower path; its field rows
    and each row's reading."""
    rows = field_rows(planar(lawnmower(points)))
    positions, reading = torch.unique(rows[:, :3], dim=0, return_inverse=True)
    columns = torch.cat([rows, potential_rows(positions + 0.1)])
    mask = torch.zeros(columns.shape[0], dtype=torch.bool)
    mask[rows.shape[0] :] = True
    E = earth_rows(rows)
    L, _ = cholesky_with_jitter(k.K(E), Jitter())
    R = positions.shape[0]
    owner = torch.arange(R)
    return FieldPivots(k, columns, mask, reading, owner, R, Jitter(), E, L, max_new), rows, reading


def test_greedy_score_sums_the_three_components_of_each_reading() -> None:
    k = kernel().double()
    pc, rows, reading = field_pivots(k, 40, 10)
    columns, E, R = pc.columns, earth_rows(rows), int(reading.max()) + 1
    for _ in range(5):  # the pivots so far, then the next one from first principles
        pc.add(pc.next_pivot())
    Z = torch.cat([E, columns[pc.pivots]])
    with torch.no_grad():
        Kzz = k.K(Z) + 1e-8 * k.K_diag(Z).mean() * torch.eye(Z.shape[0], dtype=DTYPE)
        A = solve_lower(torch.linalg.cholesky(Kzz), k.K(Z, rows))
        residual = k.K_diag(rows) - (A * A).sum(0)
    score = torch.zeros(R, dtype=DTYPE).index_add_(0, reading, residual)
    taken = torch.tensor([j - rows.shape[0] for j in pc.pivots])
    score[taken] = -torch.inf  # their single candidate is used up
    chosen = pc.next_pivot() - rows.shape[0]
    assert chosen == int(torch.argmax(score))
    assert score[chosen] > 2.0 * residual.max()  # a sum over components, not one of them


def test_the_pivots_end_when_every_candidate_is_taken() -> None:
    pc, rows, _ = field_pivots(kernel().double(), 6, 6)
    globals_, R = pc.num_prefix, pc.columns.shape[0] - rows.shape[0]
    assert pc.extend_to(globals_ + R + 5) == globals_ + R
    assert sorted(pc.pivots) == list(range(rows.shape[0], pc.columns.shape[0]))
    assert pc.next_pivot() is None


def test_bad_batches_are_refused_with_clear_errors() -> None:
    model = VectorFieldGP(kernel(), options=StreamOptions(device="cpu"))
    P, B = readings(10)
    with pytest.raises(ValueError, match=r"y \[N, 3\]"):
        model.update(P, B[:, 0])
    B[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model.update(P, B)
    with pytest.raises(RuntimeError, match="no data"):
        model.predict_field(P)
    with pytest.raises(TypeError, match="CurlFreeKernel"):
        VectorFieldGP(SquaredExponential(), options=StreamOptions(device="cpu"))


def test_statistics_keep_each_components_level_and_survive_the_state() -> None:
    P, B = readings(90)
    model = VectorFieldGP(kernel(), NOISE, options=StreamOptions(fit_iterations=0, device="cpu"))
    assert model.update(P, B).accepted
    stats = model.engine.stats
    assert [g.count for g in stats.groups] == [90, 90, 90]
    torch.testing.assert_close(
        torch.tensor([g.mean for g in stats.groups], dtype=DTYPE), B.mean(0), rtol=1e-12, atol=0
    )
    within = float(((B - B.mean(0)) ** 2).sum()) / (3 * 90 - 3)
    assert stats.variance == pytest.approx(within, rel=1e-12)  # not the levels' spread
    restored = VectorFieldGP.from_state(model.state_dict(), device="cpu")
    assert restored.engine.stats == stats


def test_the_hyperprior_centres_the_field_variance_on_the_data_not_the_uniform_field() -> None:
    """The uniform field's variance is a prior scale of the field's mean, which the readings'
    spread about their mean does not measure: it keeps its initial centre."""
    P, B = readings(90)
    options = StreamOptions(fit_iterations=0, device="cpu", hyperprior_scale=0.5)
    model = VectorFieldGP(kernel(), NOISE, options=options)
    assert model.update(P, B).accepted
    engine = model.engine
    prior = engine._hyperprior(engine.stats)
    assert prior is not None
    initial = float(kernel().earth_variance)
    assert prior.centres["earth_variance"] == pytest.approx(initial)
    assert prior.centres["se_variance"] == pytest.approx(engine.stats.variance)
