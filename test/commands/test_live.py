"""The live node and the offline replay make the same map; the demo runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not installed")

from gp_mapper.commands.demo import map_live
from gp_mapper.commands.replay import replay_bag
from gp_mapper.io import write_synthetic_bag, write_synthetic_robot_bag
from gp_mapper.mapping.map_file import read_model

pytestmark = pytest.mark.ros

FAST = {"fit_iterations": 10, "batch_size": 200, "vips.delta": 0.095}
MAX_TRANSPORT_LOSS = 3  # readings, of 1501
MAX_MAP_DIFFERENCE_UT = 0.5  # RMS along the path when a reading or two were lost
DEMO_BUDGET_S = 180.0


@pytest.mark.parametrize("source", ["topic", "tf"])
def test_live_node_and_offline_replay_make_the_same_map(tmp_path: Path, source: str) -> None:
    bag = tmp_path / "world.mcap"
    if source == "tf":  # a robot's recording: /tf, /tf_static, the magnetometer in imu_link
        write_synthetic_robot_bag(bag, seed=5, duration_s=30.0, rate_hz=50.0)
    else:
        write_synthetic_bag(bag, seed=5, duration_s=30.0)
    live_dir, offline_dir = tmp_path / "live", tmp_path / "offline"
    live_dir.mkdir()
    # Slow enough that the engine never falls behind, so no window is merged or dropped.
    params = {**FAST, "pose_source": source}
    live_state = map_live(bag, live_dir, rate=1.5, params=params)
    offline = replay_bag(bag, offline_dir, overrides=FAST, progress=False)
    with np.load(live_state) as live, np.load(offline.outputs.state) as off:
        assert '"window_overflow": 0' in str(live["drops_json"])
        lost = int(off["num_samples"]) - int(live["num_samples"])
        # Sensor topics are best effort: under load DDS may lose a message at the edges of
        # the stream. With nothing lost the windows, and so the maps, are identical.
        assert 0 <= lost <= MAX_TRANSPORT_LOSS
        if lost == 0:  # the same keys (a tile's under its prefix) and the same values
            keys = sorted(k for k in live.files if k.startswith("engine."))
            assert keys == sorted(k for k in off.files if k.startswith("engine."))
            for key in keys:
                if key.endswith(("num_updates", "carried.Z")):
                    np.testing.assert_array_equal(live[key], off[key], err_msg=key)
                elif key.endswith("carried.v"):
                    np.testing.assert_allclose(live[key], off[key], rtol=1e-9, err_msg=key)
        path_m = off["trajectory_m"]
    means = [_predict(state, path_m) for state in (live_state, offline.outputs.state)]
    assert float(np.sqrt(np.mean((means[0] - means[1]) ** 2))) < MAX_MAP_DIFFERENCE_UT


def _predict(map_path: Path, points: np.ndarray) -> np.ndarray:
    model = read_model(map_path, device="cpu")
    return model.predict(torch.as_tensor(points[:, :2]))[0].numpy()


def test_demo_runs_end_to_end_within_its_budget(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = dict(os.environ)
    env.pop("ROS_DOMAIN_ID", None)  # the demo picks its own isolated domain
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gp_mapper.cli", "demo", "--out", str(out), "--duration", "60"],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_BUDGET_S + 60,
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert elapsed < DEMO_BUDGET_S
    for name in ("map.png", "map.yaml", "map.pgm", "grids.npz", "map_state.npz"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rmse_line = next(line for line in proc.stdout.splitlines() if "RMSE" in line)
    rmse = float(rmse_line.split("RMSE")[1].split()[0])
    assert rmse < 3.0, proc.stdout


def test_demo_names_a_missing_data_directory(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gp_mapper.cli", "demo", "--data", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "missing" in proc.stderr and "does not exist" in proc.stderr
