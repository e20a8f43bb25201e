"""`gp-mapper fit` of a tiled map from several bags: serial and on Ray, the same map; the files a
user gets; several bags without tiles refused with the way out."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.cli import main as cli_main
from gp_mapper.commands.fit import fit_bag
from gp_mapper.io import write_synthetic_bag
from gp_mapper.mapping.map_file import load_map, read_model

TILED = {"tile_size": 4.0, "tile_overlap": 1.0, "fit_iterations": 3, "batch_size": 200}


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("bags")
    out = []
    for seed in (0, 1):  # two robots in the same room
        bag = root / f"run{seed}"
        write_synthetic_bag(bag, seed=seed, duration_s=30.0)
        out.append(bag)
    return out


def test_several_bags_make_one_tiled_map(bags: list[Path], tmp_path: Path) -> None:
    serial = fit_bag(bags, tmp_path / "serial", model="vips", overrides=TILED, workers=0,
                     progress=False)  # fmt: skip
    report = serial.report
    assert report["tiles"] >= 3 and report["bag"] == [str(b) for b in bags]
    for path in serial.outputs:
        assert path.is_file(), path
    model = read_model(serial.outputs.state, device="cpu")
    assert len(model.tiles) == report["tiles"]
    assert load_map(serial.outputs.state).num_samples == report["samples_used"]
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: the Ray half of this test needs it")
    on_ray = fit_bag(bags, tmp_path / "ray", model="vips", overrides=TILED, workers=2,
                     progress=False)  # fmt: skip
    again = read_model(on_ray.outputs.state, device="cpu")
    for key, tile in model.tiles.items():
        a, b = tile.state_dict(), again.tiles[key].state_dict()
        assert all(np.array_equal(a[k], b[k]) for k in a)
    np.testing.assert_array_equal(serial.snapshot.mean, on_ray.snapshot.mean)


def test_several_bags_without_tiles_are_refused(bags: list[Path], tmp_path: Path, capsys) -> None:
    args = ["fit", *map(str, bags), "--model", "vips", "--out", str(tmp_path)]
    assert cli_main([*args, "--set", "tile_size=0"]) == 2
    assert "tile_size" in capsys.readouterr().err


def test_several_bags_make_one_tiled_map_of_a_batch_model(bags: list[Path], tmp_path: Path) -> None:
    overrides = {**TILED, "min_spacing": 0.3}  # a few hundred readings: exact GPs per tile
    fitted = fit_bag(bags, tmp_path / "exact", model="exact", overrides=overrides, workers=0,
                     progress=False)  # fmt: skip
    assert fitted.report["tiles"] >= 2 and fitted.snapshot is not None
    model = read_model(fitted.outputs.state, device="cpu")
    assert model.kind == "batch" and model.name == "exact" and len(model.tiles) >= 2
    assert np.isfinite(fitted.snapshot.mean).all() and fitted.outputs.theta.is_file()
