"""Time the VIPS engine against two peers on the same streams, and its cost against M and N.

Side by side (default): on the magnetometer stream (invensense path 3 in 20 time-ordered
batches, Constant(500) + Matérn-5/2, noise 0.1, tested on paths 1, 2, 4, 5) and on one UCI set
(default elevators, fold 0 of the VIPS paper's sorted 5-fold stream, SE(1, 1), noise 0.1),
after every batch:

* ours: ``OnlineSparseGP`` with VIPS (δ = 0.095, the paper's 10 %-RMSE operating point);
* exact: our ``ExactGP`` refitted by L-BFGS on all data seen so far, warm-started from the
  previous batch's θ; above ``--exact-cap`` points it is fitted and conditioned on a random
  subset of that many (said in the table);
* SGPR: GPyTorch's ``InducingPointKernel`` (Titsias' collapsed bound) refitted on all data seen
  so far with M = VIPS's final M (capped at the data seen), inducing inputs re-drawn at random
  from the data each batch and learned, θ warm-started, Adam (lr 0.1) for a fixed number of
  steps (20 by default, to keep the run near 10 min on 2 CPU cores). It predicts with
  GPyTorch's low-rank covariance, whose variance shrinks away from the inducing inputs.
  gpytorch is optional: without it this column is skipped with a message.

All use maximum likelihood (no hyperprior) in float64. The time per batch is the training step
(our ``update``; the exact/SGPR fit), median and total; the ratios are peer / ours. The metrics
are RMSE, NLPD, the 95 % coverage and the mean 95 % interval width (y's predictive: latent
variance plus σ²) after the final batch.

``--sweep``: the cost of one engine update against the number of inducing points M (100 ...
5000, batch N = 500) and against the batch size N (M = 500) on synthetic 8-D data, with M forced
by the FixedSize selector; columns for an update without a hyperparameter fit, one bound
evaluation with its gradient (the cost of one L-BFGS function evaluation) and a full update.
A size whose predicted time exceeds ``--budget`` seconds is skipped with a note. Peak memory:
``torch.cuda.max_memory_allocated`` on CUDA; on the CPU the peak resident set size above the
one before the step (Linux VmHWM, reset through /proc/self/clear_refs, with glibc's mmap
threshold fixed so that freed tensors leave the RSS; tracemalloc cannot see torch's buffers).
The log-log slopes show the O(N M² + M³) shape. Each row also says where the no-fit update's
time goes (the selection, the rest: the bound and the commit, from the update's own report)
and how far it is from the machine's limit: its dense linear algebra counted in flops
(``torch.utils.flop_counter`` with the factorizations and solves added: a Cholesky n³/3, a
triangular solve n² k, a Cholesky solve 2 n² k, a matrix-vector product 2 m n; elementwise
kernel evaluations not counted) over its time, against the float64 GEMM rate of the same
device measured in the same run (a 2048² product on the CPU, 8192² on a GPU, median of 3).

    python benchmarks/speed.py [--uci elevators] [--exact-cap 1000] [--sgpr-steps 20]
        [--sweep] [--budget 120] [--device cpu] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import functools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_run_arguments,
    coverage95,
    data_dir,
    format_table,
    header,
    nlpd,
    rmse,
    warm_up,
    width95,
    write_json,
)
from magnetic_streaming import batches, load, test_set
from uci_data import DATASETS, continual_stream, load_uci, stack

from gp_mapper.engine import (
    Constant,
    ExactGP,
    FixedSize,
    Kernel,
    Matern52,
    OnlineSparseGP,
    SquaredExponential,
    Vips,
    online_bound,
)
from gp_mapper.engine.core.device import resolve_device, set_cpu_threads

SEED = 0
DELTA = 0.095  # the VIPS paper's 10 %-RMSE operating point (App. D.3, Table 7; used in D.4)
NOISE_VARIANCE = 0.1
MAG_CONSTANT_VARIANCE = 500.0  # µT², the VIPS authors' code for App. D.4
EXACT_ITERATIONS = 50  # L-BFGS iterations per exact refit (warm-started)
SGPR_LR = 0.1  # as GPyTorch's SGPR example
# Sweep: sizes from the brief, synthetic inputs N(0, I_8) and an SE lengthscale that keeps the
# kernel matrices far from singular up to M = 5000.
SWEEP_M = (100, 200, 500, 1000, 2000, 5000)
SWEEP_N = (125, 250, 500, 1000, 2000, 4000, 8000)
SWEEP_FIXED_N, SWEEP_FIXED_M = 500, 500
SWEEP_DIM, SWEEP_LENGTHSCALE = 8, 2.0


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


_ATEN = torch.ops.aten


def _batch(shape: tuple[int, ...]) -> int:
    return math.prod(shape[:-2]) if len(shape) > 2 else 1


# The dense linear algebra flop_counter does not count by itself (per call, from the shapes).
FLOP_FORMULAS: dict[Any, Callable[..., int]] = {
    _ATEN.linalg_cholesky_ex: lambda a, *_, **__: _batch(a) * a[-1] ** 3 // 3,
    _ATEN.linalg_solve_triangular: lambda a, b, *_, **__: _batch(b) * a[-1] ** 2 * b[-1],
    _ATEN.cholesky_solve: lambda b, a, *_, **__: 2 * _batch(b) * a[-1] ** 2 * b[-1],
    _ATEN.addmv: lambda _v, m, *_, **__: 2 * m[0] * m[1],
    _ATEN.mv: lambda m, *_, **__: 2 * m[0] * m[1],
}


def counted_flops(step: Callable[[], object]) -> int:
    """The dense linear algebra's flops of ``step()`` (run once under the counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter:
        step()
    return int(counter.get_total_flops())


