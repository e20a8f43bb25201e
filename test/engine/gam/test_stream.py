"""The streaming additive model (``gam_stream``): the VIPS engine over the block kernel.

With the map alone it is the VIPS engine bit for bit; with a heading component it recovers a
synthetic robot's heading bias and maps better than the single map; its state round-trips;
bad inputs are refused by name.
"""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, StateError, build_model, model_from_state
from gp_mapper.engine.core.kernels import Constant, Matern32, Matern52
from gp_mapper.engine.gam import (
    COMPONENT_TAGS,
    OBSERVATION,
    BlockKernel,
    CompassDeviation,
    StreamingAdditiveGP,
    tagged_rows,
)
from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.io.synthetic import heading_bias, make_synthetic_world, simulate_run

DTYPE = torch.float64
QUICK = {"device": "cpu", "fit_iterations": 15, "kernel": "matern52", "lengthscale": 0.8,
         "kernel_variance": 20.0, "constant_variance": 2500.0}  # fmt: skip
# The synthetic robot of test_magnetic.py: 3 µT of heading bias, 900 readings of a 3-minute run
# streamed in 9 windows.
BIAS_UT = 3.0
ROBOT_SAMPLES = 900
ROBOT_WINDOWS = 9
# The heading curve within 0.3 µT RMSE of the truth (0.3 µT noise per reading; a stream fits θ
# on each window only), and the map error at most 0.75 of the single map's.
HEADING_RMSE_TOL_UT = 0.3
MAP_ERROR_RATIO = 0.75


def stream(model, X: np.ndarray, y: np.ndarray, windows: int) -> None:
    for part in np.array_split(np.arange(len(y)), windows):
        report = model.update(X[part], y[part])
        assert report.accepted, report.reason


