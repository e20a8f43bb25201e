"""One prepared check of the GPU path: CUDA tests, agreement with the CPU, cost, the papers' rows.

Run on a CUDA machine with ``make gpu-check`` (``benchmarks/gpu_env.sh`` picks the Python: the
machine's CUDA torch, or a venv with the pinned torch's CUDA build). Sections, in this order,
each in its own process with a share of the time budget (time a section leaves goes to the
next; a section past its share is stopped, and what it finished is kept and the rest named as
cut):

1. ``tests``: the tests marked ``gpu`` (pytest ``-m gpu``), counted.
2. ``agreement``: every registered model trained and queried on the GPU and on the CPU, in
   float64 and float32 (``benchmarks/gpu_agreement.py``); target 1e-8 relative in float64.
3. ``update_ms``: one VIPS update (its selection, the Bui et al. bound and the commit; no
   hyperparameter fit) of N = 1000 readings on an engine holding M = 500 ... 10 000 inducing
   points, GPU against the CPU (all its cores) in the same run, median of repeats; a CPU size
   predicted past the section's time is skipped and said so. Target: M = 5000 in <= 100 ms.
4. ``stream``: the VIPS paper's magnetometer stream (invensense path 3 in 20 batches, VIPS at
   δ = 0.095, tested on paths 1, 2, 4, 5) on the GPU and on the CPU.
5. ``tiled_replay``: the office floor of ``benchmarks/building.py`` (a 10-minute walk) through the
   tiled map at the node's defaults, on the GPU and on the CPU when time is left.
6. The batch papers' GPU rows, each cut to fit and said so: CaGP-Opt on parkinsons and bike
   (Wenger et al. 2024, Table 1: i = 512, 1000 epochs, all rows, one seed), ACGP on pol and
   bike (Bartels et al. 2023, Table 3: m = 10 240, L-BFGS capped, one shuffle), SOLVE-GP at
   M = 1024 on kin40k (Shi et al. 2020, Table 2: one split, fewer epochs).

Output under ``--out`` (default ``$OUT`` when set, else ``out/gpu_check``): ``gpu_check.json``
(``device``, ``torch``, ``tests``, ``agreement``, ``update_ms``, ``stream``, ``rows``,
``sections`` with each one's status, time and log tail, ``cut``), ``gpu_check.md`` (the short
tables) and ``gpu_check.log`` (every section's output).

Without CUDA, or with ``--dry-run``, every section runs at tiny sizes on the CPU against the
CPU, on a small synthetic copy of the data files, so that no code path of the check can rot
(CI runs it). Its figures mean nothing.

    make gpu-check [GPU_CHECK_ARGS="--budget-s 420"]
    python benchmarks/gpu_check.py [--budget-s 420] [--out DIR] [--dry-run] [--only a,b]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gzip
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

TORCH_PIN = "2.13.0"
DEFAULT_BUDGET_S = 420.0
# A section given less than this is not started.
MIN_SECTION_S = 1.0
UPDATE_M = (500, 1000, 2000, 5000, 10_000)
UPDATE_N = 1000
UPDATE_REPEATS = 3
UPDATE_TARGET_MS = 100.0
AGREEMENT_TARGET = 1e-8
# The tiled replay's walk [min]: long enough for several tiles, short enough for its share.
TILED_MINUTES = 10.0
TILED_MINUTES_DRY = 0.5
LOG_TAIL_LINES = 40


# --------------------------------------------------------------------------- sections
class Partial:
    """A section's result, rewritten to its file after every step so a stopped section keeps it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=_jsonable))
        tmp.replace(self.path)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _sync(device: Any) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def section_tests(out: Partial, ctx: Context) -> None:
    """The tests marked ``gpu``, run by pytest in a process of their own."""
    files = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "test").rglob("test_*.py")
        if "mark.gpu" in p.read_text(encoding="utf-8")
    )
    report = ctx.scratch / "gpu_tests.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
        *files,
    ]
    out.data.update(files=files, command=" ".join(command[1:]))
    out.save()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    print(proc.stdout[-6000:], proc.stderr[-2000:], sep="\n", flush=True)
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    if report.is_file():
        import xml.etree.ElementTree as ET

        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        total = int(suite.get("tests", 0))
        counts["failed"] = int(suite.get("failures", 0))
        counts["errors"] = int(suite.get("errors", 0))
        counts["skipped"] = int(suite.get("skipped", 0))
        counts["passed"] = total - counts["failed"] - counts["errors"] - counts["skipped"]
        out.data["failing"] = [
            f"{case.get('classname')}::{case.get('name')}"
            for case in suite.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        ]
    out.data.update(counts, returncode=proc.returncode)
    out.save()


