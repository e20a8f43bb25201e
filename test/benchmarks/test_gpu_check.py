"""The GPU check (benchmarks/gpu_check.py): its dry run takes every path, its budget holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gpu_check import REPO, SECTIONS, SEED_ROWS

from gp_mapper.engine import model_names

SCRIPT = REPO / "benchmarks" / "gpu_check.py"
# The dry run takes ~1-2 minutes here; its sections' shares of the default budget (420 s, sized
# for the GPU) ran out under a parallel benchmark (agreement stopped after 43 s).
DRY_RUN_BUDGET_S = 3600


def run_check(out: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "gpu_check.json").read_text())


@pytest.mark.slow
def test_the_dry_run_takes_every_section_and_writes_the_issue_shape(tmp_path: Path) -> None:
    # Every path, not the budget (the next test's): a budget no loaded machine runs out of.
    result = run_check(tmp_path, "--budget-s", str(DRY_RUN_BUDGET_S))
    assert {"device", "torch", "tests", "agreement", "update_ms", "rows"} <= result.keys()
    assert result["env"]["dry_run"] and not result["cut"]
    for section in SECTIONS:
        status = result["sections"][section.name]
        assert status["status"] == "done", (section.name, status)
    # pytest ran the marked tests; without CUDA each one skips with its reason.
    tests = result["tests"]
    assert tests["failed"] == 0 and tests["errors"] == 0 and tests["skipped"] >= 4
    # Every model, both dtypes: the CPU against itself is bit for bit the same.
    models = result["agreement"]["models"]
    assert set(models) == set(model_names())
    for rows in models.values():
        assert {"float64/fixed_theta", "float64/fitted", "float32/fixed_theta"} == set(rows)
        for row in rows.values():
            assert row["mean_rel"] == 0.0 and row["var_rel"] == 0.0, row
    update = result["update_ms"]
    assert len(update["M"]) == len(update["gpu"]) == len(update["cpu"])
    assert all(t is not None and t > 0.0 for t in update["gpu"] + update["cpu"])
    assert update["profile"]["wall_ms"] > 0.0 and update["profile"]["top"]
    assert result["stream"]["gpu"]["M"] == result["stream"]["cpu"]["M"] > 0
    # The office floor replayed twice on the CPU: the same map bit for bit, nothing lost.
    tiled = result["tiled_replay"]
    assert tiled["gpu"]["lost_readings"] == tiled["cpu"]["lost_readings"] == 0
    assert tiled["gpu"]["map_digest"] == tiled["cpu"]["map_digest"]
    assert set(result["rows"]) == set(SEED_ROWS)
    for name, row in result["rows"].items():
        assert row["returncode"] == 0 and row["result"]["datasets"], name
    table = (tmp_path / "gpu_check.md").read_text()
    assert "Agreement with the CPU" in table and "One VIPS update" in table
    assert "The office floor through the tiled map" in table
    log = (tmp_path / "gpu_check.log").read_text()
    assert all(f"===== {section.name} (" in log for section in SECTIONS)


def test_a_section_past_its_share_is_stopped_and_said_so(tmp_path: Path) -> None:
    # The agreement needs several seconds here: given 2 it is stopped part-way.
    result = run_check(tmp_path, "--budget-s", "2", "--only", "agreement")
    status = result["sections"]["agreement"]
    assert status["status"].startswith("cut") and status["seconds"] < 3.0
    assert result["cut"] and result["cut"][0].startswith("agreement")
    assert result["wall_s"] < 5.0