def gemm_peak_gflops(device: torch.device, dtype: torch.dtype, repeats: int = 3) -> float:
    """The device's rate on one large matrix product [GFLOP/s], median of ``repeats``."""
    n = 8192 if device.type == "cuda" else 2048
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b  # warm
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - start)
    return 2.0 * n**3 / float(np.median(times)) / 1e9


# --------------------------------------------------------------------------- streams
class Stream:
    """Batches, test set and model of one side-by-side case."""

    def __init__(
        self,
        name: str,
        batches: list[tuple[np.ndarray, np.ndarray]],
        Xt: np.ndarray,
        yt: np.ndarray,
        magnetic: bool,
    ) -> None:
        self.name, self.batches, self.Xt, self.yt, self.magnetic = name, batches, Xt, yt, magnetic

    def kernel(self) -> Kernel:
        if self.magnetic:
            return Constant(MAG_CONSTANT_VARIANCE) + Matern52(1.0, 1.0)
        return SquaredExponential(1.0, 1.0)


def magnetic_stream() -> Stream:
    X, y = load(3)
    Xt, yt = test_set()
    return Stream("magnetometer path 3", [(X[s], y[s]) for s in batches(len(y))], Xt, yt, True)


def uci_stream(name: str) -> Stream:
    stream = continual_stream(load_uci(name, data_dir() / "uci"), fold=0, seed=SEED)
    Xt, yt = stack(stream, "test")
    return Stream(f"{name} fold 0", [(b.X_train, b.y_train) for b in stream], Xt, yt, False)


def result(mean, var_y, yt, seconds: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "rmse": rmse(mean, yt),
        "nlpd": nlpd(mean, var_y, yt),
        "coverage95": coverage95(mean, var_y, yt),
        "width95": width95(var_y),
        "seconds": seconds,
        "median_s": float(np.median(seconds)),
        "max_s": float(np.max(seconds)),
        "total_s": float(np.sum(seconds)),
        **extra,
    }