def section_agreement(out: Partial, ctx: Context) -> None:
    from gpu_agreement import agreement, worst

    def on_row(result: dict[str, Any]) -> None:
        out.data["models"] = result
        out.save()

    result = agreement(ctx.device, ("float64", "float32"), on_row=on_row)
    out.data["models"] = result
    out.data["worst"] = {
        key: worst(result, key)
        for key in ("float64/fixed_theta", "float64/fitted", "float32/fixed_theta")
    }
    out.save()


def section_update_ms(out: Partial, ctx: Context) -> None:
    """One VIPS update (selection, bound, commit; no fit) against M, on the GPU and the CPU."""
    import torch
    from speed import DELTA, bound_grad_seconds, primed_engine, synthetic

    from gp_mapper.engine import Vips

    sizes = (20, 40) if ctx.dry_run else UPDATE_M
    n = 50 if ctx.dry_run else UPDATE_N
    out.data.update(
        M=list(sizes),
        N=n,
        gpu=[None] * len(sizes),
        cpu=[None] * len(sizes),
        M_after={},
        bound_grad_ms={},
        notes=[],
        what="ms for one update: VIPS selection (δ = 0.095) + bound + commit, "
        "no hyperparameter fit, on an engine primed with M points (FixedSize)",
        cpu_threads=torch.get_num_threads(),
    )
    out.save()
    deadline = ctx.deadline

    def primed(M: int, device: torch.device) -> tuple[Any, torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(0)
        engine = primed_engine(M, device, torch.float64, rng)
        engine.selector = Vips(DELTA)
        engine.max_inducing = M + n
        X, y = (torch.as_tensor(a, device=device) for a in synthetic(n, rng))
        return engine, X, y

    def point(M: int, device: torch.device, repeats: int) -> tuple[float, int, float]:
        engine, X, y = primed(M, device)
        times, m_after = [], M
        for _ in range(repeats):
            trial = copy.deepcopy(engine)
            _sync(device)
            start = time.perf_counter()
            report = trial.update(X, y)
            _sync(device)
            times.append(time.perf_counter() - start)
            m_after = report.m_after
        grad = bound_grad_seconds(engine, X, y)
        return float(np.median(times)) * 1e3, m_after, grad * 1e3

    def profile(device: torch.device) -> None:
        # Where one update's time goes, at the target's size: for whoever makes it faster.
        M = min(sizes, key=lambda m: abs(m - 5000))
        engine, X, y = primed(M, device)
        copy.deepcopy(engine).update(X, y)  # warm
        try:
            out.data["profile"] = {"M": M, **profile_update(copy.deepcopy(engine), X, y)}
        except Exception as exc:  # the profiler's API moves between torch versions
            out.data["profile"] = {"M": M, "error": f"{type(exc).__name__}: {exc}"}
        out.save()

    devices = [("gpu", torch.device(ctx.device)), ("cpu", torch.device("cpu"))]
    for label, device in devices:
        point(sizes[0] // 2, device, 1)  # start-up: handles, kernels, allocator
        last: tuple[int, float] | None = None
        for i, M in enumerate(sizes):
            # The CPU's large sizes take seconds each: one run is a fair median there.
            repeats = 1 if label == "cpu" and M >= 2000 else UPDATE_REPEATS
            if last is not None:
                # Priming is a greedy O(M³) selection and an update O(N M² + M³): the whole
                # point, priming included, grows about as M³.
                predicted = last[1] * (M / last[0]) ** 3
                left = deadline - time.monotonic()
                if predicted > left:
                    out.data["notes"].append(
                        f"{label} M={M} skipped: predicted {predicted:.0f} s with priming, "
                        f"{left:.0f} s left"
                    )
                    out.save()
                    break
                if predicted * repeats > left:
                    repeats = 1
            start = time.perf_counter()
            ms, m_after, grad_ms = point(M, device, repeats)
            last = (M, time.perf_counter() - start)
            out.data[label][i] = round(ms, 3)
            out.data["M_after"].setdefault(label, {})[str(M)] = m_after
            out.data["bound_grad_ms"].setdefault(label, {})[str(M)] = round(grad_ms, 3)
            print(
                f"  {label} M={M}: {ms:.1f} ms (M after {m_after}), bound+grad "
                f"{grad_ms:.1f} ms, {repeats} repeat(s)",
                flush=True,
            )
            out.save()
        if label == "gpu":
            profile(device)  # before the CPU sizes, which may use up the share


def profile_update(engine: Any, X: Any, y: Any) -> dict[str, Any]:
    """One update under torch's profiler: device time, host waits, launches, the top kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = engine.device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        report = engine.update(X, y)
        _sync(engine.device)
        wall = time.perf_counter() - start
    events = prof.key_averages()

    def own(e: Any) -> float:  # microseconds on the device (on the CPU without one)
        if not cuda:
            return e.self_cpu_time_total
        for name in ("self_device_time_total", "self_cuda_time_total"):  # newer, older torch
            value = getattr(e, name, None)
            if value is not None:
                return value
        return 0.0

    count = {e.key: e.count for e in events}
    operators = [e for e in events if e.key.startswith("aten::")]
    # On the device the time is the kernels' (and copies'); the profiler's own buffers aside.
    kernels = [
        e for e in events
        if not e.key.startswith(("aten::", "cuda", "Activity Buffer", "Buffer Flush"))
    ]  # fmt: skip
    top = sorted(operators, key=own, reverse=True)[:10]
    return {
        "wall_ms": round(wall * 1e3, 2),
        "phases_ms": {
            k: round(v * 1e3, 2)
            for k, v in report.as_dict().items()
            if k.startswith("seconds_") and isinstance(v, float)
        },
        "device_ms": round(sum(own(e) for e in (kernels if cuda else operators)) / 1e3, 2),
        "host_waits": count.get("cudaStreamSynchronize", 0) + count.get("cudaDeviceSynchronize", 0),
        "item_calls": count.get("aten::item", 0),
        # The runtime's and the driver's launch calls, under each name CUDA gives them.
        "kernel_launches": sum(c for k, c in count.items() if "LaunchKernel" in k),
        "top": [[e.key[:70], round(own(e) / 1e3, 2), e.count] for e in top],
        "on": "device" if cuda else "cpu",
        "torch": torch.__version__,
    }


def section_stream(out: Partial, ctx: Context) -> None:
    """The VIPS paper's magnetometer stream (App. D.4) on the GPU and on the CPU."""
    from dataclasses import replace

    import torch
    from common import warm_up
    from magnetic_streaming import load, run_stream, test_set
    from scipy.spatial import cKDTree

    from gp_mapper.engine import EngineSpec

    X, y = load(3)
    Xt, yt = test_set()
    seen = cKDTree(X).query(Xt, distance_upper_bound=0.25)[0] <= 0.25
    out.data.update(train=len(y), test=len(yt))
    for label, device in (("gpu", ctx.device), ("cpu", "cpu")):
        warm_up(torch.device(device), torch.float64)
        spec = replace(EngineSpec(device=device, vips_fit_max_seconds=0.0), vips_delta=0.095)
        start = time.perf_counter()
        r = run_stream(spec, X, y, Xt, yt, seen)
        _sync(torch.device(device))
        out.data[label] = {
            "M": r["M"][-1],
            "rmse": r["rmse"],
            "nlpd": r["nlpd"],
            "coverage95": r["coverage95"],
            "width95": r["width95"],
            "update_s_median": float(np.median(r["seconds"])),
            "update_s_total": float(np.sum(r["seconds"])),
            "wall_s": time.perf_counter() - start,
        }
        print(f"  stream on {label}: {out.data[label]}", flush=True)
        out.save()


def section_tiled_replay(out: Partial, ctx: Context) -> None:
    """The building floor (``benchmarks/building.py``, a shorter walk) through the tiled map
    at the node's defaults, on the GPU and then on the CPU (all its cores) if time is left:
    replay speed, update p95 early and late, the map's error and coverage."""
    import building

    minutes = TILED_MINUTES_DRY if ctx.dry_run else TILED_MINUTES
    out.data["minutes"] = minutes
    out.save()
    for label, device in (("gpu", ctx.device), ("cpu", "cpu")):
        left = ctx.deadline - time.monotonic()
        wall = out.data.get("gpu", {}).get("wall_s")
        if label == "cpu" and wall and left < 1.5 * wall:
            out.data["cpu_skipped"] = f"{left:.0f} s left, the GPU replay took {wall:.0f} s"
            out.save()
            return
        result = ctx.scratch / f"tiled_{label}.json"
        argv = [
            "--rows", "tiled", "--minutes", f"{minutes:g}", "--set", f"device={device}",
            "--threads", "0", "--scratch", str(ctx.scratch / "building"), "--json", str(result),
        ]  # fmt: skip
        start = time.perf_counter()
        code = building.main(argv)
        if code:
            raise RuntimeError(f"building.py exited with {code}")
        row = json.loads(result.read_text())["rows"]["tiled"]
        keys = ("rmse", "baseline", "coverage95", "M_total", "tiles", "lost_readings", "wall_s",
                "realtime_factor", "update_s_p95", "updates", "rss_mb", "map_digest")  # fmt: skip
        out.data[label] = {k: row[k] for k in keys} | {"section_s": time.perf_counter() - start}
        print(f"  tiled replay on {label}: {out.data[label]}", flush=True)
        out.save()
    gpu, cpu = out.data["gpu"], out.data.get("cpu")
    if cpu:
        out.data["cpu_over_gpu_wall"] = cpu["wall_s"] / gpu["wall_s"]
        out.save()


@dataclass(frozen=True)
class SeedRow:
    """One of the papers' GPU rows: a benchmark script run on one data set."""

    script: str
    dataset: str
    full: str  # its arguments on the GPU
    dry: str  # at tiny sizes, for the dry run
    protocol: str  # what differs from the paper's, said beside the figures


CAGP_FULL = "--seeds 1 --actions 512 --epochs 1000 --train-points 0 --no-gpytorch"
CAGP_DRY = "--seeds 1 --actions 8 --epochs 3 --train-points 0 --no-gpytorch"
ACGP_FULL = "--shuffles 1 --block-size 10240 --iterations 300"
ACGP_DRY = "--shuffles 1 --block-size 32 --iterations 2"
ACGP_PROTOCOL = "one shuffle of the paper's five; L-BFGS capped at 300 of its 2000 iterations"
SEED_ROWS = {
    "cagp_parkinsons": SeedRow(
        "cagp_uci", "parkinsons", CAGP_FULL, CAGP_DRY,
        "CaGP-Opt and the exact GP; one seed of the paper's five; SGPR and SVGP not run",
    ),
    "cagp_bike": SeedRow(
        "cagp_uci", "bike", CAGP_FULL + " --no-exact", CAGP_DRY + " --no-exact",
        "CaGP-Opt alone (the exact GP on 14 077 rows outlasts its share); one seed of the "
        "paper's five; SGPR and SVGP not run",
    ),
    "acgp_pol": SeedRow(
        "acgp_uci", "pol", ACGP_FULL, ACGP_DRY, ACGP_PROTOCOL
    ),
    "acgp_bike": SeedRow(
        "acgp_uci", "bike", ACGP_FULL, ACGP_DRY, ACGP_PROTOCOL
    ),
    "solvegp_kin40k": SeedRow(
        "solvegp_uci", "kin40k",
        "--splits 1 --inducing 1024 --epochs 20 --no-gpytorch",
        "--splits 1 --inducing 8 --epochs 1 --no-gpytorch",
        "one split of the paper's five; 20 of its 100 epochs; the GPyTorch peer not run",
    ),
}  # fmt: skip


def seed_section(name: str) -> Callable[[Partial, Context], None]:
    row = SEED_ROWS[name]

    def run(out: Partial, ctx: Context) -> None:
        import importlib

        args = (row.dry if ctx.dry_run else row.full).split()
        result = ctx.scratch / f"{name}.json"
        argv = [*f"--datasets {row.dataset}".split(), *args, "--device", ctx.device]
        argv += ["--threads", "0", "--json", str(result)]
        out.data.update(script=f"benchmarks/{row.script}.py", argv=argv, protocol=row.protocol)
        out.save()
        code = importlib.import_module(row.script).main(argv)
        out.data["returncode"] = code
        if code:
            raise RuntimeError(f"{row.script}.py exited with {code}")
        if result.is_file():
            out.data["result"] = json.loads(result.read_text())
        out.save()

    return run


@dataclass(frozen=True)
class Section:
    name: str
    share_s: float  # seconds of the default budget; the shares of the sections run split --budget-s
    run: Callable[[Partial, Context], None]
    needs_data: str = ""  # a folder under the data directory this section reads


# Shares in seconds of the default budget, from the H200 runs (each section's time there, with
# room); the time a section leaves goes to the next. The CaGP bike row is last: the longest
# and the most variable (79 s and 139 s on two H200s), it gets whatever is left.
SECTIONS = [
    Section("tests", 25, section_tests),
    Section("agreement", 20, section_agreement),
    Section("update_ms", 75, section_update_ms),
    Section("stream", 20, section_stream, "magnetic"),
    Section("tiled_replay", 90, section_tiled_replay),
    Section("cagp_parkinsons", 50, seed_section("cagp_parkinsons"), "uci/parkinsons"),
    Section("acgp_pol", 45, seed_section("acgp_pol"), "uci/pol"),
    Section("acgp_bike", 45, seed_section("acgp_bike"), "uci/bike"),
    Section("solvegp_kin40k", 35, seed_section("solvegp_kin40k"), "uci/kin40k"),
    Section("cagp_bike", 103, seed_section("cagp_bike"), "uci/bike"),
]


@dataclass(frozen=True)
class Context:
    device: str
    dry_run: bool
    scratch: Path
    deadline: float  # time.monotonic() by which the section must be done


def run_section(name: str, out_file: Path, device: str, dry_run: bool, seconds: float) -> int:
    """The child process: one section, its result in ``out_file``."""
    section = next(s for s in SECTIONS if s.name == name)
    out = Partial(out_file)
    ctx = Context(device, dry_run, out_file.parent, time.monotonic() + seconds)
    section.run(out, ctx)
    return 0


# --------------------------------------------------------------------------- the driver
def environment(dry_run: bool) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    version = torch.__version__
    info: dict[str, Any] = {
        "torch": version,
        "torch_pin": TORCH_PIN,
        "torch_matches_pin": version.split("+")[0] == TORCH_PIN,
        "cuda_build": torch.version.cuda,
        "cuda_available": cuda,
        "python": platform.python_version(),
        "environment": os.environ.get("GPU_CHECK_ENV", sys.executable),
        "cpu_cores": os.cpu_count(),
        "host": platform.node(),
        "dry_run": dry_run,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        # A copy of the tree without its .git (a device machine's) names its commit in the env.
        "commit": os.environ.get("GPU_CHECK_COMMIT") or _git("rev-parse", "--short", "HEAD"),
        # Unknown for a copy named by GPU_CHECK_COMMIT (its files are not the checkout's) and
        # for a tree without git.
        "dirty": None
        if os.environ.get("GPU_CHECK_COMMIT") or not _git("rev-parse", "HEAD")
        else bool(_git("status", "--porcelain", "--untracked-files=no")),
    }
    if cuda and not dry_run:
        props = torch.cuda.get_device_properties(0)
        info["device"] = (
            f"{props.name}, {props.total_memory / 2**30:.0f} GiB, "
            f"compute capability {props.major}.{props.minor}, {props.multi_processor_count} SMs"
        )
    else:
        info["device"] = "cpu (dry run: the figures are of the CPU against itself)"
    return info


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return ""


def synthetic_data(root: Path) -> None:
    """A small stand-in for the shared data: Aalto-like runs and UCI-like files, for the dry run."""
    rng = np.random.default_rng(0)
    aalto = root / "magnetic" / "aalto-magnetic-data" / "data" / "invensense"
    aalto.mkdir(parents=True)
    for seq in (1, 2, 3, 4, 5):
        t = np.arange(240) * 0.1
        loc = np.column_stack([np.cos(0.05 * t * seq), np.sin(0.07 * t)]) * 3.0
        mag = np.column_stack([20 + 5 * np.sin(loc[:, 0]), -10 + np.cos(loc[:, 1]), 40 + loc[:, 0]])
        mag += 0.3 * rng.standard_normal(mag.shape)
        for kind, values in (("time", t[:, None]), ("loc", loc), ("mag", mag)):
            np.savetxt(aalto / f"{seq}-{kind}.csv", values, delimiter=",")
    for name, dims in (("parkinsons", 5), ("bike", 4), ("pol", 6), ("kin40k", 3)):
        X = rng.standard_normal((300, dims))
        y = np.sin(X @ rng.standard_normal(dims)) + 0.1 * rng.standard_normal(300)
        folder = root / "uci" / name
        folder.mkdir(parents=True)
        with gzip.open(folder / "data.csv.gz", "wt") as f:
            np.savetxt(f, np.column_stack([X, y]), delimiter=",")


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    return text.rstrip("\n").splitlines()[-lines:]


def drive(args: argparse.Namespace) -> dict[str, Any]:
    from common import data_dir

    started = time.monotonic()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = environment(args.dry_run)
    device = "cpu" if args.dry_run else "cuda"
    scratch = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    child_env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.dry_run:
        synthetic_data(scratch / "data")
        child_env["GP_MAPPER_DATA"] = str(scratch / "data")
    data_root = Path(child_env.get("GP_MAPPER_DATA", data_dir()))
    sections = [s for s in SECTIONS if not args.only or s.name in args.only.split(",")]
    unknown = sorted(set(args.only.split(",")) - {s.name for s in SECTIONS}) if args.only else []
    if unknown or not sections:
        raise SystemExit(f"unknown sections {unknown}; choose from {[s.name for s in SECTIONS]}")
    # The budget is shared out in proportion to the shares of the sections that run.
    scale = args.budget_s / sum(s.share_s for s in sections)
    results: dict[str, Any] = {"env": env, "budget_s": args.budget_s, "sections": {}, "cut": []}
    log = open(out_dir / "gpu_check.log", "w")  # noqa: SIM115 - open for the whole run
    print(
        f"gpu check on {env['device']}: torch {env['torch']} ({env['environment']}), "
        f"budget {args.budget_s:.0f} s, {len(sections)} sections",
        flush=True,
    )
    spare = 0.0
    for i, section in enumerate(sections):
        elapsed = time.monotonic() - started
        left = args.budget_s - elapsed
        share = min(section.share_s * scale + spare, left)
        status: dict[str, Any] = {"share_s": round(share, 1)}
        results["sections"][section.name] = status
        if section.needs_data and not (data_root / section.needs_data).is_dir():
            status["status"] = f"skipped: no {section.needs_data} under {data_root}"
            print(f"[{elapsed:5.0f} s] {section.name}: {status['status']}", flush=True)
            spare = share
            continue
        if share < MIN_SECTION_S:
            status["status"] = "cut: no time left in the budget"
            results["cut"].append(f"{section.name}: not started, {left:.0f} s of the budget left")
            continue
        eta = sum(s.share_s * scale for s in sections[i:])
        print(
            f"[{elapsed:5.0f} s] {section.name} ({i + 1}/{len(sections)}), up to {share:.0f} s;"
            f" the rest about {min(eta, left):.0f} s",
            flush=True,
        )
        part = scratch / f"{section.name}.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--section",
            section.name,
            "--section-out",
            str(part),
            "--section-seconds",
            f"{share:.1f}",
            "--device",
            device,
            *(["--dry-run"] if args.dry_run else []),
        ]
        begin = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=share)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
                os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        used = time.monotonic() - begin
        log.write(f"===== {section.name} ({used:.1f} s, rc {proc.returncode})\n{output}\n")
        log.flush()
        status.update(seconds=round(used, 1), returncode=proc.returncode, log_tail=_tail(output))
        partial = json.loads(part.read_text()) if part.is_file() else {}
        if timed_out:
            status["status"] = f"cut: stopped at its {share:.0f} s share; the finished part kept"
            results["cut"].append(f"{section.name}: stopped after {used:.0f} s")
        elif proc.returncode != 0:
            status["status"] = "error"
        else:
            status["status"] = "done"
        results[section.name] = partial
        spare = max(0.0, share - used)
        print(
            f"[{time.monotonic() - started:5.0f} s] {section.name}: {status['status']} "
            f"in {used:.0f} s",
            flush=True,
        )
    log.close()
    results["wall_s"] = round(time.monotonic() - started, 1)
    return results


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """The summary record on top, the sections' details below."""
    env = results["env"]
    tests = results.get("tests", {})
    update = results.get("update_ms", {})
    rows = {name: results[name] for name in SEED_ROWS if name in results}
    agreement = results.get("agreement", {})
    worst64 = agreement.get("worst", {}).get("float64/fixed_theta")
    at5000 = None
    if update.get("M") and 5000 in update["M"]:
        at5000 = update["gpu"][update["M"].index(5000)]
    targets = {
        # None: the tests did not run (cut, or an error before they reported).
        "cuda_tests_pass": None
        if tests.get("passed") is None
        else (tests.get("failed", 0) + tests.get("errors", 0) == 0 and tests["passed"] > 0),
        "float64_agreement_1e-8": None if worst64 is None else worst64 <= AGREEMENT_TARGET,
        "update_M5000_N1000_le_100ms": None if at5000 is None else at5000 <= UPDATE_TARGET_MS,
    }
    return {
        "device": env["device"],
        "torch": env["torch"],
        "tests": {k: tests.get(k) for k in ("passed", "failed", "skipped", "errors")},
        "agreement": agreement,
        "update_ms": update,
        "stream": results.get("stream", {}),
        "tiled_replay": results.get("tiled_replay", {}),
        "rows": rows,
        "targets": targets,
        "env": env,
        "budget_s": results["budget_s"],
        "wall_s": results["wall_s"],
        "cut": results["cut"],
        "sections": results["sections"],
    }


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, list) and values else values


