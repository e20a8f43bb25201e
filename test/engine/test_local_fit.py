"""The window's neighbourhood for the θ fit on a large map (vips/local_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.engine.vips.local_fit import distance_to, local_fit_problem, marginal


def _lawnmower(n: int, rows: float = 3.0, side: float = 20.0, step: float = 0.05) -> np.ndarray:
    s = np.arange(n) * step
    row = np.floor(s / side)
    along = s - row * side
    x = np.where(row % 2 == 0, along, side - along)
    return np.column_stack([x, row * rows])


def _field(P: np.ndarray, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((200, 2)) / 0.7
    b = rng.uniform(0.0, 2.0 * np.pi, 200)
    return 50.0 + np.sqrt(2.0 * 300.0 / 200) * np.cos(P @ W.T + b).sum(1)


def _streamed(n: int, window: int, **spec: object):
    P = _lawnmower(n)
    y = _field(P) + 0.3 * np.random.default_rng(1).standard_normal(n)
    model = build_model(EngineSpec(fit_iterations=0, **spec), 2)  # type: ignore[arg-type]
    for start in range(0, n, window):
        assert model.update(P[start : start + window], y[start : start + window]).accepted
    return model, P, y


def test_marginal_is_the_block_of_the_carried_moments() -> None:
    model, _, _ = _streamed(1200, 400)
    carried = model.carried
    mean, cov = carried.mean_and_cov()
    keep = torch.zeros(carried.num_inducing, dtype=torch.bool)
    keep[::3] = True
    part = marginal(carried, keep)
    assert part is not None and part.num_inducing == int(keep.sum())
    m, S = part.mean_and_cov()
    scale = float(torch.diagonal(cov).max())
    assert torch.allclose(m, mean[keep], atol=1e-8 * float(mean.abs().max()))
    assert float((S - cov[keep][:, keep]).abs().max()) < 1e-6 * scale
    # Its prior factor is the old prior's block: L' L'ᵀ = (L Lᵀ)[S, S].
    prior = carried.L @ carried.L.mT
    assert torch.allclose(part.L @ part.L.mT, prior[keep][:, keep], rtol=1e-10, atol=1e-10)
    assert marginal(carried, torch.zeros_like(keep)) is None


def test_distance_to_is_to_the_nearest_row() -> None:
    pts = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]], dtype=torch.float64)
    X = torch.tensor([[0.0, 0.5]], dtype=torch.float64)
    assert (distance_to(pts, X) <= 1.2).tolist() == [True, True, False]
    assert (distance_to(pts[:0], X) <= 1.0).numel() == 0


def test_the_neighbourhood_is_used_only_past_the_threshold_and_when_smaller() -> None:
    model, P, _ = _streamed(4000, 400)
    engine = model
    kernel, carried = engine.kernel, engine.carried
    M = carried.num_inducing
    X = torch.as_tensor(P[-200:])
    whole = local_fit_problem(kernel, carried.Z, X, carried, 0)
    assert not whole.local and whole.Z.shape[0] == M and whole.old is carried
    assert not local_fit_problem(kernel, carried.Z, X, carried, M + 1).local
    near = local_fit_problem(kernel, carried.Z, X, carried, M // 2)
    assert near.local and 0 < near.Z.shape[0] < M / 2
    assert near.old is not None and near.old.num_inducing == near.Z.shape[0]
    # Every inducing point left out is beyond the kernel's range of every reading.
    radius = kernel.negligible_distance(1e-3)
    assert radius is not None
    far = ~(distance_to(carried.Z, X) <= radius)
    assert int(far.sum()) == M - near.Z.shape[0]
    # A window covering the whole map: a neighbourhood of more than half the map is the map
    # while the map is within the threshold, and past it the threshold's nearest points.
    everywhere = torch.as_tensor(P)
    assert not local_fit_problem(kernel, carried.Z, everywhere, carried, M).local
    capped = local_fit_problem(kernel, carried.Z, everywhere, carried, M // 4)
    assert capped.local and capped.Z.shape[0] == M // 4
    assert capped.old is not None and capped.old.num_inducing == M // 4


def test_a_long_lengthscale_does_not_make_the_whole_map_the_neighbourhood() -> None:
    # A θ fit that drifted to a long lengthscale puts most of a large map within the kernel's
    # range of any window: the fit still takes at most the threshold's number of points,
    # the nearest, and none farther than any it leaves out.
    model, P, _ = _streamed(4000, 400)
    carried = model.carried
    M = carried.num_inducing
    kernel = model.kernel
    with torch.no_grad():
        for part in kernel.modules():
            if hasattr(part, "raw_lengthscale"):
                part.raw_lengthscale.fill_(40.0)  # softplus: ≈ 40 m
    X = torch.as_tensor(P[-200:])
    K = M // 3
    problem = local_fit_problem(kernel, carried.Z, X, carried, K)
    assert problem.local and problem.Z.shape[0] == K
    d_in = torch.cdist(problem.Z, X).min(1).values
    d_all = torch.cdist(carried.Z, X).min(1).values
    assert float(d_in.max()) <= float(torch.sort(d_all).values[K - 1]) + 1e-12


@pytest.mark.parametrize("threshold", [1, 0])
def test_a_fit_on_the_neighbourhood_commits_over_the_whole_map(threshold: int) -> None:
    model, P, y = _streamed(4000, 400, vips_local_fit_inducing=threshold)
    engine = model
    engine.fit_iterations = 20
    M = engine.num_inducing
    report = engine.update(P[-100:] + np.array([0.0, 0.5]), y[-100:])
    assert report.accepted and report.fit_iterations > 0
    if threshold:
        assert 0 < report.fit_inducing < M / 2
    else:
        assert report.fit_inducing >= M
    # The committed posterior rests on every inducing point, not the neighbourhood.
    assert engine.carried.num_inducing == report.m_after >= M
    assert np.isfinite(engine.hyperparameters()["lengthscale"])


def test_the_fit_limits_survive_a_state_round_trip() -> None:
    model, _, _ = _streamed(800, 400, vips_local_fit_inducing=123, vips_fit_max_seconds=7.5)
    restored = type(model).from_state(model.state_dict())
    assert restored.local_fit_inducing == 123 and restored.fit_max_seconds == 7.5
    with pytest.raises(ValueError, match="local_fit_inducing"):
        type(model)(model.kernel, local_fit_inducing=-1)


def test_a_window_beyond_a_full_maps_points_keeps_theta_instead_of_fitting_the_whole_map() -> None:
    # At its cap the map adds no point where the robot walks on: no inducing point is within
    # the kernel's range of the window, and a fit on the whole map would be O(M³) a step.
    model, P, y = _streamed(2000, 400, vips_max_inducing=40, vips_local_fit_inducing=1)
    assert model.num_inducing == 40
    model.fit_iterations = 20
    theta = model.hyperparameters()
    report = model.update(P[:100] + np.array([500.0, 0.0]), y[:100])
    assert report.accepted and report.m_after == 40
    assert report.fit_iterations == 0 and report.fit_inducing == 0
    assert report.fit_message == "not fitted: no inducing point near the window"
    assert model.hyperparameters() == theta
    # Where its points are, the same map still fits θ.
    again = model.update(P[100:200] + np.array([0.0, 0.3]), y[100:200])
    assert again.accepted and again.fit_iterations > 0 and again.fit_inducing > 0
