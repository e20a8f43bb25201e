"""gp-mapper fit --model gam (and gam_stream) with nuisance components: a map cleaned of a
heading bias."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.cli import main as cli_main
from gp_mapper.commands.fit import fit_bag
from gp_mapper.commands.replay import replay_bag
from gp_mapper.engine import model_from_state
from gp_mapper.engine.tiled import TiledModel
from gp_mapper.io.exports import nuisance_caption
from gp_mapper.io.synthetic import heading_bias
from gp_mapper.mapping.map_file import load_map

BIAS_UT = 3.0
QUICK = {"fit_iterations": 5, "gam.iterations": 15, "gam.map_inducing": 60,
         "gam.drift_inducing": 8, "lengthscale": 0.8}  # fmt: skip


@pytest.fixture(scope="module")
def biased_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bag = tmp_path_factory.mktemp("gam") / "biased.mcap"
    code = cli_main(["convert", "synthetic", str(bag), "--duration", "30", "--rate", "20",
                     "--heading-bias", str(BIAS_UT)])  # fmt: skip
    assert code == 0
    return bag


def test_fit_with_nuisance_components_reports_them_and_maps_offset_plus_map(
    biased_bag: Path, tmp_path: Path
) -> None:
    overrides = {**QUICK, "gam.components": "offset+map+heading+run+drift"}
    result = fit_bag(
        biased_bag, tmp_path, model="gam", overrides=overrides, max_samples=300, progress=False
    )
    assert result.snapshot is not None
    report = json.loads(result.outputs.report.read_text())
    fit = report["fit"]
    assert fit["components"] == "offset,map,heading,run,drift"
    heading = fit["heading_curve"]
    assert len(heading["input"]) == len(heading["mean"]) == len(heading["sd"]) == 36
    assert fit["run_offsets"]["input"] == [0.0]  # one run: no gap of gam_run_gap
    assert len(fit["drift"]["mean"]) == 64
    assert report["hyperparameters"]["kernel"] == "matern52"
    # The map products are the map layer: 2-D support, finite values; theta.yaml the node's.
    assert result.snapshot.support_m.shape[1] == 2
    assert np.isfinite(result.snapshot.mean).all()
    assert "heading" not in result.outputs.theta.read_text()
    model = model_from_state(load_map(result.outputs.state).engine_state, device="cpu")
    assert model.map_layer == ("offset", "map")
    assert model.auxiliary_inputs == ("yaw", "run", "time")


def test_an_unknown_component_is_a_clear_error(biased_bag: Path, tmp_path: Path, capsys) -> None:
    code = cli_main(["fit", str(biased_bag), "--model", "gam", "--out", str(tmp_path),
                     "--set", "gam.components=offset+map+compass"])  # fmt: skip
    assert code == 2
    assert "unknown component(s) 'compass'" in capsys.readouterr().err


def test_the_streamed_additive_map_reports_the_heading_curve_and_resumes(
    biased_bag: Path, tmp_path: Path
) -> None:
    # The heading curve explains the error the node's default pass noise stands in for.
    overrides = {"fit_iterations": 5, "lengthscale": 0.8, "batch_size": 200,
                 "gam.components": "offset+map+heading+run",
                 "vips.pass_noise_variance": 0.0}  # fmt: skip
    result = fit_bag(
        biased_bag, tmp_path / "fit", model="gam_stream", overrides=overrides, progress=False
    )
    assert result.snapshot is not None and result.snapshot.support_m.shape[1] == 2
    report = json.loads(result.outputs.report.read_text())
    assert report["model"] == "gam_stream" and report["updates"] >= 3
    nuisance = report["nuisance"]
    assert len(nuisance["heading_curve_mean"]) == len(nuisance["heading_curve_sd"]) == 36
    truth = heading_bias(np.array(nuisance["heading_curve_yaw"]), BIAS_UT)
    assert np.sqrt(np.mean((np.array(nuisance["heading_curve_mean"]) - truth) ** 2)) < 0.5
    assert nuisance["run"] == 0.0  # one run: no gap of gam_run_gap
    # The last update's nuisance estimates are the flat values /diagnostics shows.
    assert {"heading_B", "run_offset", "run_offset_sd"} <= set(report["last_update"])
    assert "heading" not in result.outputs.theta.read_text()
    caption = nuisance_caption(result.snapshot.report)  # under the PNG's title
    assert "heading B sin ψ" in caption and "run 0 offset" in caption
    assert nuisance_caption({"kernel_variance": 1.0}) == ""
    # The saved map carries the clock: a replay resumes it and goes on counting.
    resumed = replay_bag(
        biased_bag,
        tmp_path / "resumed",
        resume=result.outputs.state,
        overrides={**overrides, "model": "gam_stream"},
        progress=False,
    )
    assert resumed.snapshot is not None
    model = model_from_state(load_map(resumed.outputs.state).engine_state, device="cpu")
    assert model.name == "gam_stream" and isinstance(model, TiledModel)  # the default tiles
    assert all(tile.clock.run == 1 for tile in model.tiles.values())  # the bag again: a new run
