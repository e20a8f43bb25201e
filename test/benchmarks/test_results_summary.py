"""RESULTS.md's summary table and the README's headline are what the committed JSON gives
(results_summary.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from results_summary import (
    EXTRACTORS,
    HEADLINE,
    HEADLINE_END,
    HEADLINE_START,
    README_MD,
    RESULTS_DIR,
    RESULTS_MD,
    headline,
    replaced,
    rows,
    table,
)


def test_results_md_holds_the_summary_the_json_gives() -> None:
    text = RESULTS_MD.read_text()
    assert replaced(text, table()) == text, "run: python benchmarks/results_summary.py --write"


def test_the_readme_holds_the_headline_the_json_gives() -> None:
    text = README_MD.read_text()
    fresh = replaced(text, headline(), HEADLINE_START, HEADLINE_END)
    assert fresh == text, "run: python benchmarks/results_summary.py --write"


def test_every_headline_row_is_a_summary_row() -> None:
    found = {(row[0], row[1]) for row in rows()}
    assert set(HEADLINE) <= found, set(HEADLINE) - found


def test_every_extractor_reads_its_committed_json() -> None:
    for key in EXTRACTORS:
        for path in sorted((RESULTS_DIR / key).glob("*.json")):
            assert list(EXTRACTORS[key](json.loads(path.read_text()), path)), path


def test_a_uci_row_is_met_only_when_both_targets_are(tmp_path: Path) -> None:
    def run(pct: float, m: float) -> dict:
        vips = {"rmse_pct": pct, "M_mean": m, "M_std": 3.0}
        return {"env": {"date": "2026-01-01 10:00", "commit": "abc", "dirty": True,
                        "command": "python benchmarks/uci_streaming.py --json x.json"},
                "point": "rmse", "threshold_pct": 10.0, "m_tolerance": 0.25,
                "paper": {"naval": {"vips": [57, 1, 2.25]}},
                "datasets": {"naval": {"folds": [{}, {}], "summary": {"vips": vips}}}}  # fmt: skip

    folder = tmp_path / "uci_streaming"
    folder.mkdir()
    verdicts = []
    for pct, m in ((1.3, 69.0), (12.0, 69.0), (1.3, 80.0)):
        (folder / "run.json").write_text(json.dumps(run(pct, m)))
        (row,) = [r for r in rows(tmp_path) if r[1].startswith("VIPS naval")]
        verdicts.append(row[5])
    assert verdicts == ["yes", "**no**", "**no**"]
    assert row[7] == "abc*" and row[8] == "python benchmarks/uci_streaming.py"


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


def test_a_variant_run_is_kept_but_gives_no_row(tmp_path: Path) -> None:
    """A default tried on the test split and not kept: its JSON is committed under
    ``variants/`` and quoted in docs/decisions.md, while the rows stay the defaults' run."""

    def run(date: str, commit: str, ms: float) -> dict:
        return {"device": "GPU X, 80 GiB", "env": {"date": date, "commit": commit},
                "sections": {}, "tests": {"passed": 3, "failed": 0, "errors": 0},
                "update_ms": {"M": [5000], "gpu": [ms], "cpu": [None]}}  # fmt: skip

    folder = tmp_path / "gpu_check"
    (folder / "variants").mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps(run("2026-01-01 10:00", "default", 90.0)))
    (folder / "variants" / "b.json").write_text(json.dumps(run("2026-01-02 10:00", "var", 150.0)))
    found = {row[1]: row for row in rows(tmp_path)}
    assert found["one VIPS update, M 5000, N 1000"][7] == "default"
