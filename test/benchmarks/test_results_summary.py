"""RESULTS.md's summary table is what the committed JSON gives (results_summary.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from results_summary import RESULTS_MD, replaced, rows, table


def test_results_md_holds_the_summary_the_json_gives() -> None:
    text = RESULTS_MD.read_text()
    assert replaced(text, table()) == text, "run: python benchmarks/results_summary.py --write"


def test_a_later_run_replaces_a_metric_and_a_missed_target_says_no(tmp_path: Path) -> None:
    def run(date: str, commit: str, ms: float) -> dict:
        return {"device": "GPU X, 80 GiB", "env": {"date": date, "commit": commit},
                "sections": {}, "tests": {"passed": 3, "failed": 0, "errors": 0},
                "update_ms": {"M": [5000], "gpu": [ms], "cpu": [None]}}  # fmt: skip

    (tmp_path / "gpu_check_b.json").write_text(json.dumps(run("2026-01-01 10:00", "old", 90.0)))
    (tmp_path / "gpu_check_a.json").write_text(json.dumps(run("2026-01-02 10:00", "new", 150.0)))
    found = {row[1]: row for row in rows(tmp_path)}
    update = found["one VIPS update, M 5000, N 1000"]
    assert update[2] == "150 ms" and update[5] == "**no**" and update[7] == "new"
    assert found["CUDA tests"][5] == "yes"