def row_figures(name: str, result: dict[str, Any]) -> list[str]:
    """A seed row's own figures beside the paper's (mean ± std over its runs), one line each."""
    lines: list[str] = []
    if name.startswith("cagp"):
        from cagp_uci import PAPER

        for dataset, methods in result.get("datasets", {}).items():
            paper = {r.key: r for r in PAPER.get(dataset, []) if r.key}
            for key, r in methods.items():
                p = paper.get(key)
                lines.append(
                    f"{dataset} {key}: NLL {_fmt(_first(r['nll']), '.3f')}, RMSE "
                    f"{_fmt(_first(r['rmse']), '.3f')}{_interval(r)}, "
                    f"{_fmt(_first(r['seconds']), '.0f')} s, "
                    f"{_fmt(_first(r['epochs']), '.0f')} epochs"
                    + (
                        f" (paper NLL {p.nll[0]} ± {p.nll[1]}, RMSE {p.rmse[0]} ± {p.rmse[1]}, "
                        f"{p.runtime})"
                        if p
                        else ""
                    )
                )
    elif name.startswith("acgp"):
        units = result.get("units", {})
        for dataset, d in result.get("datasets", {}).items():
            paper = result.get("paper", {}).get(dataset, {})
            for key in ("acgp", "exact"):
                r, p = d.get(key, {}), paper.get(key)
                if not r:
                    continue
                rmse = _first(r["rmse"]) / units.get("rmse", 1.0)
                nlpd = _first(r["nlpd"]) / units.get("nlpd", 1.0)
                lines.append(
                    f"{dataset} {key}: RMSE {rmse:.2f}, NLPD {nlpd:.2f} (paper's units)"
                    + _interval(r)
                    + (
                        f", M {_first(r['M'])}, {_fmt(_first(r['seconds']), '.0f')} s, "
                        f"{_first(r['fit_message'])}"
                        if key == "acgp"
                        else ""
                    )
                    + (
                        f" (paper RMSE {p['rmse'][0]} ± {p['rmse'][1]}, NLPD {p['nlpd'][0]} ± "
                        f"{p['nlpd'][1]})"
                        if p
                        else ""
                    )
                )
    elif name.startswith("solvegp"):
        from solvegp_uci import PAPER

        for dataset, d in result.get("datasets", {}).items():
            for key, r in d.items():
                if key in ("targets", "n_fit") or not isinstance(r, dict):
                    continue
                p = PAPER.get(dataset, {}).get(key)
                lines.append(
                    f"{dataset} {key}: test LL {_fmt(_first(r['ll']), '.3f')}, RMSE "
                    f"{_fmt(_first(r['rmse']), '.3f')}{_interval(r)}, "
                    f"{_fmt(r['s_per_epoch'], '.2f')} s/epoch"
                    + (f" (paper LL {p[0]} ± {p[1]}, RMSE {p[2]} ± {p[3]})" if p else "")
                )
    return lines