def assert_same_engine(vips, gam) -> None:
    """The carried posterior, θ and the map's predictions agree bit for bit."""
    a, b = vips.carried, gam.engine.carried
    assert torch.equal(a.Z, b.Z[:, : a.Z.shape[1]])
    for name in ("L", "P", "v", "L_D"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert vips.hyperparameters() == gam.hyperparameters()
    Xs = torch.cartesian_prod(torch.linspace(-1.0, 9.0, 23, dtype=DTYPE),
                              torch.linspace(-1.0, 7.0, 19, dtype=DTYPE))  # fmt: skip
    for left, right in zip(vips.predict(Xs), gam.predict(Xs), strict=True):
        assert torch.equal(left, right)
    for left, right in zip(
        vips.posterior.predict_block(Xs[:40]), gam.posterior.predict_block(Xs[:40]), strict=True
    ):
        assert torch.equal(left, right)
    assert torch.equal(vips.posterior.support, gam.posterior.support)


# ---------------------------------------------------------------- the map alone: VIPS
def test_with_the_map_alone_the_stream_is_the_vips_engine_bit_for_bit() -> None:
    torch.set_num_threads(1)
    world = make_synthetic_world(1)
    run = simulate_run(world, 60.0, 10.0, 1)
    X, y = run.position_m, np.linalg.norm(run.mag_ut, axis=1)
    vips = build_model(EngineSpec(**QUICK, model="vips"), 2)
    gam = build_model(EngineSpec(**QUICK, model="gam_stream", gam_components="offset+map"), 2)
    assert isinstance(gam, StreamingAdditiveGP) and gam.auxiliary_inputs == ()
    stream(vips, X, y, 4)
    stream(gam, X, y, 4)
    assert_same_engine(vips, gam)


def test_on_the_path_3_stream_the_map_alone_is_the_vips_engine(magnetic_dir) -> None:
    """The VIPS paper's stream (App. D.4): all of path 3 in 20 batches, at the node's settings."""
    torch.set_num_threads(1)
    seq = load_aalto_sequence(magnetic_dir, seq=3)
    X, y = seq.loc_m, np.linalg.norm(seq.mag_ut, axis=1)
    size = (len(y) - len(y) % 20) // 20 - 1  # the authors' split: 19 batches of this size
    bounds = [*range(0, 20 * size, size), len(y)]
    vips = build_model(EngineSpec(device="cpu", model="vips"), 2)
    gam = build_model(EngineSpec(device="cpu", model="gam_stream", gam_components="offset+map"), 2)
    for model in (vips, gam):
        for start, stop in itertools.pairwise(bounds):
            assert model.update(X[start:stop], y[start:stop]).accepted
    assert vips.num_inducing > 50  # a real map, not a stuck start
    assert_same_engine(vips, gam)


# ---------------------------------------------------------------- the block kernel
def test_block_kernel_sums_components_for_readings_and_separates_inducing_values() -> None:
    d = 2
    parts = {"map": Constant(3.0) + Matern52(2.0, 0.7), "heading": CompassDeviation([1.5, 0.5]),
             "drift": Matern32(0.8, 30.0)}  # fmt: skip
    kernel = BlockKernel(parts, d)
    g = torch.Generator().manual_seed(0)
    p = torch.rand(5, d, generator=g, dtype=DTYPE)
    yaw = torch.rand(5, generator=g, dtype=DTYPE) * 6.0
    t = torch.rand(5, generator=g, dtype=DTYPE) * 100.0
    zero = torch.zeros(5, dtype=DTYPE)
    obs = tagged_rows(p, yaw, zero, t, OBSERVATION)
    k_map = parts["map"].K(p)
    k_head = parts["heading"].K(yaw[:, None])
    k_drift = parts["drift"].K(t[:, None])
    torch.testing.assert_close(kernel.K(obs), k_map + k_head + k_drift, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(kernel.K_diag(obs), torch.diagonal(k_map + k_head + k_drift))
    heading_rows = tagged_rows(p, yaw, zero, t, COMPONENT_TAGS["heading"])
    map_rows = tagged_rows(p, yaw, zero, t, COMPONENT_TAGS["map"])
    torch.testing.assert_close(kernel.K(heading_rows, obs), k_head, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(kernel.K(map_rows, obs), k_map, rtol=1e-14, atol=1e-14)
    assert torch.equal(kernel.K(map_rows, heading_rows), torch.zeros(5, 5, dtype=DTYPE))
    with pytest.raises(ValueError, match=r"additive rows must be \[N, 6\]"):
        kernel.K(p)
    with pytest.raises(ValueError, match="must include map"):
        BlockKernel({"heading": CompassDeviation()}, d)


# ---------------------------------------------------------------- the synthetic robot
def robot(seed: int = 0):
    world = make_synthetic_world(seed)
    run = simulate_run(world, 180.0, 50.0, seed, heading_bias_ut=BIAS_UT)
    keep = np.linspace(0, len(run.time_s) - 1, ROBOT_SAMPLES).round().astype(int)
    y = np.linalg.norm(run.mag_ut, axis=1)[keep]
    return run.position_m[keep], run.heading_rad[keep], run.time_s[keep], y, world


@pytest.fixture(scope="module")
def robot_streams() -> dict[str, object]:
    torch.set_num_threads(1)
    xy, yaw, _, y, world = robot()
    out: dict[str, object] = {"world": world}
    for components, X in (("offset+map", xy), ("offset+map+heading", np.column_stack([xy, yaw]))):
        spec = EngineSpec(**QUICK, model="gam_stream", gam_components=components)
        model = build_model(spec, 2)
        stream(model, X, y, ROBOT_WINDOWS)
        out[components] = model
    return out


def test_the_heading_component_recovers_the_bias_curve(robot_streams) -> None:
    model: StreamingAdditiveGP = robot_streams["offset+map+heading"]
    summary = model.nuisance_summary()
    psi = np.array(summary["heading_curve_yaw"])
    mean, sd = np.array(summary["heading_curve_mean"]), np.array(summary["heading_curve_sd"])
    truth = heading_bias(psi, BIAS_UT)  # zero mean over a turn, as the component
    assert np.sqrt(np.mean((mean - truth) ** 2)) < HEADING_RMSE_TOL_UT
    assert np.mean(np.abs(mean - truth) < 3.0 * sd) > 0.9
    assert model.num_inducing_of("heading") == 4
    flat = model.report.as_dict()  # what /diagnostics shows
    assert {"heading_B", "heading_C", "heading_D", "heading_E", "heading_sd_max"} <= set(flat)
    assert flat["heading_compass_deviation_variance"]


def test_the_map_error_falls_against_the_single_map_stream(robot_streams) -> None:
    world = robot_streams["world"]
    gx, gy = np.meshgrid(np.linspace(0.5, 7.5, 36), np.linspace(0.5, 5.5, 26))
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    truth = world.norm_at(grid)
    errors = {}
    for name in ("offset+map", "offset+map+heading"):
        mean, _ = robot_streams[name].predict(grid)
        errors[name] = float(np.sqrt(np.mean((mean.numpy() - truth) ** 2)))
    assert errors["offset+map+heading"] < MAP_ERROR_RATIO * errors["offset+map"]


# ---------------------------------------------------------------- runs, drift, state
def nuisance_stream(seed: int = 3):
    """Two runs 60 s apart on a small square, a heading bias, a slow drift and a run offset."""
    rng = np.random.default_rng(seed)
    n = 160
    t = np.concatenate([np.arange(n // 2) * 0.5, 100.0 + np.arange(n // 2) * 0.5])
    xy = np.column_stack([2.0 + 1.5 * np.cos(t / 5.0), 2.0 + 1.5 * np.sin(t / 7.0)])
    yaw = np.mod(t / 2.0, 2.0 * math.pi) - math.pi
    run = (t >= 100.0).astype(float)
    y = (45.0 + np.sin(xy[:, 0]) + 0.8 * np.sin(yaw) + 0.3 * np.cos(2.0 * yaw)
         + 0.002 * t + 0.5 * run + 0.05 * rng.standard_normal(n))  # fmt: skip
    return np.column_stack([xy, yaw, 1.7e9 + t]), y


def all_components() -> StreamingAdditiveGP:
    spec = EngineSpec(
        **QUICK,
        model="gam_stream",
        gam_run_gap=5.0,
        gam_drift_spacing=20.0,
        gam_drift_window=60.0,
        gam_components="offset+map+heading+run+drift",
    )
    return build_model(spec, 2)


def test_runs_split_at_gaps_and_drift_times_slide() -> None:
    torch.set_num_threads(1)
    model = all_components()
    assert model.auxiliary_inputs == ("yaw", "time")
    X, y = nuisance_stream()
    stream(model, X, y, 4)
    assert model.clock.run == 1 and model.clock.origin_s == X[0, 3]
    # The first run is the reference: only the second has an offset of its own.
    assert model.num_inducing_of("run") == 1 and model.num_inducing_of("heading") == 4
    Z = model.engine.carried.Z
    drift_times = Z[Z[:, -1] == COMPONENT_TAGS["drift"], 4]
    # Inside the window (60 s back from the newest reading, one spacing of margin): older
    # times have left the set.
    newest = X[-1, 3] - X[0, 3]
    assert float(drift_times.min()) >= newest - 60.0 - 2 * 20.0
    summary = model.nuisance_summary()
    assert summary["run"] == 1.0 and summary["run_offset_sd"] > 0.0
    assert len(summary["drift_time_s"]) == len(drift_times) and summary["drift_sd"] > 0.0


def test_the_nuisance_leaves_the_level_to_the_map_layer() -> None:
    """One run, no heading bias, no drift, θ by maximum likelihood: the map layer keeps the
    field's level (a free run offset took 12 µT of it) and the vanished heading curve is not
    taken for a collapse (every fitted θ is committed)."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    n = 480
    t = np.arange(n) * 0.5
    xy = np.column_stack([3.0 * np.cos(t / 10.0), 3.0 * np.sin(t / 7.0)])
    field = 48.0 + np.sin(xy[:, 0]) + np.cos(xy[:, 1])
    X = np.column_stack([xy, np.mod(t / 3.0, 2.0 * math.pi), t])
    y = field + 0.05 * rng.standard_normal(n)
    spec = EngineSpec(**{**QUICK, "kernel_variance": 1.0, "lengthscale": 1.0,
                         "constant_variance": 500.0}, model="gam_stream", vips_hyperprior_scale=0.0,
                      gam_components="offset+map+heading+run+drift")  # fmt: skip
    model = build_model(spec, 2)
    for part in np.array_split(np.arange(n), 4):
        report = model.update(X[part], y[part])
        assert report.accepted and report.fit_refused == "" and report.fit_iterations > 0
    mean, _ = model.predict(xy)
    assert abs(float(np.mean(mean.numpy() - field))) < 0.05
    summary = model.nuisance_summary()
    assert summary["run_offset"] == 0.0 and summary["run_offset_sd"] == 0.0  # the reference
    assert np.max(np.abs(summary["heading_curve_mean"])) < 0.05


def test_state_round_trips_and_the_stream_continues_alike(tmp_path) -> None:
    torch.set_num_threads(1)
    model = all_components()
    X, y = nuisance_stream()
    half = len(y) // 2 + 10
    stream(model, X[:half], y[:half], 2)
    path = tmp_path / "state.npz"
    np.savez(path, **model.state_dict())
    with np.load(path, allow_pickle=False) as f:
        loaded = model_from_state({k: f[k] for k in f.files}, "cpu")
    assert isinstance(loaded, StreamingAdditiveGP) and loaded.clock == model.clock
    grid = np.array([[1.0, 1.0], [2.5, 2.0], [9.0, 9.0]])
    for a, b in zip(model.predict(grid), loaded.predict(grid), strict=True):
        assert torch.equal(a, b)
    for m in (model, loaded):
        assert m.update(X[half:], y[half:]).accepted
    for a, b in zip(model.predict(grid), loaded.predict(grid), strict=True):
        assert torch.equal(a, b)
    assert loaded.nuisance_summary() == model.nuisance_summary()


def test_bad_inputs_and_states_are_refused_by_name() -> None:
    model = all_components()
    X, y = nuisance_stream()
    with pytest.raises(ValueError, match=r"need X \[N, 4\] \(position \(2\), yaw, time\)"):
        model.update(X[:, :3], y)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="1 rows with NaN"):
        model.update(bad, y)
    with pytest.raises(ValueError, match="empty batch"):
        model.update(X[:0], y[:0])
    with pytest.raises(RuntimeError, match="no data yet"):
        model.predict(np.zeros((1, 2)))
    assert model.num_updates == 0 and model.clock is None  # nothing was committed
    stream(model, X[:40], y[:40], 1)
    with pytest.raises(ValueError, match=r"positions must be \[S, 2\]"):
        model.predict(np.zeros((1, 4)))
    with pytest.raises(ValueError, match="no component 'compass'"):
        model.predict_component("compass", [0.0])
    state = model.state_dict()
    with pytest.raises(StateError, match="gam_stream state is malformed"):
        StreamingAdditiveGP.from_state(
            {k: v for k, v in state.items() if k != "gam_stream.run_gap"}
        )
    with pytest.raises(StateError, match="not a 'gam_stream' one"):
        StreamingAdditiveGP.from_state({**state, "model": np.array("vips")})
    with pytest.raises(ValueError, match="selects its inducing points with selector: vips"):
        build_model(EngineSpec(**QUICK, model="gam_stream", vips_selector="cv",
                               gam_components="offset+map+heading"), 2)  # fmt: skip
    buffer = io.BytesIO()
    np.savez(buffer, **state)  # every field is a plain array: no pickle needed


def test_a_reading_is_predicted_with_its_nuisance() -> None:
    torch.set_num_threads(1)
    model = all_components()
    X, y = nuisance_stream()
    stream(model, X[:-20], y[:-20], 3)
    mean, var = model.predict_reading(X[-20:])
    layer, _ = model.predict(X[-20:, :2])
    heading, _ = model.predict_component("heading", X[-20:, 2])
    assert float(torch.sqrt(torch.mean((mean - torch.as_tensor(y[-20:])) ** 2))) < 0.3
    assert not torch.allclose(mean, layer + heading)  # run and drift are in it too
    assert (var > 0).all() and model.clock.last_s == X[-21, 3]  # predicting commits nothing
