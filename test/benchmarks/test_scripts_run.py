"""Every benchmark script starts as its docstring says: ``python benchmarks/NAME.py`` from the
repository root, with no package path set (``--help``, so nothing is measured)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    p.name
    for p in (REPO / "benchmarks").glob("*.py")
    if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")
)


def test_the_scripts_are_found() -> None:
    assert {"gpu_check.py", "gam_friedman.py", "magnetic_streaming.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_runs_from_the_repository_root(script: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--help"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