def _interval(r: dict[str, Any]) -> str:
    """The 95 % coverage and width of a row's first run (standardised units), where it has them."""
    if "coverage95" not in r:  # a result of a script from before they were scored
        return ""
    return (
        f", coverage95 {_fmt(_first(r['coverage95']), '.3f')}, "
        f"width95 {_fmt(_first(r['width95']), '.3f')}"
    )


def _fmt(value: Any, spec: str = ".1f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


TILED_HEADERS = ["device", "RMSE µT", "const", "cov95", "M", "tiles", "lost", "wall s",
                 "× real time", "upd p95 first/last s"]  # fmt: skip


def markdown(summary: dict[str, Any]) -> str:
    from common import format_table

    env = summary["env"]
    lines = [
        f"# GPU check: {summary['device']}",
        "",
        f"torch {env['torch']} ({env['environment']}; pin {env['torch_pin']}"
        f"{', matched' if env['torch_matches_pin'] else ', not matched'}), python "
        f"{env['python']}, {env['cpu_cores']} CPU cores, commit {env['commit']}"
        f"{' (dirty)' if env['dirty'] else ''}, {env['date']}; {summary['wall_s']:.0f} s of a "
        f"{summary['budget_s']:.0f} s budget",
        "",
        "| section | status | s |",
        "|---|---|---|",
    ]
    for name, s in summary["sections"].items():
        lines.append(f"| {name} | {s.get('status', '')} | {_fmt(s.get('seconds'), '.0f')} |")
    t = summary["tests"]
    lines += [
        "",
        f"CUDA tests: {t.get('passed')} passed, {t.get('failed')} failed, "
        f"{t.get('errors')} errors, {t.get('skipped')} skipped",
    ]
    models = summary["agreement"].get("models", {})
    if models:
        keys = sorted({k for rows in models.values() for k in rows})
        table = []
        for name, rows in models.items():
            cells = []
            for k in keys:
                r = rows.get(k, {})
                cell = f"{_fmt(r.get('mean_rel'), '.0e')} / {_fmt(r.get('var_rel'), '.0e')}"
                if "sensitivity" in r:
                    cell += f" ({_fmt(r['sensitivity'], '.0e')})"
                cells.append("error" if "error" in r else cell)
            table.append([name, *cells])
        lines += [
            "",
            "Agreement with the CPU, max|Δ| / max|CPU| of mean / variance (fitted: in brackets "
            "the CPU's own change when the inputs move by 1e-14 relative):",
            "",
            format_table(["model", *keys], table),
        ]
    u = summary["update_ms"]
    if u.get("M"):
        table = [
            [str(m), _fmt(g), _fmt(c), _fmt(c / g if g and c else None, ".1f")]
            for m, g, c in zip(u["M"], u["gpu"], u["cpu"], strict=True)
        ]
        lines += [
            "",
            f"One VIPS update, N = {u['N']} ({u['what']}), ms:",
            "",
            format_table(["M", "GPU", f"CPU ({u['cpu_threads']} threads)", "CPU / GPU"], table),
        ]
        lines += [f"- {n}" for n in u.get("notes", [])]
        prof = u.get("profile")
        if prof and "error" in prof:
            lines += [f"- profile at M = {prof['M']}: {prof['error']}"]
        elif prof:
            top = ", ".join(f"{name} {ms} ms ×{calls}" for name, ms, calls in prof["top"][:5])
            lines += [
                f"- profile at M = {prof['M']}: {prof['wall_ms']} ms wall, {prof['device_ms']} ms "
                f"of operator time on the {prof['on']}, {prof['host_waits']} host waits "
                f"({prof['item_calls']} .item()), {prof['kernel_launches']} kernel launches; "
                f"phases {prof['phases_ms']}; top: {top}"
            ]
    st = summary["stream"]
    if "gpu" in st:
        table = [
            [
                k,
                str(st[k]["M"]),
                _fmt(st[k]["rmse"], ".2f"),
                _fmt(st[k]["nlpd"], ".2f"),
                _fmt(st[k].get("coverage95"), ".3f"),
                _fmt(st[k].get("width95"), ".1f"),
                _fmt(st[k]["update_s_median"], ".3f"),
                _fmt(st[k]["update_s_total"], ".1f"),
            ]
            for k in ("gpu", "cpu")
            if k in st
        ]
        lines += [
            "",
            "The magnetometer stream (path 3, 20 batches, VIPS δ = 0.095):",
            "",
            format_table(
                [
                    "device",
                    "M",
                    "RMSE µT",
                    "NLPD",
                    "coverage95",
                    "width95 µT",
                    "s/batch median",
                    "s total",
                ],
                table,
            ),
        ]
    tr = summary.get("tiled_replay", {})
    if "gpu" in tr:
        table = []
        for k in ("gpu", "cpu"):
            if k not in tr:
                continue
            r, p95 = tr[k], tr[k]["update_s_p95"]
            table.append([
                k, _fmt(r["rmse"], ".2f"), _fmt(r["baseline"], ".2f"),
                _fmt(r["coverage95"], ".3f"), str(r["M_total"]), str(r["tiles"]),
                str(r["lost_readings"]), _fmt(r["wall_s"], ".0f"),
                _fmt(r["realtime_factor"], ".1f"),
                f"{_fmt(p95['first_5min'], '.2f')} / {_fmt(p95['last_5min'], '.2f')}",
            ])  # fmt: skip
        lines += [
            "",
            f"The office floor through the tiled map (node defaults, {tr['minutes']:g} min at "
            "100 Hz, `benchmarks/building.py --rows tiled`):",
            "",
            format_table(TILED_HEADERS, table),
        ]
        if "cpu_skipped" in tr:
            lines += [f"- cpu: skipped, {tr['cpu_skipped']}"]
    for name, row in summary["rows"].items():
        argv = " ".join(a for a in row.get("argv", []) if not a.endswith(".json") and a != "--json")
        lines += ["", f"{name}: `python {row.get('script')} {argv}` ({row.get('protocol')})"]
        figures = row_figures(name, row.get("result", {}))
        lines += [f"- {f}" for f in figures] or ["- no result (see the section's status)"]
    t = summary["targets"]
    lines += ["", "Targets: " + ", ".join(f"{k} {v}" for k, v in t.items())]
    if summary["cut"]:
        lines += ["", "Cut: " + "; ".join(summary["cut"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="the whole check's time limit in seconds",
    )
    parser.add_argument("--out", default=os.environ.get("OUT") or "out/gpu_check")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument(
        "--only", help="comma-separated sections: " + ",".join(s.name for s in SECTIONS)
    )
    parser.add_argument("--section", help=argparse.SUPPRESS)
    parser.add_argument("--section-out", help=argparse.SUPPRESS)
    parser.add_argument("--section-seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.section:
        return run_section(
            args.section, Path(args.section_out), args.device, args.dry_run, args.section_seconds
        )
    import torch

    if not torch.cuda.is_available() and not args.dry_run:
        print("no CUDA device here: running as a dry run (tiny sizes, CPU against CPU)")
        args.dry_run = True
    summary = summarise(drive(args))
    out_dir = Path(args.out)
    (out_dir / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=_jsonable))
    table = markdown(summary)
    (out_dir / "gpu_check.md").write_text(table)
    print(table)
    print(f"wrote {out_dir / 'gpu_check.json'}, gpu_check.md, gpu_check.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