# --------------------------------------------------------------------------- the three methods
def run_vips(stream: Stream, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    engine = OnlineSparseGP(
        stream.kernel(), NOISE_VARIANCE, Vips(DELTA), device=device, dtype=dtype
    )
    seconds, sizes = [], []
    for X, y in stream.batches:
        Xb = torch.as_tensor(X, dtype=dtype, device=device)
        yb = torch.as_tensor(y, dtype=dtype, device=device)
        sync(device)
        start = time.perf_counter()
        report = engine.update(Xb, yb)
        sync(device)
        seconds.append(time.perf_counter() - start)
        sizes.append(engine.num_inducing)
        if not report.accepted:
            print(f"    VIPS batch rejected: {report.reason}", file=sys.stderr)
    mean, var = (t.cpu().numpy() for t in engine.predict(stream.Xt))
    noise = engine.noise_variance
    return result(mean, var + noise, stream.yt, seconds, M=sizes, noise_variance=noise)


def run_exact(stream: Stream, cap: int, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    kernel, raw_noise = stream.kernel(), None
    seen_X: list[np.ndarray] = []
    seen_y: list[np.ndarray] = []
    seconds, used = [], []
    gp = None
    for X, y in stream.batches:
        seen_X.append(X)
        seen_y.append(y)
        Xa, ya = np.concatenate(seen_X), np.concatenate(seen_y)
        if len(ya) > cap:
            idx = np.sort(rng.choice(len(ya), size=cap, replace=False))
            Xa, ya = Xa[idx], ya[idx]
        used.append(len(ya))
        Xb = torch.as_tensor(Xa, dtype=dtype, device=device)
        yb = torch.as_tensor(ya, dtype=dtype, device=device)
        sync(device)
        start = time.perf_counter()
        gp = ExactGP(kernel, NOISE_VARIANCE, Xb, yb)
        if raw_noise is not None:
            with torch.no_grad():
                gp.noise.raw_variance.copy_(raw_noise)
        gp.fit(max_iterations=EXACT_ITERATIONS)
        sync(device)
        seconds.append(time.perf_counter() - start)
        kernel, raw_noise = gp.kernel, gp.noise.raw_variance.detach().clone()
    assert gp is not None
    Xt = torch.as_tensor(stream.Xt, dtype=dtype, device=device)
    mean, var = (t.cpu().numpy() for t in gp.predict(Xt))
    noise = float(gp.noise.variance.detach())
    return result(mean, var + noise, stream.yt, seconds, points=used, noise_variance=noise)


def gpytorch_or_none():
    try:
        import gpytorch
    except ImportError:
        return None
    return gpytorch


def run_sgpr(
    stream: Stream, M: int, steps: int, device: torch.device, dtype: torch.dtype
) -> dict[str, Any]:
    import gpytorch

    class Sgpr(gpytorch.models.ExactGP):
        def __init__(self, X, y, likelihood, base, Z) -> None:
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                base, inducing_points=Z, likelihood=likelihood
            )

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(
                self.mean_module(x), self.covar_module(x)
            )

    if stream.magnetic:
        stationary = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5))
        constant = gpytorch.kernels.ConstantKernel()
        constant.constant = torch.tensor(MAG_CONSTANT_VARIANCE)
        base = stationary + constant
    else:
        stationary = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
        base = stationary
    stationary.outputscale = 1.0
    stationary.base_kernel.lengthscale = 1.0
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    likelihood.noise = NOISE_VARIANCE
    base, likelihood = base.to(device=device, dtype=dtype), likelihood.to(device, dtype)

    rng = np.random.default_rng(SEED)
    seen_X: list[np.ndarray] = []
    seen_y: list[np.ndarray] = []
    seconds, sizes = [], []
    model = None
    with gpytorch.settings.max_cholesky_size(10**7):  # never CG / Lanczos
        for X, y in stream.batches:
            seen_X.append(X)
            seen_y.append(y)
            Xa = torch.as_tensor(np.concatenate(seen_X), dtype=dtype, device=device)
            ya = torch.as_tensor(np.concatenate(seen_y), dtype=dtype, device=device)
            m = min(M, len(ya))
            sizes.append(m)
            Z = Xa[torch.as_tensor(np.sort(rng.choice(len(ya), size=m, replace=False)))].clone()
            sync(device)
            start = time.perf_counter()
            model = Sgpr(Xa, ya, likelihood, base, Z).to(device=device, dtype=dtype)
            model.train()
            likelihood.train()
            optimiser = torch.optim.Adam(model.parameters(), lr=SGPR_LR)
            mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
            for _ in range(steps):
                optimiser.zero_grad()
                loss = -mll(model(Xa), ya)
                loss.backward()
                optimiser.step()
            sync(device)
            seconds.append(time.perf_counter() - start)
        assert model is not None
        model.eval()
        likelihood.eval()
        with torch.no_grad():
            f = model(torch.as_tensor(stream.Xt, dtype=dtype, device=device))
            mean, var = f.mean.cpu().numpy(), f.variance.cpu().numpy()
    noise = float(likelihood.noise.detach())
    return result(mean, var + noise, stream.yt, seconds, M=sizes, noise_variance=noise)


