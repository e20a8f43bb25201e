"""Why coupling matters: a corridor driven out and back, map and drift confounded.

Our example: the paper's own (Adam, Durrande & John 2018, Sec. 7) leaves the components
nearly independent a posteriori, so it cannot show the benefit of a coupled posterior.

A 10 m corridor, four round trips of 5 min legs; map(x) SE (ℓ = 0.5 m, variance 400), drift(t)
SE (ℓ = 8 min, variance 64), noise 1, N = 2000, 20 inducing points per component. The same
places are passed at different times, but always in the same rhythm, so the map's level and
the drift's are nearly one unknown: the mean-field posterior, which treats the two components
as independent, is overconfident about the map, the coupled one is not.

The truth is drawn from the model's own prior over its inducing values (the map and the drift
each in the span of their 20 points), so the coupled posterior is the exact Bayesian one and
its coverage must be nominal; a truth drawn from the full SE prior would also measure how well
20 points span an SE of ℓ = 0.5 m over 10 m (poorly: spaced 0.53 m, the sparse mean lands
5-50 off in level), which is not what this test is about.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine.core.kernels import SquaredExponential
from gp_mapper.engine.gam import AdditiveGP, Component, grid_inducing

DTYPE = torch.float64
N = 2000
LEG_MIN = 5.0
LEGS = 8
CORRIDOR_M = 10.0
INDUCING = 20
MAP_VARIANCE, MAP_LENGTHSCALE_M = 400.0, 0.5
DRIFT_VARIANCE, DRIFT_LENGTHSCALE_MIN = 64.0, 8.0
NOISE = 1.0
SEEDS = 6
# Our first run of this design: the mean-field map sd 0.38x the coupled one (here 0.41: the ratio
# depends on the design alone, not on the data).
SD_RATIO = 0.38
SD_RATIO_TOL = 0.08
COVERAGE_MIN = 0.9
# Relative jitter on K_uu when drawing the truth in its span.
DRAW_JITTER = 1e-9


def corridor() -> tuple[np.ndarray, np.ndarray]:
    """Position x [N] (m) and time t [N] (min) of the out-and-back drive."""
    t = np.linspace(0.0, LEGS * LEG_MIN, N)
    phase = (t / LEG_MIN) % 2.0
    return CORRIDOR_M * np.where(phase < 1.0, phase, 2.0 - phase), t


def components() -> list[Component]:
    z_map = torch.linspace(0.0, CORRIDOR_M, INDUCING, dtype=DTYPE)[:, None]
    z_drift = torch.linspace(0.0, LEGS * LEG_MIN, INDUCING, dtype=DTYPE)[:, None]
    return [
        Component("map", SquaredExponential(MAP_VARIANCE, MAP_LENGTHSCALE_M, active_dims=(0,)),
                  grid_inducing(z_map, [0], 2)),
        Component("drift", SquaredExponential(DRIFT_VARIANCE, DRIFT_LENGTHSCALE_MIN,
                                              active_dims=(1,)), grid_inducing(z_drift, [1], 2)),
    ]  # fmt: skip


@torch.no_grad()
def in_span(component: Component, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A draw of the component at points [P] (its own column) from its prior over its inducing
    values."""
    Z = component.inducing
    Kzz = component.kernel.K(Z).numpy()
    Kzz = Kzz + DRAW_JITTER * Kzz[0, 0] * np.eye(len(Kzz))
    u = np.linalg.cholesky(Kzz) @ rng.standard_normal(len(Kzz))
    P = grid_inducing(torch.as_tensor(points, dtype=DTYPE)[:, None],
                      component.kernel.active_dims, Z.shape[1])  # fmt: skip
    return component.kernel.K(P, Z).numpy() @ np.linalg.solve(Kzz, u)


@pytest.fixture(scope="module")
def corridor_fits() -> dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Per posterior form, per seed: (true map, mean, sd) on a grid along the corridor."""
    torch.set_num_threads(1)
    x, t = corridor()
    grid = np.linspace(0.0, CORRIDOR_M, 101)
    out: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
        "full_coupled": [],
        "mean_field": [],
    }
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        comps = components()
        map_rng_state = rng.bit_generator.state
        true_map = in_span(comps[0], x, rng)
        drift = in_span(comps[1], t, rng)
        y = true_map + drift + np.sqrt(NOISE) * rng.standard_normal(N)
        rng.bit_generator.state = map_rng_state  # the same draw of the map, on the grid
        truth = in_span(comps[0], grid, rng)
        for form in out:
            model = AdditiveGP(comps, NOISE, posterior=form, learn_hyperparameters=False,
                               device="cpu")  # fmt: skip
            assert model.fit(np.column_stack([x, t]), y).accepted
            mean, var = model.predict_subset(np.column_stack([grid, np.zeros_like(grid)]), ["map"])
            out[form].append((truth, mean.numpy(), var.sqrt().numpy()))
    return out


def test_mean_field_is_overconfident_about_the_map(corridor_fits) -> None:
    ratio = np.mean(
        [mf[2] / fc[2] for mf, fc in zip(corridor_fits["mean_field"],
                                          corridor_fits["full_coupled"], strict=True)]
    )  # fmt: skip
    assert ratio == pytest.approx(SD_RATIO, abs=SD_RATIO_TOL)


def test_the_coupled_map_is_calibrated_and_the_mean_field_one_is_not(corridor_fits) -> None:
    def coverage(form: str) -> float:
        return float(np.mean([np.abs(m - f) < 2.0 * s for f, m, s in corridor_fits[form]]))

    assert coverage("full_coupled") >= COVERAGE_MIN
    assert coverage("mean_field") < COVERAGE_MIN
