"""The magnetometer's nuisance components (our design): kernels, component lists, the map
layer, the heading bias recovered on a synthetic robot, and the state round trip."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from scipy.integrate import dblquad, quad

from gp_mapper.engine import EngineSpec, build_model, model_from_state
from gp_mapper.engine.gam import (
    HEADING_INDUCING_RAD,
    AdditiveGP,
    CompassDeviation,
    MapLayerPosterior,
    RunOffset,
    ZeroMeanMatern32,
    auxiliary_inputs,
    deviation_features,
)
from gp_mapper.engine.gam.settings import parse_components
from gp_mapper.engine.gam.zero_mean import (
    matern32_interval_double_integral,
    matern32_interval_integral,
)
from gp_mapper.io.synthetic import heading_bias, make_synthetic_world, simulate_run

DTYPE = torch.float64
QUICK = {"model": "gam", "device": "cpu", "gam.iterations": 20, "kernel": "matern52",
         "lengthscale": 0.8, "kernel_variance": 20.0, "constant_variance": 2500.0}  # fmt: skip
# The synthetic robot: 3 µT of heading bias (the curve's RMS over a turn is ~2.7 µT, a robot
# body's hard iron of a few µT), 1000 of the readings of a 3-minute run, 100 map inducing points.
BIAS_UT = 3.0
ROBOT_SAMPLES = 1000
ROBOT_INDUCING = 100
# Tolerances: the heading curve within 0.2 µT RMSE of the truth (the noise on ‖B‖ is 0.3 µT per
# reading), and the map error at most 0.75 of the single map GP's.
HEADING_RMSE_TOL_UT = 0.2
MAP_ERROR_RATIO = 0.75


# ---------------------------------------------------------------- component lists
def test_component_lists_parse_in_catalogue_order() -> None:
    assert parse_components("offset+map") == ("offset", "map")
    assert parse_components("drift+map+heading") == ("map", "heading", "drift")
    assert parse_components("map+run+offset") == ("offset", "map", "run")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("offset+map+compass", "unknown component.*'compass'"),
        ("offset+map+map", "map given more than once"),
        ("offset+heading", "has no map"),
    ],
)
def test_bad_component_lists_are_refused_by_name(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_components(text)
    with pytest.raises(ValueError, match=match):
        EngineSpec(model="gam", gam_components=text)


def test_default_components_are_unchanged() -> None:
    model = build_model(EngineSpec(model="gam", device="cpu"), 2)
    assert EngineSpec().get("gam.components") == "offset+map"
    assert model.component_names == ("offset", "map")
    assert model.map_layer is None and model.auxiliary_inputs == ()


def test_nuisance_components_read_the_columns_after_the_map_inputs() -> None:
    spec = EngineSpec(**QUICK, gam_components="offset+map+heading+run+drift")
    model = build_model(spec, 3)
    assert model.component_names == ("offset", "map", "heading", "run", "drift")
    assert model.auxiliary_inputs == auxiliary_inputs(model.component_names)
    assert model.auxiliary_inputs == ("yaw", "run", "time")
    columns = {c.name: c.kernel.active_dims for c in model.components}
    assert columns == {"offset": None, "map": (0, 1), "heading": (3,), "run": (4,), "drift": (5,)}
    assert model.map_layer == ("offset", "map") and model.map_input_dim == 3


# ---------------------------------------------------------------- kernels
def test_compass_deviation_is_the_harmonic_basis_and_zero_mean() -> None:
    kernel = CompassDeviation([1.3, 0.4], (0,)).double()
    psi = torch.linspace(-math.pi, math.pi, 9, dtype=DTYPE)[:, None]
    phi = deviation_features(psi[:, 0])
    dense = phi @ torch.diag(torch.tensor([1.3, 1.3, 0.4, 0.4], dtype=DTYPE)) @ phi.mT
    torch.testing.assert_close(kernel.K(psi), dense, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(kernel.K_diag(psi), torch.full((9,), 1.7, dtype=DTYPE))
    # Every sample path integrates to zero over a turn.
    turn = torch.linspace(0.0, 2.0 * math.pi, 721, dtype=DTYPE)[:-1, None]
    assert kernel.K(turn, psi).mean(0).abs().max() < 1e-12
    # The four inducing headings represent the rank-4 kernel exactly.
    Z = torch.tensor(HEADING_INDUCING_RAD, dtype=DTYPE)[:, None]
    assert torch.linalg.cond(kernel.K(Z)) < 10.0


def test_run_offset_correlates_one_run_only() -> None:
    kernel = RunOffset(2.5, (0,)).double()
    runs = torch.tensor([[0.0], [1.0], [1.0000001], [3.0]], dtype=DTYPE)
    expected = 2.5 * torch.tensor(
        [[1, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]], dtype=DTYPE
    )
    torch.testing.assert_close(kernel.K(runs), expected)


def test_zero_mean_matern32_integrals_match_quadrature() -> None:
    ell, low, high = 0.7, 0.0, 2.0

    def k(r: float) -> float:
        s = math.sqrt(3.0) * abs(r) / ell
        return (1.0 + s) * math.exp(-s)

    lengthscale = torch.tensor(ell, dtype=DTYPE)
    for x in (-0.5, 0.3, 1.0, 2.5):  # inside and on both sides of the interval
        reference = quad(lambda t, x=x: k(x - t), low, high, points=[x] if low < x < high else None)
        got = matern32_interval_integral(torch.tensor([x], dtype=DTYPE), lengthscale, low, high)
        assert float(got) == pytest.approx(reference[0], rel=1e-10)
    reference = dblquad(lambda t, x: k(x - t), low, high, low, high, epsabs=1e-11)[0]
    got = matern32_interval_double_integral(lengthscale, low, high)
    assert float(got) == pytest.approx(reference, rel=1e-8)


def test_zero_mean_matern32_sample_paths_integrate_to_zero() -> None:
    kernel = ZeroMeanMatern32(1.3, 0.7, (0,), (0.0, 2.0)).double()
    x = torch.linspace(0.0, 2.0, 4001, dtype=DTYPE)[:, None]
    other = torch.tensor([[0.4], [1.9], [3.0]], dtype=DTYPE)
    integral = torch.trapezoid(kernel.K(x, other), x[:, 0], dim=0)
    assert integral.abs().max() < 1e-6
    assert (kernel.K_diag(other) <= 1.3).all()
    with pytest.raises(ValueError, match="no interval yet"):
        ZeroMeanMatern32(1.0, 1.0, (0,)).double().K(other)


# ---------------------------------------------------------------- the synthetic robot
def robot(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, y) [N, 2], yaw [N], ‖B‖ [N] of a biased robot, and the true ‖B‖ on a grid [G]."""
    world = make_synthetic_world(seed)
    run = simulate_run(world, 180.0, 50.0, seed, heading_bias_ut=BIAS_UT)
    keep = np.sort(np.random.default_rng(seed).choice(len(run.time_s), ROBOT_SAMPLES, False))
    y = np.linalg.norm(run.mag_ut, axis=1)[keep]
    return run.position_m[keep], run.heading_rad[keep], y, world