def warm_up_peers(device: torch.device, dtype: torch.dtype, with_sgpr: bool) -> None:
    gen = torch.Generator().manual_seed(SEED)
    X = torch.rand(64, 2, generator=gen, dtype=dtype).to(device)
    y = torch.rand(64, generator=gen, dtype=dtype).to(device)
    ExactGP(SquaredExponential(), NOISE_VARIANCE, X, y).fit(max_iterations=3)
    if with_sgpr:
        tiny = Stream("warm-up", [(X.cpu().numpy(), y.cpu().numpy())], X[:4].cpu().numpy(),
                      y[:4].cpu().numpy(), False)  # fmt: skip
        run_sgpr(tiny, 8, 3, device, dtype)


def side_by_side(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> dict:
    gpytorch = gpytorch_or_none()
    if gpytorch is None:
        print(
            "\nGPyTorch is not installed: the SGPR column is skipped "
            "(pip install gpytorch to add it)."
        )
    else:
        print(f"gpytorch {gpytorch.__version__}")
    warm_up(device, dtype)
    warm_up_peers(device, dtype, gpytorch is not None)
    streams = [magnetic_stream(), uci_stream(args.uci)]
    out: dict[str, Any] = {}
    for stream in streams:
        n_total = sum(len(y) for _, y in stream.batches)
        print(f"{stream.name}: VIPS ...", file=sys.stderr, flush=True)
        res = {"vips": run_vips(stream, device, dtype)}
        M = res["vips"]["M"][-1]
        print(f"{stream.name}: exact ...", file=sys.stderr, flush=True)
        res["exact"] = run_exact(stream, args.exact_cap, device, dtype)
        if gpytorch is not None:
            print(f"{stream.name}: SGPR (M = {M}) ...", file=sys.stderr, flush=True)
            res["sgpr"] = run_sgpr(stream, M, args.sgpr_steps, device, dtype)
        out[stream.name] = res
        capped = n_total > args.exact_cap
        print(
            f"\n## {stream.name}: {len(stream.batches)} batches, {n_total} training points, "
            f"{len(stream.yt)} test points\n"
        )
        labels = {
            "vips": f"ours: VIPS δ={DELTA} (final M {M})",
            "exact": "exact GP, L-BFGS ≤ "
            f"{EXACT_ITERATIONS} it./batch, warm start"
            + (f", capped at {args.exact_cap} random pts" if capped else ", all data"),
            "sgpr": f"GPyTorch SGPR, M {M}, Adam {args.sgpr_steps} steps/batch",
        }
        base = res["vips"]
        rows = []
        for name, r in res.items():
            ratio = (
                "1 (reference)"
                if name == "vips"
                else f"{name} / VIPS = {r['total_s'] / base['total_s']:.1f}x "
                f"(median {r['median_s'] / base['median_s']:.1f}x)"
            )
            rows.append(
                [
                    labels[name],
                    f"{r['rmse']:.4g}",
                    f"{r['nlpd']:.3f}",
                    f"{r['coverage95']:.3f}",
                    f"{r['width95']:.4g}",
                    f"{r['noise_variance']:.3g}",
                    f"{r['median_s']:.3f} / {r['max_s']:.3f}",
                    f"{r['total_s']:.1f}",
                    ratio,
                ]
            )
        print(
            format_table(
                [
                    "method",
                    "RMSE",
                    "NLPD",
                    "coverage95",
                    "width95",
                    "σ²",
                    "s/batch median / max",
                    "s total",
                    "time ratio",
                ],
                rows,
            )
        )
    if gpytorch is None:
        print("\n(SGPR skipped: gpytorch not installed)")
    return out


# --------------------------------------------------------------------------- sweep
# glibc raises its mmap threshold dynamically (up to 32 MiB) after large frees, so freed tensors
# stay in the heap, are reused without touching new pages, and the RSS peak under-counts. A
# fixed threshold (mallopt(M_MMAP_THRESHOLD), which also disables the dynamic rule) maps every
# allocation above it afresh and unmaps it on free.
MMAP_THRESHOLD = 128 * 1024
M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


@functools.cache  # a process-wide glibc setting: once is enough
def _fixed_mmap_threshold() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


class PeakMemory:
    """Peak memory of a block: CUDA allocator peak, or the CPU resident-set high-water mark."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        if device.type == "cuda":
            self.method = "torch.cuda.max_memory_allocated"
        elif _fixed_mmap_threshold():
            self.method = (
                "peak RSS (VmHWM) above the RSS before, glibc mmap threshold fixed at "
                f"{MMAP_THRESHOLD // 1024} KiB so freed tensors leave the RSS"
            )
        else:
            self.method = "peak RSS (VmHWM) above the RSS before; freed memory may be reused"

    @staticmethod
    def _status(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"{field} not in /proc/self/status")

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            try:  # "5" resets the peak RSS (Linux >= 4.0, proc(5))
                Path("/proc/self/clear_refs").write_text("5")
            except OSError:
                self.method = "VmHWM (not resettable: process-wide peak)"
            self.base = self._status("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.base
        else:
            self.peak = self._status("VmHWM") - self.base


def synthetic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, SWEEP_DIM))
    w = rng.standard_normal(SWEEP_DIM) / math.sqrt(SWEEP_DIM)
    return X, np.sin(2.0 * X @ w) + 0.1 * rng.standard_normal(n)


def primed_engine(M: int, device: torch.device, dtype: torch.dtype, rng) -> OnlineSparseGP:
    """An engine holding exactly M inducing points (FixedSize on an M-point first batch)."""
    engine = OnlineSparseGP(
        SquaredExponential(1.0, SWEEP_LENGTHSCALE),
        NOISE_VARIANCE,
        FixedSize(M),
        device=device,
        dtype=dtype,
        max_inducing=M,
        fit_iterations=0,
    )
    report = engine.update(*synthetic(M, rng))
    if not report.accepted:
        raise RuntimeError(f"priming M={M} failed: {report.reason}")
    return engine


def bound_grad_seconds(
    engine: OnlineSparseGP, X: torch.Tensor, y: torch.Tensor, Z: torch.Tensor | None = None
) -> float:
    """One evaluation of the online bound and its gradient (one L-BFGS function evaluation)
    at the engine's θ, on the batch X, y with inducing inputs Z (default: the engine's)."""
    device, dtype = engine.device, engine.dtype
    kernel = copy.deepcopy(engine.kernel)
    for p in kernel.parameters():
        p.requires_grad_(True)
    noise = torch.tensor(engine.noise_variance, dtype=dtype, device=device, requires_grad=True)
    Z = engine.carried.Z if Z is None else Z
    sync(device)
    start = time.perf_counter()
    terms, _ = online_bound(kernel, noise, Z, X, y, engine.carried, engine.jitter)
    (-terms.value).backward()
    sync(device)
    return time.perf_counter() - start


def measure_point(
    M: int, N: int, device: torch.device, dtype: torch.dtype, with_fit: bool
) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    engine = primed_engine(M, device, dtype, rng)
    X, y = (torch.as_tensor(a, dtype=dtype, device=device) for a in synthetic(N, rng))
    row: dict[str, Any] = {"M_target": M, "N": N}

    nofit = copy.deepcopy(engine)
    sync(device)
    with PeakMemory(device) as mem:
        start = time.perf_counter()
        report = nofit.update(X, y)
        sync(device)
        row["update_nofit_s"] = time.perf_counter() - start
    row["peak_nofit_mb"] = mem.peak / 2**20
    row["M"] = report.m_after
    row["memory_method"] = mem.method
    phases = report.as_dict()
    row["select_s"] = float(phases.get("seconds_select", math.nan))
    row["gflop_nofit"] = counted_flops(lambda: copy.deepcopy(engine).update(X, y)) / 1e9
    row["gflops_nofit"] = row["gflop_nofit"] / row["update_nofit_s"]

    row["bound_grad_s"] = bound_grad_seconds(engine, X, y, nofit.carried.Z)

    if with_fit:
        fitted = copy.deepcopy(engine)
        fitted.fit_iterations = 100
        sync(device)
        with PeakMemory(device) as mem:
            start = time.perf_counter()
            report = fitted.update(X, y)
            sync(device)
            row["update_fit_s"] = time.perf_counter() - start
        row["peak_fit_mb"] = mem.peak / 2**20
        row["fit_iterations"] = report.fit_iterations
    return row


def slope(x: list[float], t: list[float]) -> float:
    if len(x) < 2:
        return math.nan
    return float(np.polyfit(np.log(x), np.log(t), 1)[0])


def sweep_one(
    label: str,
    sizes: tuple[int, ...],
    point: Callable[[int, bool], dict[str, Any]],
    power: float,
    budget: float,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run ``point(size, with_fit)`` up the sizes; skip what is predicted to exceed the budget."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    with_fit = True
    for size in sizes:
        if rows:
            grow = (size / rows[-1]["size"]) ** power
            if rows[-1]["update_nofit_s"] * grow > budget:
                notes.append(
                    f"{label}={size} skipped: an update without fit is predicted to take "
                    f"{rows[-1]['update_nofit_s'] * grow:.0f} s > budget {budget:.0f} s"
                )
                break
            if with_fit and rows[-1].get("update_fit_s", 0.0) * grow > budget:
                with_fit = False
                notes.append(
                    f"{label}≥{size}: the full update (with fit) is skipped, predicted "
                    f"{rows[-1]['update_fit_s'] * grow:.0f} s > budget {budget:.0f} s"
                )
        row = point(size, with_fit)
        row["size"] = size
        rows.append(row)
        print(
            f"  {label}={size}: no fit {row['update_nofit_s']:.3f} s, bound+grad "
            f"{row['bound_grad_s']:.3f} s, with fit {row.get('update_fit_s', math.nan):.3f} s",
            file=sys.stderr,
            flush=True,
        )
    return rows, notes


def print_sweep(
    label: str, rows: list[dict[str, Any]], notes: list[str], fixed: str, peak: float
) -> None:
    print(f"\n### against {label} ({fixed})\n")
    table = []
    for r in rows:
        table.append(
            [
                str(r[label]),
                str(r["N"] if label == "M" else r["M"]),
                f"{r['update_nofit_s']:.3f}",
                f"{r['select_s']:.3f}",
                f"{r['gflops_nofit']:.1f} ({100.0 * r['gflops_nofit'] / peak:.1f} %)",
                f"{r['bound_grad_s']:.4f}",
                f"{r['update_fit_s']:.2f} ({r['fit_iterations']} it.)"
                if "update_fit_s" in r
                else "skipped",
                f"{r['peak_nofit_mb']:.0f}",
                f"{r['peak_fit_mb']:.0f}" if "peak_fit_mb" in r else "-",
            ]
        )
    other = "N" if label == "M" else "M"
    print(
        format_table(
            [
                label,
                other,
                "update, no fit (s)",
                "of it selection (s)",
                "GFLOP/s (of peak)",
                "bound + grad (s)",
                "update with fit (s)",
                "peak MB (no fit)",
                "peak MB (fit)",
            ],
            table,
        )
    )
    x = [r[label] for r in rows]
    for key, name in (("update_nofit_s", "update no fit"), ("bound_grad_s", "bound + grad")):
        t = [r[key] for r in rows]
        tail = slice(max(0, len(x) - 3), None)
        print(
            f"log-log slope of {name} against {label}: {slope(x, t):.2f} over all sizes, "
            f"{slope(x[tail], t[tail]):.2f} over the largest three"
        )
    for note in notes:
        print(f"note: {note}")


def sweep(args: argparse.Namespace, requested: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """The sweep on the CPU, and on the ``requested`` device as well when it is a GPU."""
    devices = [torch.device("cpu"), *([requested] if requested.type == "cuda" else [])]
    out: dict[str, Any] = {}
    for device in devices:
        warm_up(device, dtype)
        peak = gemm_peak_gflops(device, dtype)
        print(
            f"\n## scaling of one update on {device}: synthetic N(0, I_{SWEEP_DIM}) inputs, "
            f"SE(1, {SWEEP_LENGTHSCALE}), FixedSize(M) on an engine primed with M points; "
            f"peak memory: {PeakMemory(device).method}; {dtype} GEMM on this device: "
            f"{peak:.1f} GFLOP/s (the peak the GFLOP/s column is a share of)"
        )
        print(f"sweep on {device}: against M", file=sys.stderr, flush=True)
        m_rows, m_notes = sweep_one(
            "M",
            SWEEP_M,
            lambda m, fit, d=device: measure_point(m, SWEEP_FIXED_N, d, dtype, fit),
            3.0,
            args.budget,
        )
        print_sweep("M", m_rows, m_notes, f"N = {SWEEP_FIXED_N}", peak)
        print(f"sweep on {device}: against N", file=sys.stderr, flush=True)
        n_rows, n_notes = sweep_one(
            "N",
            SWEEP_N,
            lambda n, fit, d=device: measure_point(SWEEP_FIXED_M, n, d, dtype, fit),
            1.0,
            args.budget,
        )
        print_sweep("N", n_rows, n_notes, f"M = {SWEEP_FIXED_M}", peak)
        out[str(device)] = {
            "M": m_rows, "N": n_rows, "notes": m_notes + n_notes, "gemm_peak_gflops": peak,
        }  # fmt: skip
    print(
        "\nexpected shape: one bound evaluation is O(N M² + M³), so the slope against M lies "
        "between 2 and 3 and the slope against N tends to 1 once N M² dominates M³; the "
        "no-fit update adds the greedy selection, O((N + M) M²)."
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uci", default="elevators", choices=DATASETS, help="the UCI stream")
    parser.add_argument("--exact-cap", type=int, default=1000, help="exact GP's most points")
    parser.add_argument("--sgpr-steps", type=int, default=20, help="Adam steps per batch")
    parser.add_argument("--sweep", action="store_true", help="the M / N scaling sweep instead")
    parser.add_argument("--budget", type=float, default=120.0, help="sweep: most s per update")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    set_cpu_threads(args.threads)
    device, dtype = resolve_device(args.device), torch.float64
    torch.manual_seed(SEED)
    if args.sweep:
        print(header("engine update cost against M and N", device, dtype, SEED))
        payload: dict[str, Any] = {"sweep": sweep(args, device, dtype)}
    else:
        mag = data_dir() / "magnetic" / "aalto-magnetic-data" / "data" / "invensense"
        if not mag.is_dir() or not (data_dir() / "uci" / args.uci).is_dir():
            print(f"no magnetometer or UCI data under {data_dir()}; set GP_MAPPER_DATA")
            return 2
        print(header("VIPS engine vs exact GP vs GPyTorch SGPR, per batch", device, dtype, SEED))
        payload = {"side_by_side": side_by_side(args, device, dtype)}
    write_json(args.json, {"device": str(device), "threads": torch.get_num_threads(), **payload})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
