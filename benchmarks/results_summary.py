"""The summary table at the top of benchmarks/RESULTS.md, generated from the committed JSON.

Each benchmark's latest ``--json`` output is committed under ``benchmarks/results/``; this
script reads them all and writes one row per figure that has a target or a reference
(benchmark, metric, ours, paper or peer, target, met?, date, commit, command), so the README,
RESULTS.md and the JSON cannot disagree. A benchmark gets rows here once its extractor is
listed in ``EXTRACTORS``.

    python benchmarks/results_summary.py            # print the table
    python benchmarks/results_summary.py --write    # replace the table in RESULTS.md
    python benchmarks/results_summary.py --check    # exit 1 if RESULTS.md's table is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import SECTIONS

ALL_SECTIONS = {s.name for s in SECTIONS}
RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
START, END = "<!-- summary:start -->", "<!-- summary:end -->"
HEADER = (
    "benchmark",
    "metric",
    "ours",
    "paper / peer",
    "target",
    "met?",
    "date",
    "commit",
    "command",
)

Row = tuple[str, ...]


def _yes(ok: bool | None) -> str:
    return "–" if ok is None else ("yes" if ok else "**no**")


def gpu_check_rows(data: dict[str, Any], path: Path) -> Iterator[Row]:
    """The GPU check's targets: CUDA tests, agreement, the update at M = 5000, CaGP-Opt rows."""
    env = data["env"]
    device = data["device"].split(",")[0]
    when, commit = env["date"].split()[0], env["commit"]
    command = "make gpu-check" + (
        f" (--only {','.join(data['sections'])})" if set(data["sections"]) < ALL_SECTIONS else ""
    )
    bench = f"gpu_check.py, {device}"
    tests = data.get("tests") or {}
    if tests.get("passed") is not None:
        failed = (tests.get("failed") or 0) + (tests.get("errors") or 0)
        yield (
            bench,
            "CUDA tests",
            f"{tests['passed']} passed, {failed} failed",
            "",
            "all pass",
            _yes(failed == 0 and tests["passed"] > 0),
            when,
            commit,
            command,
        )
    worst = data.get("agreement", {}).get("worst", {}).get("float64/fixed_theta")
    if worst is not None:
        yield (
            bench,
            "CUDA vs CPU, float64, θ fixed (max rel.)",
            f"{worst:.0e}",
            "",
            "≤ 1e-8",
            _yes(worst <= 1e-8),
            when,
            commit,
            command,
        )
    update = data.get("update_ms", {})
    if 5000 in update.get("M", []):
        i = update["M"].index(5000)
        gpu, cpu = update["gpu"][i], update["cpu"][i]
        if gpu is not None:
            peer = f"CPU {cpu:.0f} ms" if cpu else ""
            yield (
                bench,
                "one VIPS update, M 5000, N 1000",
                f"{gpu:.0f} ms",
                peer,
                "≤ 100 ms",
                _yes(gpu <= 100.0),
                when,
                commit,
                command,
            )
    for row in data.get("rows", {}).values():
        result = row.get("result", {})
        for dataset, targets in result.get("targets", {}).items():
            runs = result.get("datasets", {}).get(dataset, {}).get("cagp_opt")
            if not runs or not isinstance(targets, dict):
                continue
            ours = f"NLL {runs['nll'][0]:.3f}, RMSE {runs['rmse'][0]:.3f}"
            met = [v for k, v in targets.items() if k.startswith("cagp_")]
            yield (
                bench,
                f"CaGP-Opt {dataset} (one seed)",
                ours,
                "Wenger et al. 2024 Table 1",
                "paper ± 2 std",
                _yes(all(met)) if met else "–",
                when,
                commit,
                command,
            )


# File name prefix -> the extractor of that benchmark's rows.
EXTRACTORS: dict[str, Callable[[dict[str, Any], Path], Iterator[Row]]] = {
    "gpu_check": gpu_check_rows,
}


def rows(results_dir: Path = RESULTS_DIR) -> list[Row]:
    """Every extractor's rows over the JSON files under ``results_dir``.

    Runs are read oldest first (by the date they record, then the file name), and a later
    run's row of a metric replaces an earlier one, so each metric shows its latest measurement.
    """
    runs = []
    for path in sorted(results_dir.rglob("*.json")):
        key = next((k for k in EXTRACTORS if k in str(path.relative_to(results_dir))), None)
        if key is not None:
            data = json.loads(path.read_text())
            runs.append((str(data.get("env", {}).get("date", "")), path.name, key, data, path))
    latest: dict[tuple[str, str], Row] = {}
    for _, _, key, data, path in sorted(runs, key=lambda run: run[:2]):  # oldest first
        for row in EXTRACTORS[key](data, path):
            latest[(row[0], row[1])] = row
    return list(latest.values())


def table(results_dir: Path = RESULTS_DIR) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results_dir)]
    return "\n".join(lines)


def replaced(text: str, new_table: str) -> str:
    """``text`` with the block between the markers replaced by ``new_table``."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{new_table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the table in RESULTS.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md is stale")
    args = parser.parse_args(argv)
    new_table = table()
    text = RESULTS_MD.read_text()
    if args.check:
        stale = replaced(text, new_table) != text
        print("RESULTS.md's summary is stale: run --write" if stale else "up to date")
        return 1 if stale else 0
    if args.write:
        RESULTS_MD.write_text(replaced(text, new_table))
        print(f"wrote the summary of {len(rows())} rows into {RESULTS_MD}")
        return 0
    print(new_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
