"""gp-mapper fit: every product of every model, a theta.yaml the node takes, maps of another
model refused, real data mapped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from gp_mapper.cli import main as cli_main
from gp_mapper.commands.fit import fit_bag
from gp_mapper.commands.replay import replay_bag
from gp_mapper.io import write_synthetic_bag
from gp_mapper.mapping import MapperConfig, MappingPipeline
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.map_file import load_map
from gp_mapper.mapping.params_file import config_from_params_file, theta_yaml

from .test_replay import FAST, aalto_slice_bag

# Small, quick settings: a few L-BFGS iterations, small ACGP blocks.
QUICK = {"fit_iterations": 5, "acgp.block_size": 100}
SYNTHETIC_S = 20.0


@pytest.fixture(scope="module")
def synthetic_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bag = tmp_path_factory.mktemp("fit") / "walk.mcap"
    write_synthetic_bag(bag, duration_s=SYNTHETIC_S)
    return bag


@pytest.fixture(scope="module")
def acgp_fit(synthetic_bag: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("acgp")
    return fit_bag(
        synthetic_bag, out, model="acgp", overrides=QUICK, max_samples=500, progress=False
    )


def test_acgp_fit_writes_every_product_and_a_report(acgp_fit) -> None:
    assert acgp_fit.snapshot is not None
    for path in acgp_fit.outputs:
        assert path.is_file() and path.stat().st_size > 0, path
    report = json.loads(acgp_fit.outputs.report.read_text())
    assert report["model"] == "acgp" and report["accepted"]
    assert report["samples_used"] == 500 <= report["samples_total"]
    assert 0 < report["M"] <= 500 and report["M_over_N"] == pytest.approx(report["M"] / 500)
    assert report["lower"] <= report["upper"]  # the bound gap: the data-sufficiency figure
    assert {"kernel", "kernel_variance", "lengthscale", "noise_variance"} <= set(
        report["hyperparameters"]
    )
    assert acgp_fit.snapshot.model == "acgp"
    assert acgp_fit.snapshot.num_support == report["M"]
    assert np.isfinite(acgp_fit.snapshot.mean).all()
    grids = np.load(acgp_fit.outputs.grids)
    assert grids["mean"].shape == acgp_fit.snapshot.grid.shape


def test_fitted_map_file_holds_the_model_and_predicts_as_fitted(acgp_fit) -> None:
    from gp_mapper.engine import model_from_state

    data = load_map(acgp_fit.outputs.state)
    model = model_from_state(data.engine_state, device="cpu", expected="acgp")
    Xs = torch.tensor([[1.0, 1.0], [3.0, 2.0]], dtype=torch.float64)
    mean, var = model.predict(Xs)
    assert torch.isfinite(mean).all() and (var >= 0).all()
    assert data.config["model"] == "acgp"


def test_theta_yaml_round_trips_through_the_params_file_reader(acgp_fit) -> None:
    config = config_from_params_file(acgp_fit.outputs.theta)
    theta = acgp_fit.report["hyperparameters"]
    assert config.engine.kernel == theta["kernel"]
    assert config.engine.kernel_variance == pytest.approx(theta["kernel_variance"])
    assert config.engine.noise_variance == pytest.approx(theta["noise_variance"])
    assert config.engine.model == "vips"  # the node streams with the fitted θ


@pytest.mark.ros
def test_theta_yaml_is_accepted_by_the_node(acgp_fit) -> None:
    rclpy = pytest.importorskip("rclpy", reason="the node's parameter check needs rclpy")
    from rclpy.context import Context
    from rclpy.node import Node
    from rclpy.parameter import Parameter, parameter_dict_from_yaml_file

    from gp_mapper.ros.parameters import declare_parameters, read_config

    # As the node reads --params-file: the `/**` section applies to it.
    messages = parameter_dict_from_yaml_file(str(acgp_fit.outputs.theta), use_wildcard=True)
    overrides = [Parameter.from_parameter_msg(m) for m in messages.values()]
    context = Context()
    rclpy.init(context=context, args=[])
    node = Node("gp_mapper", context=context, parameter_overrides=overrides)
    try:
        declare_parameters(node)  # raises on a wrong type (5 for a float) or a bad range
        config = read_config(node)
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    theta = acgp_fit.report["hyperparameters"]
    assert config.engine.lengthscale == pytest.approx(theta["lengthscale"])
    assert config.engine.constant_variance == pytest.approx(theta["constant_variance"])


def test_theta_yaml_keeps_values_inside_the_nodes_ranges() -> None:
    fitted = {"kernel": "se", "kernel_variance": 5e7, "lengthscale": [0.5, 2.0]}
    text = theta_yaml({**fitted, "constant_variance": 0.0, "noise_variance": 1e-9})
    assert "kernel_variance: 1000000.0  # fitted 5e+07, clipped" in text
    assert "lengthscale: 1.0  # geometric mean" in text
    assert "noise_variance: 1e-06" in text


def test_a_map_of_another_model_is_refused_and_the_current_map_kept(
    acgp_fit, synthetic_bag: Path, tmp_path: Path
) -> None:
    streamed = replay_bag(synthetic_bag, tmp_path / "vips", overrides=FAST, progress=False)
    assert streamed.snapshot is not None
    with MappingPipeline(MapperConfig.from_dict(FAST), background=False) as pipeline:
        pipeline.load(streamed.outputs.state)
        before = pipeline.latest()
        with pytest.raises(MapFileError, match="holds an acgp model; this mapper runs vips"):
            pipeline.load(acgp_fit.outputs.state)
        assert pipeline.latest() is before
        assert pipeline.diagnostics()["model"] == "vips"


def test_exact_and_vips_fits(synthetic_bag: Path, tmp_path: Path) -> None:
    exact = fit_bag(
        synthetic_bag, tmp_path / "exact", model="exact", overrides=QUICK, max_samples=300,
        progress=False,
    )  # fmt: skip
    assert exact.snapshot is not None and exact.report["M"] == 300
    vips = fit_bag(synthetic_bag, tmp_path / "vips", model="vips", overrides=FAST, progress=False)
    assert vips.snapshot is not None and vips.outputs.theta.is_file()
    assert 0 < vips.report["M"] < vips.report["samples_used"]
    tiled = fit_bag(
        synthetic_bag, tmp_path / "tiled", model="vips", overrides={**FAST, "tile_size": 8.0},
        workers=0, progress=False,
    )  # fmt: skip
    # One summary for every route: the same fields, the report what the file holds, and θ
    # as the node's parameter file (the streaming route's from the pipeline, not the file).
    for result, route in ((exact, "batch"), (vips, "streaming"), (tiled, "tiled")):
        summary = result.summary
        assert summary.route == route and summary.accepted and summary.support > 0
        assert summary.samples_used > 0 and summary.hyperparameters
        assert json.loads(result.outputs.report.read_text()) == json.loads(
            json.dumps(result.report, default=str)
        )
        assert result.report["route"] == route and result.report["M"] == summary.support
        theta = yaml.safe_load(result.outputs.theta.read_text())
        assert theta == yaml.safe_load(theta_yaml(dict(summary.hyperparameters)))
        text = result.text()
        assert f"M = {summary.support}" in text and str(result.outputs.state) in text


def test_a_potential_fit_streams_the_field_vector(synthetic_bag: Path, tmp_path: Path) -> None:
    # The model of the field vector implies target: vector; it streams as vips does.
    result = fit_bag(
        synthetic_bag, tmp_path / "potential", model="potential", overrides=FAST, progress=False
    )
    assert result.snapshot is not None and result.snapshot.is_vector
    assert result.report["model"] == "potential" and result.report["accepted"]
    assert result.outputs.png.is_file() and result.outputs.theta.is_file()
    data = load_map(result.outputs.state, target="vector", expected_model="potential")
    assert data.config["target"] == "vector" and data.config["model"] == "potential"
    with pytest.raises(ConfigError, match=r"'potential'.*target: vector.*'norm'"):
        fit_bag(
            synthetic_bag, tmp_path / "norm", model="potential",
            overrides={**FAST, "target": "norm"}, progress=False,
        )  # fmt: skip


def test_cli_errors_exit_2(synthetic_bag: Path, tmp_path: Path, capsys) -> None:
    assert cli_main(["fit", str(tmp_path / "missing.mcap"), "--out", str(tmp_path)]) == 2
    assert cli_main(["fit", str(synthetic_bag), "--out", str(tmp_path), "--set", "nope=1"]) == 2
    assert "unknown parameter(s): nope" in capsys.readouterr().err
    args = ["fit", str(synthetic_bag), "--out", str(tmp_path), "--set", "acgp.rel_tol=2.0"]
    assert cli_main(args) == 2
    assert "acgp.rel_tol must be in [0, 1]" in capsys.readouterr().err


def test_a_fit_too_large_for_memory_says_how_to_subsample(
    synthetic_bag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gp_mapper.mapping import batch_fit as fit_module
    from gp_mapper.mapping.errors import ConfigError

    monkeypatch.setattr(fit_module, "available_memory_bytes", lambda: 2_000_000)
    with pytest.raises(ConfigError, match="--max-samples"):
        fit_bag(synthetic_bag, tmp_path, model="exact", progress=False)


def test_the_memory_check_reads_the_dense_points_from_the_model_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gp_mapper.engine import EngineSpec, model_entry, model_names
    from gp_mapper.mapping import batch_fit as fit_module
    from gp_mapper.mapping.errors import ConfigError

    monkeypatch.setattr(fit_module, "available_memory_bytes", lambda: 8.0 * 1000**2 / 0.5)
    n = 2000  # a 2000² matrix: twice what the share of this memory allows
    for name in model_names("batch"):
        spec = EngineSpec(model=name)
        if model_entry(name).dense_points is None:
            fit_module.check_memory(spec, n, n)  # no dense matrix: no refusal
        else:
            with pytest.raises(ConfigError, match=f"the {name} model on {n} samples"):
                fit_module.check_memory(spec, n, n)
    capped = EngineSpec(model="acgp", acgp_max_points=500)  # its factor stops at the cap
    fit_module.check_memory(capped, n, n)


def test_a_fit_estimated_past_its_budget_is_refused_with_a_sample_count_that_fits(
    synthetic_bag: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gp_mapper.engine import EngineSpec, cost, model_entry, model_names
    from gp_mapper.mapping import batch_fit as fit_module

    monkeypatch.setattr(cost, "measured_flop_rate", lambda: 3.0e10)  # one rate for every call

    for name in model_names("batch"):  # every batch model says what a fit costs
        cost = model_entry(name).fit_cost
        assert cost is not None, name
        spec = EngineSpec(model=name)
        assert 0 < cost(spec, 1000).flops < cost(spec, 4000).flops  # more samples, more work
    spec = EngineSpec(model="exact")
    with pytest.raises(ConfigError, match=r"--max-samples (\d+) fits the budget") as refused:
        fit_module.check_time(spec, 20_000, 30.0)
    fits = int(refused.value.args[0].split("--max-samples ")[1].split()[0])
    estimate = fit_module.fit_estimate(spec, fits)
    assert 0 < fits < 20_000 and estimate is not None and estimate.seconds <= 30.0 * 60.0
    assert fit_module.check_time(spec, 20_000, 0.0) is not None  # no budget: only the estimate
    # The command line: the estimate refuses before any fit, and says so.
    args = ["fit", str(synthetic_bag), "--model", "exact", "--out", str(tmp_path / "x"),
            "--max-minutes", "0.0001"]  # fmt: skip
    assert cli_main(args) == 2
    assert "more than --max-minutes 0.0001" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_an_exact_fit_reports_progress_at_every_evaluation(synthetic_bag: Path) -> None:
    from gp_mapper.engine import EngineSpec, build_model

    X = np.random.default_rng(0).uniform(0.0, 3.0, (200, 2))
    y = np.sin(X[:, 0]) + 0.1 * np.random.default_rng(1).standard_normal(200)
    model = build_model(EngineSpec(model="exact", fit_iterations=5, device="cpu"), 2)
    seen: list[tuple[float, str]] = []
    assert model.fit(X, y, progress=lambda f, s: seen.append((f, s))).accepted
    evaluations = [f for f, s in seen if s.startswith("evaluation")]
    assert len(evaluations) >= 3 and evaluations == sorted(evaluations)
    assert all(0.0 < f < 1.0 for f in evaluations) and seen[-1][0] == 1.0


def test_a_step_longer_than_the_log_period_still_prints_lines(
    synthetic_bag: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that reports once an epoch (CaGP-CG: ~35 s on 20 000 readings) or once an
    evaluation (the GAM: up to 11 s) still shows a line every period while the step runs."""
    import time as time_module

    from gp_mapper.commands import progress as progress_module
    from gp_mapper.engine.exact.gp import ExactGP

    monkeypatch.setattr(progress_module, "LOG_PERIOD_S", 0.05)
    fit = ExactGP.fit

    def slow_fit(self, *args, **kwargs):
        time_module.sleep(0.5)  # one step with no report
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(ExactGP, "fit", slow_fit)
    fit_bag(
        synthetic_bag, tmp_path / "exact", model="exact",
        overrides={"fit_iterations": 2}, max_samples=200, progress=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "fit exact:" in err and "this step running for" in err


def test_fit_on_a_real_slice_predicts_held_out_readings(magnetic_dir: Path, tmp_path: Path) -> None:
    bag, X_held, y_held = aalto_slice_bag(magnetic_dir, tmp_path)
    result = fit_bag(
        bag, tmp_path / "out", model="acgp", overrides=QUICK, max_samples=1200, progress=False
    )
    assert result.snapshot is not None
    for path in result.outputs:
        assert path.is_file() and path.stat().st_size > 0, path
    from gp_mapper.engine import model_from_state

    model = model_from_state(load_map(result.outputs.state).engine_state, "cpu")
    mean, _ = model.predict(torch.as_tensor(X_held))
    rmse = float(np.sqrt(np.mean((mean.numpy() - y_held) ** 2)))
    assert rmse < 0.5 * float(np.std(y_held)), rmse


# SOLVE-GP small enough for CI: 16 + 16 inducing points, a few epochs.
SOLVE_QUICK = {"solvegp.inducing": 16, "solvegp.orthogonal": 16, "solvegp.epochs": 3,
               "solvegp.batch_size": 128, "fit_iterations": 1}  # fmt: skip


def test_a_solvegp_fit_is_continued_live_by_the_stream(synthetic_bag: Path, tmp_path: Path) -> None:
    from gp_mapper.engine import model_from_state
    from gp_mapper.mapping.batch_fit import FITTED_STATE

    fitted = fit_bag(
        synthetic_bag, tmp_path / "solve", model="solvegp", overrides=SOLVE_QUICK,
        max_samples=600, progress=False,
    )  # fmt: skip
    assert fitted.snapshot is not None and fitted.report["M"] == 32
    assert {"coarse_mean", "detail_mean"} <= set(fitted.snapshot.layers)
    assert {"coarse_mean", "detail_mean"} <= set(np.load(fitted.outputs.grids).files)
    # map_state.npz is the streaming model carrying the fit on; the fit keeps its own file.
    stream = model_from_state(load_map(fitted.outputs.state).engine_state, "cpu")
    solve = model_from_state(
        load_map(fitted.outputs.state.with_name(FITTED_STATE)).engine_state, "cpu"
    )
    assert (stream.name, solve.name) == ("vips", "solvegp")
    Xs = torch.tensor([[1.0, 1.0], [4.0, 2.0], [6.5, 0.5]], dtype=torch.float64)
    (m1, v1), (m2, v2) = stream.predict(Xs), solve.predict(Xs)
    prior = float(solve.posterior.prior_variance(Xs).max())
    torch.testing.assert_close(m1, m2, rtol=0.0, atol=1e-6 * prior)
    torch.testing.assert_close(v1, v2, rtol=0.0, atol=1e-6 * prior)
    resumed = replay_bag(
        synthetic_bag, tmp_path / "resumed", resume=fitted.outputs.state, overrides=FAST,
        progress=False,
    )  # fmt: skip
    assert resumed.snapshot is not None
    assert resumed.diagnostics["updates"] > 0


def test_the_continued_stream_runs_under_the_nodes_streaming_settings(
    synthetic_bag: Path, tmp_path: Path
) -> None:
    from gp_mapper.engine import model_from_state

    settings = {"vips.local_fit_inducing": 24, "vips.fit_max_seconds": 7.5,
                "vips.hyperprior_scale": 0.25, "vips.outlier_z": 6.0, "vips.delta": 0.05,
                "vips.max_inducing": 900, "vips.pass_noise_variance": 0.01}  # fmt: skip
    fitted = fit_bag(
        synthetic_bag, tmp_path / "solve", model="solvegp", overrides={**SOLVE_QUICK, **settings},
        max_samples=300, progress=False,
    )  # fmt: skip
    assert fitted.report["streaming_continuation"] == "vips"
    stream = model_from_state(load_map(fitted.outputs.state).engine_state, "cpu")
    assert stream.local_fit_inducing == 24 and stream.fit_max_seconds == 7.5
    assert stream.hyperprior_scale == 0.25 and stream.outlier_z == 6.0
    assert stream.max_inducing == 900
    assert stream.fit_iterations == 0  # θ is the whole log's fit: the stream keeps it
    assert stream.selector.to_spec() == {"type": "vips", "delta": 0.05}
    # The fit's noise is the whole error: the stream fits it less the pass noise.
    from gp_mapper.mapping.batch_fit import FITTED_STATE

    solve = model_from_state(
        load_map(fitted.outputs.state.with_name(FITTED_STATE)).engine_state, "cpu"
    )
    assert stream.pass_noise_variance == 0.01
    assert stream.noise_variance == pytest.approx(solve.noise_variance, rel=1e-9)


def test_a_cagp_fit_maps_the_computational_share_of_its_variance(
    synthetic_bag: Path, tmp_path: Path
) -> None:
    fitted = fit_bag(
        synthetic_bag, tmp_path / "cagp", model="cagp",
        overrides={"cagp.actions": 16, "cagp.epochs": 3}, max_samples=400, progress=False,
    )  # fmt: skip
    assert fitted.snapshot is not None and fitted.outputs.theta.is_file()
    with np.load(fitted.outputs.grids) as grids:
        share, total = grids["computational_variance"], grids["variance"]
        assert np.all(share >= 0.0) and np.all(share <= total + 1e-9)
        # 16 actions for 400 samples: the approximation's own error is a real share.
        assert float(share.max()) > 0.0


def test_a_fit_the_stream_cannot_continue_still_saves_its_map(
    synthetic_bag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gp_mapper.engine import NumericalError, registry

    entry = registry.model_entry("solvegp")

    def fails(model: object, spec: object) -> dict:
        raise NumericalError("precision of size 16 is not positive definite")

    monkeypatch.setattr(registry, "model_entry", lambda name: entry._replace(to_streaming=fails))
    from gp_mapper.mapping import batch_fit as fit_module

    monkeypatch.setattr(fit_module, "model_entry", registry.model_entry)
    fitted = fit_bag(
        synthetic_bag, tmp_path / "solve", model="solvegp", overrides=SOLVE_QUICK,
        max_samples=300, progress=False,
    )  # fmt: skip
    assert fitted.report["streaming_continuation"].startswith("failed: precision")
    assert load_map(fitted.outputs.state).engine_state["model"] == "solvegp"


# Two epochs of Adam on 32 + 32 points: the unwhitened q leaves some whitened directions
# wider than the prior (S̃ above I), which the stream cannot take as pseudo-data.
SOLVE_TWO_EPOCHS = {"solvegp.inducing": 32, "solvegp.orthogonal": 32, "solvegp.epochs": 2}


def _wider_than_prior(fitted_state: Path) -> float:
    """The largest eigenvalue of the fit's whitened q covariance S̃ (1 is the prior's)."""
    from gp_mapper.engine import model_from_state

    q = model_from_state(load_map(fitted_state).engine_state, "cpu").posterior.q
    S = torch.block_diag(q.L_u @ q.L_u.mT, q.L_v @ q.L_v.mT)
    return float(torch.linalg.eigvalsh(S).max())


def test_a_short_solvegp_fit_hands_the_stream_valid_pseudo_data(
    synthetic_bag: Path, tmp_path: Path
) -> None:
    """The carried precision P (the Bui pseudo-observations') is positive semi-definite even
    where SGD left q wider than the prior; an indefinite P made the online bound unbounded in θ."""
    from gp_mapper.mapping.batch_fit import FITTED_STATE

    fitted = fit_bag(
        synthetic_bag, tmp_path / "solve", model="solvegp", overrides=SOLVE_TWO_EPOCHS,
        progress=False,
    )  # fmt: skip
    assert fitted.report["streaming_continuation"] == "vips"
    assert _wider_than_prior(fitted.outputs.state.with_name(FITTED_STATE)) > 1.0
    P = torch.as_tensor(load_map(fitted.outputs.state).engine_state["carried.P"])
    assert float(torch.linalg.eigvalsh(P).min()) > -1e-8


def test_replay_resume_of_a_short_solvegp_fit_on_a_real_slice(
    magnetic_dir: Path, tmp_path: Path
) -> None:
    """``replay --resume`` continues a two-epoch SOLVE-GP map of a real slice: every update is
    accepted and the map still predicts the held-out readings (it ran to 10⁶ µT before)."""
    from gp_mapper.engine import model_from_state

    bag, X_held, y_held = aalto_slice_bag(magnetic_dir, tmp_path)
    fitted = fit_bag(
        bag, tmp_path / "solve", model="solvegp", overrides=SOLVE_TWO_EPOCHS, progress=False
    )
    assert fitted.report["streaming_continuation"] == "vips"
    resumed = replay_bag(
        bag, tmp_path / "resumed", resume=fitted.outputs.state, overrides=FAST, progress=False
    )
    assert resumed.diagnostics["failed_updates"] == 0
    assert resumed.diagnostics["health"] == "OK"
    model = model_from_state(load_map(resumed.outputs.state).engine_state, "cpu")
    mean, _ = model.predict(torch.as_tensor(X_held))
    rmse = float(np.sqrt(np.mean((mean.numpy() - y_held) ** 2)))
    assert rmse < 0.5 * float(np.std(y_held)), rmse


@pytest.mark.parametrize("name", ["vips", "potential", "gam_stream", "exact", "acgp"])
def test_theta_yaml_gives_the_node_the_fitted_theta_exactly(
    name: str, synthetic_bag: Path, tmp_path: Path
) -> None:
    # Whatever the node's defaults add (its pass noise), the engine a node builds from the
    # file holds the fit's θ: a streaming model's own split, a batch model's noise all white.
    from gp_mapper.engine import build_model
    from gp_mapper.engine.registry import model_kind

    streaming = model_kind(name) == "streaming"
    overrides = FAST if streaming else QUICK
    fitted = fit_bag(synthetic_bag, tmp_path / name, model=name, overrides=overrides,
                     max_samples=0 if streaming else 300, progress=False)  # fmt: skip
    theta = fitted.report["hyperparameters"]
    node = {"model": name} if streaming else {}  # a batch fit goes on live as vips
    if streaming:  # the node runs the fit's model on the fit's target
        node["target"] = load_map(fitted.outputs.state).config["target"]
    config = config_from_params_file(fitted.outputs.theta, **node)
    engine = build_model(config.engine, input_dim=config.input_dims).hyperparameters()
    for key in ("kernel_variance", "constant_variance", "noise_variance", "lengthscale"):
        assert engine[key] == pytest.approx(theta[key], rel=1e-9), key
    expected_pass = theta.get("pass_noise_variance", 0.0)
    assert config.engine.get("vips.pass_noise_variance") == pytest.approx(expected_pass, rel=1e-12)