@pytest.fixture(scope="module")
def robot_fits() -> dict[str, object]:
    torch.set_num_threads(1)
    xy, yaw, y, world = robot()
    out: dict[str, object] = {"world": world}
    for components, X in (("offset+map", xy), ("offset+map+heading", np.column_stack([xy, yaw]))):
        spec = EngineSpec(**{**QUICK, "gam.iterations": 200}, gam_components=components,
                          gam_map_inducing=ROBOT_INDUCING)  # fmt: skip
        model = build_model(spec, 2)
        assert model.fit(X, y).accepted
        out[components] = model
    return out


def test_heading_component_recovers_the_bias_curve(robot_fits) -> None:
    curve = robot_fits["offset+map+heading"].report.details["heading_curve"]
    psi = np.array(curve["input"])
    truth = heading_bias(psi, BIAS_UT)  # zero mean over a turn, as the component
    error = np.sqrt(np.mean((np.array(curve["mean"]) - truth) ** 2))
    assert error < HEADING_RMSE_TOL_UT
    # The posterior sd is honest: the truth within 3 sd nearly everywhere.
    sd = np.array(curve["sd"])
    assert np.mean(np.abs(np.array(curve["mean"]) - truth) < 3.0 * sd) > 0.9
    assert len(curve["coefficients_BCDE"]) == 4


