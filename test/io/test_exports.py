"""Map exports: PNG, Nav2 map_server YAML + PGM, npz; plain arrays and snapshot wrappers."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import yaml

from gp_mapper.io import (
    ExportError,
    write_grids_npz,
    write_grids_npz_arrays,
    write_nav2_map,
    write_nav2_map_arrays,
    write_png,
    write_png_arrays,
)
from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.occupancy import scale_to_occupancy
from gp_mapper.mapping.snapshot import MapSnapshot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Grids(NamedTuple):
    x: np.ndarray  # [W]
    y: np.ndarray  # [H]
    mean: np.ndarray  # [H, W]
    variance: np.ndarray  # [H, W]


@pytest.fixture
def grids() -> Grids:
    """A 30 x 40 grid at 0.1 m whose mean rises with y and has a hot spot at row 22, column 7."""
    res = 0.1
    x = -1.0 + res / 2 + res * np.arange(40)
    y = 2.0 + res / 2 + res * np.arange(30)
    mean = np.tile(40.0 + 10.0 * (y - y[0]), (40, 1)).T
    mean[22, 7] = 120.0
    variance = 0.5 + 0.01 * np.add.outer(np.arange(30), np.arange(40))
    return Grids(x, y, mean, variance)


def _read_pgm(path: Path) -> np.ndarray:
    data = path.read_bytes()
    magic, size, maxval, rest = data.split(b"\n", 3)
    width, height = (int(v) for v in size.split())
    assert (magic, maxval) == (b"P5", b"255")
    assert len(rest) == width * height
    return np.frombuffer(rest, dtype=np.uint8).reshape(height, width)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_is_a_valid_image_of_sensible_size(tmp_path: Path, grids: Grids) -> None:
    rng = np.random.default_rng(0)
    out = write_png_arrays(
        tmp_path / "figs" / "map.png",
        grids.x,
        grids.y,
        grids.mean,
        grids.variance,
        inducing_m=rng.uniform([-1, 2], [3, 5], (25, 2)),
        trajectory_m=np.column_stack([np.linspace(-1, 3, 50), np.linspace(2, 5, 50)]),
        num_samples=1234,
    )
    width, height = _png_size(out)
    assert 600 <= width <= 3000 and 300 <= height <= 2000
    assert width > height  # two panels side by side
    assert out.stat().st_size > 20_000  # real content, not an empty canvas
    assert [p.name for p in out.parent.iterdir()] == ["map.png"]  # no temporary left


def test_png_accepts_no_overlays_and_masks(tmp_path: Path, grids: Grids) -> None:
    unknown = np.zeros(grids.mean.shape, bool)
    unknown[:5] = True
    out = write_png_arrays(
        tmp_path / "bare.png", grids.x, grids.y, grids.mean, grids.variance, unknown=unknown
    )
    assert _png_size(out)[0] > 0


def test_pgm_header_size_and_orientation(tmp_path: Path, grids: Grids) -> None:
    files = write_nav2_map_arrays(tmp_path / "map.yaml", grids.x, grids.y, grids.mean)
    assert files.pgm_path == tmp_path / "map.pgm"
    image = _read_pgm(files.pgm_path)
    assert image.shape == (30, 40)  # H rows, W columns
    # the mean rises with y: the top image row (max y) is the darkest, the bottom the lightest
    row_means = image.astype(float).mean(axis=1)
    assert np.all(np.diff(row_means[np.arange(30) != 30 - 1 - 22]) >= 0)
    # the hot spot at grid row 22, column 7 is black at image row H - 1 - 22
    assert image[30 - 1 - 22, 7] == image.min()
    assert (files.lo_ut, files.hi_ut) == (grids.mean.min(), 120.0)


def test_map_server_scale_mode_loads_the_occupancy_levels(tmp_path: Path, grids: Grids) -> None:
    files = write_nav2_map_arrays(tmp_path / "map.yaml", grids.x, grids.y, grids.mean)
    meta = yaml.safe_load(files.yaml_path.read_text())
    image = _read_pgm(tmp_path / meta["image"])
    # nav2_map_server map_io.cpp, scale mode, negate 0, a grey image (no alpha)
    occ = 1.0 - image / 255.0
    loaded = np.rint(
        (occ - meta["free_thresh"]) / (meta["occupied_thresh"] - meta["free_thresh"]) * 100.0
    )
    assert not (occ > meta["occupied_thresh"]).any() and not (occ < meta["free_thresh"]).any()
    grid_rows_up = loaded[::-1]  # map_server fills data[width * (height - y - 1) + x]
    # the same levels as the node's ~/mean OccupancyGrid
    expected, _, _ = scale_to_occupancy(grids.mean, np.zeros(grids.mean.shape, bool))
    np.testing.assert_array_equal(grid_rows_up, expected)
    assert expected.min() == 1 and expected.max() == 98


def test_yaml_has_origin_resolution_and_mode(tmp_path: Path, grids: Grids) -> None:
    files = write_nav2_map_arrays(tmp_path / "map.yaml", grids.x, grids.y, grids.mean)
    meta = yaml.safe_load(files.yaml_path.read_text())
    assert meta["image"] == "map.pgm"
    assert meta["resolution"] == pytest.approx(0.1, rel=1e-12)
    np.testing.assert_allclose(meta["origin"], [-1.0, 2.0, 0.0], atol=1e-12)
    assert (meta["negate"], meta["mode"]) == (0, "scale")
    assert 0.0 <= meta["free_thresh"] < meta["occupied_thresh"] <= 1.0


def test_range_clips_and_non_finite_cells(tmp_path: Path, grids: Grids) -> None:
    mean = grids.mean.copy()
    mean[0, 0] = np.nan
    files = write_nav2_map_arrays(
        tmp_path / "map.yaml", grids.x, grids.y, mean, lo_ut=45.0, hi_ut=60.0
    )
    assert (files.lo_ut, files.hi_ut) == (45.0, 60.0)
    image = _read_pgm(files.pgm_path)[::-1]  # rows up again
    light, dark = round(255 * 99 / 100), round(255 * 2 / 100)  # levels 1 and 98
    assert image[0, 0] == light  # NaN: lowest level
    assert (image[mean <= 45.0] == light).all()  # clipped below
    assert (image[mean >= 60.0] == dark).all()  # clipped above
    assert "occupancy 1 = 45.0 µT, 98 = 60.0 µT" in files.yaml_path.read_text()


def test_npz_round_trip(tmp_path: Path, grids: Grids) -> None:
    out = write_grids_npz_arrays(tmp_path / "g.npz", grids.x, grids.y, grids.mean, grids.variance)
    with np.load(out, allow_pickle=False) as data:
        assert sorted(data.files) == ["mean", "variance", "x", "y"]
        for name in ("x", "y", "mean", "variance"):
            np.testing.assert_array_equal(data[name], getattr(grids, name))
            assert data[name].dtype == np.float64


def test_rewrites_replace_the_file_atomically(tmp_path: Path, grids: Grids) -> None:
    path = tmp_path / "g.npz"
    write_grids_npz_arrays(path, grids.x, grids.y, grids.mean, grids.variance)
    write_grids_npz_arrays(path, grids.x, grids.y, grids.mean + 1.0, grids.variance)
    with np.load(path, allow_pickle=False) as data:
        np.testing.assert_array_equal(data["mean"], grids.mean + 1.0)
    assert [p.name for p in tmp_path.iterdir()] == ["g.npz"]


def test_shape_and_spacing_errors(tmp_path: Path, grids: Grids) -> None:
    with pytest.raises(ExportError, match=r"mean_ut must be \[H, W\] = \[30, 40\]"):
        write_grids_npz_arrays(tmp_path / "a.npz", grids.x, grids.y, grids.mean.T, grids.variance)
    uneven = grids.x.copy()
    uneven[-1] += 0.05
    with pytest.raises(ExportError, match="increase by the resolution"):
        write_nav2_map_arrays(tmp_path / "a.yaml", uneven, grids.y, grids.mean)
    with pytest.raises(ExportError, match="pass resolution_m"):
        write_nav2_map_arrays(tmp_path / "a.yaml", [0.05], [0.05], [[1.0]])
    with pytest.raises(ExportError, match="no finite value"):
        write_nav2_map_arrays(tmp_path / "a.yaml", grids.x, grids.y, np.full((30, 40), np.nan))
    assert list(tmp_path.iterdir()) == []


def test_snapshot_wrappers(tmp_path: Path, grids: Grids) -> None:
    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.1, shape=(30, 40))
    snapshot = MapSnapshot(
        seq=3,
        stamp_ns=1_700_000_000 * 10**9,
        grid=grid,
        mean=grids.mean,
        variance=grids.variance,
        prior_variance=np.full((30, 40), 2.0),
        support_m=np.array([[0.0, 3.0], [1.0, 4.0]]),
        trajectory_m=np.array([[0.0, 3.0], [0.5, 3.5], [1.0, 4.0]]),
        num_samples=500,
    )
    assert _png_size(write_png(tmp_path / "m.png", snapshot, unknown_ratio=0.9))[0] > 0
    files = write_nav2_map(tmp_path / "m.yaml", snapshot)
    meta = yaml.safe_load(files.yaml_path.read_text())
    np.testing.assert_allclose(meta["origin"], [-1.0, 2.0, 0.0], atol=1e-12)
    assert _read_pgm(files.pgm_path).shape == (30, 40)
    with np.load(write_grids_npz(tmp_path / "m.npz", snapshot), allow_pickle=False) as data:
        np.testing.assert_allclose(data["x"], grids.x, atol=1e-12)
        np.testing.assert_allclose(data["y"], grids.y, atol=1e-12)
        np.testing.assert_array_equal(data["mean"], grids.mean)


def test_extra_layers_go_into_the_npz_and_the_png(tmp_path: Path) -> None:
    x, y = np.arange(4) * 0.5, np.arange(3) * 0.5
    mean, variance = np.ones((3, 4)), np.full((3, 4), 0.25)
    layers = {"coarse_mean": np.zeros((3, 4)), "computational_variance": np.full((3, 4), 0.01)}
    path = write_grids_npz_arrays(tmp_path / "g.npz", x, y, mean, variance, layers=layers)
    with np.load(path, allow_pickle=False) as npz:
        assert set(npz.files) == {"x", "y", "mean", "variance", *layers}
        np.testing.assert_array_equal(
            npz["computational_variance"], layers["computational_variance"]
        )
    with pytest.raises(ExportError, match="clash"):
        write_grids_npz_arrays(tmp_path / "h.npz", x, y, mean, variance, layers={"mean": mean})
    png = write_png_arrays(tmp_path / "m.png", x, y, mean, variance, layers=layers)
    assert png.stat().st_size > 0


def test_a_vector_map_draws_four_columns_and_stores_its_components(
    tmp_path: Path, grids: Grids
) -> None:
    xx, yy = np.meshgrid(grids.x, grids.y)
    field = np.stack([15.0 * np.cos(xx), 15.0 * np.sin(yy), np.full_like(xx, -45.0)], axis=-1)
    field_var = np.stack([grids.variance] * 3, axis=-1) * [1.0, 2.0, 3.0]
    norm = np.linalg.norm(field, axis=-1)
    scalar = write_png_arrays(tmp_path / "s.png", grids.x, grids.y, norm, grids.variance)
    unknown = np.zeros(norm.shape, bool)
    unknown[:4] = True
    vector = write_png_arrays(
        tmp_path / "v.png", grids.x, grids.y, norm, grids.variance, unknown=unknown,
        field_mean_ut=field, field_variance_ut2=field_var,
    )  # fmt: skip
    (sw, sh), (vw, vh) = _png_size(scalar), _png_size(vector)
    assert vw == pytest.approx(2 * sw, rel=0.05) and vh == pytest.approx(2 * sh, rel=0.05)
    with pytest.raises(ExportError, match="come together"):
        write_png_arrays(tmp_path / "x.png", grids.x, grids.y, norm, norm, field_mean_ut=field)
    with pytest.raises(ExportError, match=r"\[H, W, 3\]"):
        write_png_arrays(
            tmp_path / "x.png", grids.x, grids.y, norm, norm,
            field_mean_ut=field[..., :2], field_variance_ut2=field_var,
        )  # fmt: skip
    snapshot = MapSnapshot(
        seq=1, stamp_ns=0, grid=GridSpec((-1.0, 2.0), 0.1, (30, 40)), mean=norm,
        variance=grids.variance, prior_variance=np.full((30, 40), 2.0),
        support_m=np.zeros((1, 2)), trajectory_m=np.zeros((0, 2)), model="potential",
        field_mean=field, field_variance=field_var,
    )  # fmt: skip
    assert _png_size(write_png(tmp_path / "m.png", snapshot, unknown_ratio=0.9)) == (vw, vh)
    with np.load(write_grids_npz(tmp_path / "m.npz", snapshot), allow_pickle=False) as data:
        np.testing.assert_array_equal(data["mean"], norm)
        for k, axis in enumerate("xyz"):
            np.testing.assert_array_equal(data[f"b{axis}"], field[..., k])
            np.testing.assert_array_equal(data[f"var_b{axis}"], field_var[..., k])


def test_the_heading_correction_is_drawn_from_either_models_report(tmp_path) -> None:
    from matplotlib.image import imread

    from gp_mapper.io.exports import heading_curve

    streamed = {"heading_B": 3.0, "heading_C": -1.8, "heading_D": 1.2, "heading_E": 0.9,
                "heading_sd_max": 0.1}  # fmt: skip
    degrees, curve, sd = heading_curve(streamed)
    # B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ: at 0° C + E, at 90° B − E.
    assert curve[0] == pytest.approx(-1.8 + 0.9) and curve[90] == pytest.approx(3.0 - 0.9)
    assert degrees[-1] == 360.0 and sd == 0.1
    offline = {"heading_curve": {"coefficients_BCDE": [3.0, -1.8, 1.2, 0.9], "sd": [0.2, 0.3]}}
    np.testing.assert_allclose(heading_curve(offline)[1], curve)
    assert heading_curve(offline)[2] == 0.3
    assert heading_curve({"kernel_variance": 1.0}) is None
    x, y = np.linspace(0.0, 2.0, 5), np.linspace(0.0, 1.0, 3)
    grid = np.ones((3, 5))
    plain = imread(write_png_arrays(tmp_path / "plain.png", x, y, grid, grid))
    with_curve = imread(
        write_png_arrays(tmp_path / "curve.png", x, y, grid, grid, nuisance=streamed)
    )
    assert with_curve.shape[0] > plain.shape[0]  # a second row of panels: the curve
