"""gp-mapper replay: real data beats the noise model, resume continues, bad bags are named."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.cli import main as cli_main
from gp_mapper.commands.replay import ReplayOutputs, replay_bag
from gp_mapper.io import load_aalto_sequence, write_synthetic_bag
from gp_mapper.io.bag_writer import BASE_EPOCH_NS, FieldStream, PoseStream, write_field_pose_bag
from gp_mapper.mapping import MapperConfig, MappingPipeline
from gp_mapper.mapping.map_file import load_map, read_model

# A short, fast engine for tests: few L-BFGS iterations, small windows.
FAST = {"fit_iterations": 10, "batch_size": 200, "vips.delta": 0.095}
SLICE_S = 60.0
HOLD_OUT_EVERY = 5


def aalto_slice_bag(magnetic_dir: Path, out: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """The first SLICE_S seconds of sequence 3 with every 5th reading held out of the bag."""
    seq = load_aalto_sequence(magnetic_dir, seq=3)
    keep = seq.time_s - seq.time_s[0] <= SLICE_S
    t, loc, mag = seq.time_s[keep], seq.loc_m[keep], seq.mag_ut[keep]
    held = np.zeros(t.size, dtype=bool)
    held[::HOLD_OUT_EVERY] = True
    stamps = BASE_EPOCH_NS + np.round((t - t[0]) * 1e9).astype(np.int64)
    position = np.column_stack([loc, np.zeros(t.size)])
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (t.size, 1))
    bag = out / "slice.mcap"
    write_field_pose_bag(
        bag,
        FieldStream(stamps[~held], mag[~held] * 1e-6, "imu_link", None),
        PoseStream(stamps, position, quat, "map"),
    )
    return bag, loc[held], np.linalg.norm(mag[held], axis=1)


def test_replay_of_real_slice_beats_the_noise_model(magnetic_dir: Path, tmp_path: Path) -> None:
    bag, X_held, y_held = aalto_slice_bag(magnetic_dir, tmp_path)
    result = replay_bag(bag, tmp_path / "out", overrides=FAST, progress=False)
    assert result.snapshot is not None
    for path in result.outputs:
        assert path.is_file() and path.stat().st_size > 0, path
    with MappingPipeline(MapperConfig(), background=False) as pipeline:
        pipeline.load(result.outputs.state)
    model = read_model(result.outputs.state, device="cpu")
    assert model.num_updates == result.diagnostics["updates"]
    mean, _ = model.predict(torch.as_tensor(X_held))
    rmse = float(np.sqrt(np.mean((mean.numpy() - y_held) ** 2)))
    noise_model_rmse = float(np.std(y_held))
    assert rmse < 0.5 * noise_model_rmse, (rmse, noise_model_rmse)


def test_resume_continues_from_a_saved_state(tmp_path: Path) -> None:
    first, second = tmp_path / "a.mcap", tmp_path / "b.mcap"
    write_synthetic_bag(first, seed=3, duration_s=20.0)
    write_synthetic_bag(second, seed=3, duration_s=40.0)
    a = replay_bag(first, tmp_path / "a", overrides=FAST, progress=False)
    b = replay_bag(second, tmp_path / "b", resume=a.outputs.state, overrides=FAST, progress=False)
    assert b.snapshot is not None and a.snapshot is not None
    assert b.diagnostics["updates"] > a.diagnostics["updates"]
    assert b.snapshot.num_samples > a.snapshot.num_samples
    # The resumed map keeps every inducing point of the first one (VIPS never drops points).
    Za, Zb = a.snapshot.inducing_m, b.snapshot.inducing_m
    kept = {tuple(z) for z in Zb.tolist()}
    assert len(Zb) > len(Za) and all(tuple(z) in kept for z in Za.tolist())


def test_replay_command_names_a_missing_topic(tmp_path: Path, capsys) -> None:
    bag = tmp_path / "synthetic.mcap"
    write_synthetic_bag(bag, seed=1, duration_s=5.0)
    code = cli_main(["replay", str(bag), "--out", str(tmp_path / "o"), "--mag-topic", "/nope"])
    assert code == 2
    err = capsys.readouterr().err
    assert "/nope" in err and "/imu/mag" in err


def test_replay_command_reports_a_truncated_bag(tmp_path: Path, capsys) -> None:
    bag = tmp_path / "synthetic.mcap"
    write_synthetic_bag(bag, seed=1, duration_s=5.0)
    storage = next(bag.glob("*.mcap"))
    data = storage.read_bytes()
    storage.write_bytes(data[: len(data) // 2])
    code = cli_main(["replay", str(bag), "--out", str(tmp_path / "o")])
    assert code == 2
    assert "synthetic.mcap" in capsys.readouterr().err


def test_replay_command_rejects_a_bad_parameter(tmp_path: Path, capsys) -> None:
    bag = tmp_path / "synthetic.mcap"
    write_synthetic_bag(bag, seed=1, duration_s=5.0)
    code = cli_main(["replay", str(bag), "--out", str(tmp_path / "o"), "--set", "vips.delta=7"])
    assert code == 2
    assert "vips.delta" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "o", ignore_errors=True)


def test_replay_of_a_vector_map_draws_its_components(tmp_path: Path, capsys) -> None:
    # A bag carries the whole MagneticField vector: the same bag maps |B| or the field vector.
    bag = tmp_path / "synthetic.mcap"
    write_synthetic_bag(bag, seed=2, duration_s=10.0)
    scalar = replay_bag(bag, tmp_path / "scalar", overrides=FAST, progress=False)
    sets = ["--set", "target=vector", "--set", "model=potential"]
    sets += [f"--set={k}={v}" for k, v in FAST.items()]
    assert cli_main(["replay", str(bag), "--out", str(tmp_path / "vector"), *sets]) == 0
    out = capsys.readouterr().out
    assert "map.png" in out and "magnetometer offset" not in out
    vector = ReplayOutputs.in_dir(tmp_path / "vector")
    assert scalar.snapshot is not None and not scalar.snapshot.is_vector
    # four columns (|B|, Bx, By, Bz) over two rows, against the scalar map's two panels
    (sw, sh), (vw, vh) = _png_size(scalar.outputs.png), _png_size(vector.png)
    assert vw == pytest.approx(2 * sw, rel=0.05) and vh == pytest.approx(2 * sh, rel=0.05)
    with np.load(vector.grids, allow_pickle=False) as grids:
        assert {"bx", "by", "bz", "var_bx", "var_by", "var_bz"} <= set(grids.files)
        np.testing.assert_allclose(  # |B| of the posterior near |mean of the components|
            grids["mean"],
            np.linalg.norm(np.stack([grids["bx"], grids["by"], grids["bz"]], -1), axis=-1),
            rtol=0.05,
        )
    assert load_map(vector.state, target="vector", expected_model="potential").num_samples > 0


def test_replay_with_the_sensor_offset_prints_its_estimate(tmp_path: Path, capsys) -> None:
    bag = tmp_path / "synthetic.mcap"
    write_synthetic_bag(bag, seed=2, duration_s=10.0)
    sets = ["--set", "target=vector", "--set", "model=potential"]
    sets += [
        "--set",
        "potential.hard_iron_variance=25",
        *[f"--set={k}={v}" for k, v in FAST.items()],
    ]
    assert cli_main(["replay", str(bag), "--out", str(tmp_path / "vector"), *sets]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "magnetometer offset" in x)
    assert re.fullmatch(
        r"magnetometer offset \(sensor frame\): x \S+ ± \S+, y \S+ ± \S+, z \S+ ± \S+ µT", line
    )


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_replay_gives_the_same_map_on_an_idle_and_a_loaded_machine(tmp_path: Path) -> None:
    # A wall-clock fit budget that would bind (50 ms) is the live node's: a replay runs every
    # fit to fit_iterations, so two CPU hogs beside it change nothing.
    bag = tmp_path / "world.mcap"
    write_synthetic_bag(bag, seed=2, duration_s=30.0)
    overrides = {**FAST, "vips.fit_max_seconds": 0.05, "fit_iterations": 30}
    idle = replay_bag(bag, tmp_path / "idle", overrides=overrides, progress=False)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = replay_bag(bag, tmp_path / "loaded", overrides=overrides, progress=False)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    with np.load(idle.outputs.state) as a, np.load(loaded.outputs.state) as b:
        engine = sorted(k for k in a.files if k.startswith("engine."))
        assert engine and engine == sorted(k for k in b.files if k.startswith("engine."))
        for key in engine:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    with np.load(idle.outputs.grids) as a, np.load(loaded.outputs.grids) as b:
        np.testing.assert_array_equal(a["mean"], b["mean"])