def test_the_map_error_falls_against_the_single_map_gp(robot_fits) -> None:
    world = robot_fits["world"]
    gx, gy = np.meshgrid(np.linspace(0.5, 7.5, 36), np.linspace(0.5, 5.5, 26))
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    truth = world.norm_at(grid)
    errors = {}
    for name in ("offset+map", "offset+map+heading"):
        mean, _ = robot_fits[name].predict(torch.as_tensor(grid))
        errors[name] = float(np.sqrt(np.mean((mean.numpy() - truth) ** 2)))
    assert errors["offset+map+heading"] < MAP_ERROR_RATIO * errors["offset+map"]


def test_the_map_layer_is_offset_plus_map_at_map_inputs(robot_fits) -> None:
    model: AdditiveGP = robot_fits["offset+map+heading"]
    posterior = model.posterior
    assert isinstance(posterior, MapLayerPosterior)
    assert posterior.support.shape == (ROBOT_INDUCING, 2)
    Xs = torch.tensor([[1.0, 2.0], [4.0, 3.0]], dtype=DTYPE)
    padded = torch.tensor([[1.0, 2.0, 0.7], [4.0, 3.0, -2.0]], dtype=DTYPE)  # any heading
    for a, b in zip(
        posterior.predict(Xs), model.predict_subset(padded, ["offset", "map"]), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    total, _ = model.predict_subset(padded, ["offset", "map", "heading"])
    heading, _ = model.predict_components(padded)["heading"]
    torch.testing.assert_close(total, posterior.predict(Xs)[0] + heading)
    prior = posterior.prior_variance(Xs)
    assert (prior > posterior.predict(Xs)[1]).all()
    with pytest.raises(ValueError, match="expected map inputs"):
        posterior.predict(torch.zeros(2, 4, dtype=DTYPE))
    theta = model.hyperparameters()
    assert theta["kernel"] == "matern52" and theta["constant_variance"] > 0.0
    assert len(theta["heading_compass_deviation_variance"]) == 2


# ---------------------------------------------------------------- state
def test_state_round_trips_with_every_nuisance_component() -> None:
    rng = np.random.default_rng(3)
    n = 120
    xy = rng.uniform(0.0, 4.0, (n, 2))
    yaw = rng.uniform(-math.pi, math.pi, n)
    run = np.repeat([0.0, 1.0, 2.0], n // 3)
    time_s = np.arange(n) * 2.0
    y = 45.0 + np.sin(xy[:, 0]) + 0.5 * np.sin(yaw) + 0.3 * run + 0.05 * rng.standard_normal(n)
    X = np.column_stack([xy, yaw, run, time_s])
    spec = EngineSpec(**QUICK, gam_components="offset+map+heading+run+drift",
                      gam_map_inducing=20, gam_drift_inducing=8)  # fmt: skip
    model = build_model(spec, 2)
    report = model.fit(X, y)
    assert report.accepted
    assert report.details["run_offsets"]["input"] == [0.0, 1.0, 2.0]
    assert len(report.details["drift"]["mean"]) == len(report.details["drift"]["sd"])
    buffer = io.BytesIO()
    np.savez(buffer, **model.state_dict())
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as f:
        state = {k: f[k] for k in f.files}
    again = model_from_state(state, device="cpu", expected="gam")
    assert again.map_layer == model.map_layer and again.auxiliary_inputs == model.auxiliary_inputs
    assert again.hyperparameters() == model.hyperparameters()
    Xs = torch.as_tensor(X[:7])
    for a, b in zip(model.predict(Xs[:, :2]), again.predict(Xs[:, :2]), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    for a, b in zip(
        model.predict_subset(Xs, model.component_names),
        again.predict_subset(Xs, again.component_names),
        strict=True,
    ):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    drift = {c.name: c for c in again.components}["drift"].kernel
    assert drift.interval == (0.0, float(time_s[-1]))
