"""The map digests (benchmarks/map_digests.py): what counts as the map, and what a check names
when it moved. No shared data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import map_digests


def write_state(path: Path, weights: np.ndarray, config: str) -> Path:
    np.savez(path, **{"engine.tile.0_0.carried.L": weights, "config_json": np.array(config)})
    return path


def test_settings_text_is_kept_apart_from_the_map(tmp_path: Path) -> None:
    weights = np.arange(6.0).reshape(2, 3)
    a = map_digests.state_digests(write_state(tmp_path / "a.npz", weights, '{"delta": 0.1}'))
    b = map_digests.state_digests(write_state(tmp_path / "b.npz", weights, '{"vips.delta": 0.1}'))
    assert a["numeric_set"] == b["numeric_set"] and a["text"] != b["text"]
    # The same bytes in another shape or dtype are another array.
    c = map_digests.state_digests(write_state(tmp_path / "c.npz", weights.T.copy(), "{}"))
    d = map_digests.state_digests(write_state(tmp_path / "d.npz", weights.astype(np.float32), ""))
    assert len({a["numeric_set"], c["numeric_set"], d["numeric_set"]}) == 3


def test_a_check_names_the_arrays_and_exit_codes_that_moved(tmp_path: Path) -> None:
    weights = np.eye(3)
    same = map_digests.state_digests(write_state(tmp_path / "a.npz", weights, ""))
    moved = weights.copy()
    moved[0, 0] = np.nextafter(1.0, 2.0)  # one bit
    other = map_digests.state_digests(write_state(tmp_path / "b.npz", moved, ""))
    old = {"fit": {"returncode": 0, **same}, "exact": {"returncode": 2}}
    new = {"fit": {"returncode": 0, **other}, "exact": {"returncode": 0}}
    report = map_digests.compare(old, new)
    assert report == ["exact: exit code 2 -> 0",
                      "fit: 1 arrays moved (engine.tile.0_0.carried.L)"]  # fmt: skip
    assert map_digests.compare(old, {"fit": {"returncode": 0, **same}}) == []


def test_a_command_past_its_cut_is_killed_and_recorded(tmp_path: Path) -> None:
    code, _, _ = map_digests.run_cli(["replay", "--help"], tmp_path / "help.log", None)
    assert code == 0 and "usage" in (tmp_path / "help.log").read_text()
    code, _, seconds = map_digests.run_cli(["replay", "--help"], tmp_path / "cut.log", 0.001)
    assert code == map_digests.CUT and seconds < 5.0
