"""Shared pieces of the benchmark scripts: data location, metrics, headers, JSON output."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gp_mapper.engine import EngineSpec
from gp_mapper.engine import warm_up as warm_up_engine

REPO_ROOT = Path(__file__).resolve().parents[1]
# The matrices are small (M up to a few thousand); on a shared 2-core machine torch's second
# OpenMP thread spins against other processes: concrete/OIPS took 53 s with 2 threads, 6 s with 1.
DEFAULT_THREADS = 1


def data_dir() -> Path:
    """$GP_MAPPER_DATA, else ../shared/data beside the repository."""
    return Path(os.environ.get("GP_MAPPER_DATA", REPO_ROOT.parent / "shared" / "data"))


def aalto_dir() -> Path:
    """The Aalto magnetometer data (runs 1-9 of the Invensense sensor) under ``data_dir()``."""
    return data_dir() / "magnetic" / "aalto-magnetic-data" / "data"


def mean_std(values: Any, scale: float = 1.0, ddof: int = 1) -> tuple[float, float]:
    """Mean and standard deviation of ``values / scale`` over seeds or folds (``ddof`` 1, as
    the papers report spread over seeds; 0 where a protocol uses the population's); the
    deviation is 0 for ``ddof`` or fewer values."""
    a = np.asarray(values, dtype=np.float64) / scale
    return float(a.mean()), (float(a.std(ddof=ddof)) if a.size > ddof else 0.0)


def rmse(mean: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((mean - y) ** 2)))


def nlpd(mean: np.ndarray, var_y: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log predictive density of y under N(mean, var_y)."""
    return float(np.mean(0.5 * np.log(2.0 * math.pi * var_y) + 0.5 * (y - mean) ** 2 / var_y))


# Two-sided 95 % quantile of the standard normal.
Z95 = 1.959963984540054


def coverage95(mean: np.ndarray, var_y: np.ndarray, y: np.ndarray) -> float:
    """Fraction of y inside the central 95 % interval of N(mean, var_y) (0.95 if calibrated)."""
    return float(np.mean(np.abs(y - mean) <= Z95 * np.sqrt(var_y)))


def width95(var_y: np.ndarray) -> float:
    """Mean width of the central 95 % interval, 2 · Z95 · sd."""
    return float(np.mean(2.0 * Z95 * np.sqrt(var_y)))


def header(title: str, device: torch.device, dtype: torch.dtype, seed: int | None = None) -> str:
    """Where and how a table was measured, printed above it."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "none"
    lines = [
        f"# {title}",
        f"date {time.strftime('%Y-%m-%d %H:%M')}  host {platform.node()}  "
        f"cpu threads {torch.get_num_threads()}  device {device} (GPU: {gpu})",
        f"torch {torch.__version__}  dtype {str(dtype).removeprefix('torch.')}"
        + ("" if seed is None else f"  seed {seed}"),
    ]
    return "\n".join(lines)


def warm_up(device: torch.device, dtype: torch.dtype) -> None:
    """Pay torch's one-time start-up (~1 s) before timing, so no method is charged for it."""
    warm_up_engine(EngineSpec(device=str(device), dtype=str(dtype).removeprefix("torch.")), 2)


def add_run_arguments(parser: argparse.ArgumentParser, device: str = "cpu") -> None:
    """``--device``, ``--threads`` (give it to ``set_cpu_threads``) and ``--json``."""
    parser.add_argument("--device", default=device, help="cpu, cuda, cuda:N or auto")
    parser.add_argument(
        "--threads", type=int, default=DEFAULT_THREADS, help="torch CPU threads (0: torch default)"
    )
    parser.add_argument("--json", help="write the results to this JSON file")


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


# The code a result comes from is the code at the start of the run: its commit, whether the
# tree had uncommitted changes, and the start time (a commit made meanwhile changes nothing).
_STARTED = {
    "date": time.strftime("%Y-%m-%d %H:%M"),
    "commit": _git("rev-parse", "--short", "HEAD") or os.environ.get("GPU_CHECK_COMMIT", ""),
    "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
}


def run_env() -> dict[str, Any]:
    """When (the start), at which commit and by which command a result was made (``env``)."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_name = str(script.relative_to(REPO_ROOT))
    except ValueError:
        script_name = sys.argv[0]
    return {
        **_STARTED,
        "finished": time.strftime("%Y-%m-%d %H:%M"),
        "command": " ".join(["python", script_name, *sys.argv[1:]]),
        "host": platform.node(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    """Write ``payload`` with its ``env`` (date, commit, dirty tree, command) to ``path``."""
    if path:
        record = payload if "env" in payload else {**payload, "env": run_env()}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=2, default=_jsonable))
        print(f"wrote {path}")


def _jsonable(value: Any) -> Any:
    """numpy and torch scalars and arrays as plain numbers and lists; anything else as text."""
    if isinstance(value, np.generic | np.ndarray | torch.Tensor):
        return value.tolist()
    return str(value)


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-markdown table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    return "\n".join([line, sep, *body])
