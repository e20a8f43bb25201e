"""ACGP's stopped Cholesky side by side with the authors' (SimonBartels/acgp), same data and θ.

Check, then time (a timing means nothing until the results agree): on one permutation, θ, m0, m and
r, run the authors' ``MetaCholesky`` + ``StopHook`` in their own checkout and venv as a separate
process (``benchmarks/reference/acgp_driver.py``; their code is never copied into this repository)
and ``gp_mapper.engine.acgp.stopped_cholesky`` here; compare the block at which each stops, the four
bounds at every block both evaluate, the accumulated log det and quadratic form, and the median wall
time (both single-threaded, both timing the factorisation and the kernel evaluation, the authors'
preallocated N × N buffer not included).

Known differences, by design (``gp_mapper/engine/acgp/bounds.py`` and ``cholesky.py``):
- the authors' hook also checks before the first block (s = 0, nothing factorised yet); ours
  checks from s = m0 on;
- they stop on |𝓤 − 𝓛| / min(|𝓤|, |𝓛|) / 2 < r without the paper's sign test; ours requires
  𝓤 and 𝓛 of one sign (the two rules differ only where the bounds straddle 0);
- ours floors v_j at σ² and clamps ψ − s at 0 (theirs only at N − s); both are no-ops unless
  round-off pushes v_j below σ²;
- after a stop they keep M = s points, ours factorises the stopping block too (M = t).

Setup (outside the repository):
    fetch github:SimonBartels/acgp; git --git-dir=<mirror> archive HEAD | tar -x -C /tmp/acgp_ref
    python -m venv /tmp/acgp_ref/.venv; /tmp/acgp_ref/.venv/bin/pip install torch==2.13.0 numpy

    python benchmarks/acgp_reference.py --reference /tmp/acgp_ref [--dataset pumadyn32nm]
        [--block-size 2048] [--repeats 5] [--json out.json]

Standalone it uses the first shuffle of ``--dataset`` at the initial θ of ``acgp_uci.py`` (no fit),
or the θ of a previous ``acgp_uci.py --json`` run (``--theta-from``); ``acgp_uci.py --reference``
runs it on its own first shuffle at ACGP's fitted θ.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_run_arguments, data_dir, format_table, header, write_json
from uci_data import load_uci, standardised_split

from gp_mapper.engine.acgp import StoppedCholesky, stopped_cholesky
from gp_mapper.engine.core import Kernel, Matern32
from gp_mapper.engine.core.device import set_cpu_threads

DRIVER = Path(__file__).resolve().parent / "reference" / "acgp_driver.py"
# The files of the authors' checkout (github.com/SimonBartels/acgp) that the driver imports.
REFERENCE_MODULES = (
    "src/acgp/meta_cholesky.py",
    "src/acgp/hooks/stop_hook.py",
    "src/acgp/bound_computation.py",
    "src/acgp/blas_wrappers/torch_wrapper.py",
)
# Tolerances compared: a loose one, the paper's synthetic r, a tight one, and 0 (no stop: the
# full factorisation, where both must give torch's exact log det and quadratic form).
REL_TOLS = (0.1, 0.01, 0.001, 0.0)
REPEATS = 5
# The driver runs in a fresh interpreter and may import torch for a while on a busy machine.
DRIVER_TIMEOUT_S = 3600
# Agreement of the bounds where both evaluate a block, in nats per data point: both sum the same
# logs and squares in float64, in another order, and L_D, U_D are differences of terms of size
# N·|log σ²| that can nearly cancel, so a relative difference of the bound itself can look large.
BOUND_ATOL_PER_POINT = 1e-8


class Reference(NamedTuple):
    """Where the authors' checkout is and the Python of its own venv."""

    root: Path
    python: Path


def locate(root: str | None, python: str | None = None) -> Reference | str:
    """The reference checkout, or the reason it cannot run (printed as the skip reason)."""
    if not root:
        return "no --reference DIR given (a checkout of github.com/SimonBartels/acgp)"
    path = Path(root)
    missing = [m for m in REFERENCE_MODULES if not (path / m).is_file()]
    if missing:
        return f"{path} is not a checkout of SimonBartels/acgp (missing {', '.join(missing)})"
    exe = Path(python) if python else path / ".venv" / "bin" / "python"
    if not exe.is_file():
        return f"no Python at {exe}: create the reference venv (see this script's docstring)"
    probe = subprocess.run(
        [str(exe), "-c", "import numpy, torch"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"{exe} cannot import numpy and torch: {probe.stderr.strip().splitlines()[-1:]}"
    return Reference(path, exe)


def run_reference(
    ref: Reference,
    X: np.ndarray,
    y: np.ndarray,
    lengthscale: np.ndarray,
    variance: float,
    noise: float,
    block_size: int,
    rel_tols: tuple[float, ...],
    repeats: int,
    threads: int,
) -> dict[str, Any]:
    """The authors' stopped Cholesky in its own process; the driver's JSON."""
    with tempfile.TemporaryDirectory(prefix="acgp_ref_") as tmp:
        case, out = Path(tmp) / "case.npz", Path(tmp) / "result.json"
        np.savez(
            case,
            X=X,
            y=y,
            lengthscale=lengthscale,
            variance=variance,
            noise=noise,
            block_size=block_size,
            initial_block_size=block_size,
            rel_tols=np.asarray(rel_tols, dtype=np.float64),
            repeats=repeats,
        )
        cmd = [str(ref.python), str(DRIVER), "--reference", str(ref.root), "--inputs", str(case),
               "--output", str(out), "--threads", str(threads)]  # fmt: skip
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"the reference driver failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def run_ours(
    kernel: Kernel,
    noise: float,
    X: torch.Tensor,
    y: torch.Tensor,
    block_size: int,
    rel_tol: float,
    repeats: int,
) -> tuple[StoppedCholesky, list[float], list[float]]:
    """``stopped_cholesky`` with m0 = m, ``repeats`` times; (last run, wall s, CPU s)."""
    seconds, cpu_seconds, run = [], [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        run = stopped_cholesky(
            kernel, noise, X, y, block_size, initial_block_size=block_size, rel_tol=rel_tol
        )
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu)
    assert run is not None
    return run, seconds, cpu_seconds


def relative_difference(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0.0 else abs(a - b) / scale


def compare_record(ours: StoppedCholesky, theirs: dict[str, Any]) -> dict[str, Any]:
    """Stop block, bounds at the common blocks, D and Q; all as plain numbers."""
    mine = {b.s: (b.U_D, b.L_D, b.U_Q, b.L_Q) for b in ours.history}
    their = dict(zip(theirs["checked_at"], theirs["bounds"], strict=True))
    common = sorted(set(mine) & set(their))
    worst = [0.0, 0.0, 0.0, 0.0]
    worst_abs = [0.0, 0.0, 0.0, 0.0]
    for s in common:
        for i, (a, b) in enumerate(zip(mine[s], their[s], strict=True)):
            worst[i] = max(worst[i], relative_difference(a, float(b)))
            worst_abs[i] = max(worst_abs[i], abs(a - float(b)))
    our_stop = ours.last_bounds.s if ours.stopped and ours.last_bounds is not None else None
    # Our D and Q include the stopping block; theirs stop before it. Compare at the full run only.
    return {
        "variant": theirs["variant"],
        "rel_tol": theirs["rel_tol"],
        "stop_ours": our_stop,
        "stop_theirs": theirs["stopped_at"],
        "stop_agrees": our_stop == theirs["stopped_at"],
        "M_ours": ours.num_points,
        "M_theirs": theirs["iteration"],
        "blocks_ours": sorted(mine),
        "blocks_theirs": theirs["checked_at"],
        "blocks_only_theirs": sorted(set(their) - set(mine)),
        "blocks_only_ours": sorted(set(mine) - set(their)),
        "blocks_common": common,
        "max_rel_diff": dict(zip(("U_D", "L_D", "U_Q", "L_Q"), worst, strict=True)),
        "max_abs_diff": dict(zip(("U_D", "L_D", "U_Q", "L_Q"), worst_abs, strict=True)),
        "logdet_ours": ours.logdet,
        "logdet_theirs": theirs["logdet"],
        "quad_ours": ours.quad,
        "quad_theirs": theirs["quad"],
        "signs_at_their_stop": _signs(their, theirs["stopped_at"], ours.n_total),
    }


def _signs(their: dict[int, list[float]], s: int | None, n: int) -> str | None:
    """Whether 𝓛 and 𝓤 had one sign at the authors' stopping block (the test they omit)."""
    if s is None:
        return None
    U_D, L_D, U_Q, L_Q = their[s]
    constant = n * math.log(2.0 * math.pi)
    lower, upper = -0.5 * (U_D + U_Q + constant), -0.5 * (L_D + L_Q + constant)
    return "same" if (lower > 0) == (upper > 0) else "opposite"


def compare_and_print(
    ref: Reference,
    X: np.ndarray,
    y: np.ndarray,
    kernel: Kernel,
    noise: float,
    *,
    block_size: int,
    rel_tols: tuple[float, ...] = REL_TOLS,
    repeats: int = REPEATS,
    threads: int = 1,
) -> dict[str, Any]:
    """Run both on the same permuted data X [N, D], y [N] and θ; print the comparison."""
    spec = kernel.to_spec()
    if spec["type"] != "matern32":
        raise ValueError(f"the driver builds a Matérn-3/2 kernel, got {spec['type']!r}")
    lengthscale = np.broadcast_to(
        np.asarray(spec["lengthscale"], dtype=np.float64), (X.shape[1],)
    ).copy()
    variance = float(spec["variance"])
    theirs = run_reference(
        ref, X, y, lengthscale, variance, noise, block_size, rel_tols, repeats, threads
    )
    Xt = torch.as_tensor(X, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.float64)
    with torch.no_grad():
        exact_L = torch.linalg.cholesky(kernel.K(Xt) + noise * torch.eye(len(y), dtype=Xt.dtype))
        a = torch.linalg.solve_triangular(exact_L, yt[:, None], upper=False)
        exact = {
            "logdet": 2.0 * float(torch.log(torch.diagonal(exact_L)).sum()),
            "quad": float((a * a).sum()),
        }
    rows, records = [], []
    ours_at: dict[float, tuple[StoppedCholesky, list[float], list[float]]] = {}
    for record in theirs["records"]:
        r = record["rel_tol"]
        if r not in ours_at:
            ours_at[r] = run_ours(kernel, noise, Xt, yt, block_size, r, repeats)
        ours, seconds, cpu = ours_at[r]
        out = compare_record(ours, record)
        out["seconds_ours"], out["seconds_theirs"] = seconds, record["seconds"]
        out["cpu_seconds_ours"], out["cpu_seconds_theirs"] = cpu, record["cpu_seconds"]
        ratio = float(np.median(record["seconds"]) / np.median(seconds))
        cpu_ratio = float(np.median(record["cpu_seconds"]) / np.median(cpu))
        out["time_ratio_theirs_over_ours"] = ratio
        out["cpu_ratio_theirs_over_ours"] = cpu_ratio
        records.append(out)
        d, a = out["max_rel_diff"], out["max_abs_diff"]
        rows.append(
            [record["variant"], f"{r:g}", str(out["stop_ours"]), str(out["stop_theirs"]),
             "✓" if out["stop_agrees"] else "✗", f"{out['M_ours']} / {out['M_theirs']}",
             ",".join(map(str, out["blocks_common"])) or "-",
             f"{max(a['U_D'], a['L_D']):.1e} ({max(d['U_D'], d['L_D']):.0e})",
             f"{max(a['U_Q'], a['L_Q']):.1e} ({max(d['U_Q'], d['L_Q']):.0e})",
             f"{np.median(seconds):.2f} / {np.median(cpu):.2f}",
             f"{np.median(record['seconds']):.2f} / {np.median(record['cpu_seconds']):.2f}",
             f"{ratio:.2f} / {cpu_ratio:.2f}"]
        )  # fmt: skip
    print(
        f"N {len(y)}, D {X.shape[1]}, m0 = m = {block_size}, σ² = {noise:.4g}, "
        f"variance {variance:.4g}; {repeats} runs each, median wall / CPU seconds, "
        f"{threads} thread(s). 'as_is': the authors' hook; 'from_m0': without its check at "
        "s = 0. Stop s: the block start where the rule fired (None: no stop); bounds compared "
        "at the blocks both evaluate (|Δ| in nats)\n"
    )
    print(
        format_table(
            ["authors'", "r", "stop s ours", "stop s theirs", "agree", "M ours / theirs",
             "common blocks", "max |Δ| L_D,U_D (rel)", "max |Δ| L_Q,U_Q (rel)", "ours wall/CPU s",
             "theirs wall/CPU s", "theirs/ours wall/CPU"],
            rows,
        )
    )  # fmt: skip
    full = [r for r in records if r["rel_tol"] == 0.0 and r["variant"] == "as_is"]
    if full:
        f = full[0]
        print(
            f"\nr = 0 (every block factorised): log det ours {f['logdet_ours']:.6f}, theirs "
            f"{f['logdet_theirs']:.6f}, dense torch {exact['logdet']:.6f}; quadratic form ours "
            f"{f['quad_ours']:.6f}, theirs {f['quad_theirs']:.6f}, dense {exact['quad']:.6f}"
        )
    for variant in sorted({r["variant"] for r in records}):
        mine = [r for r in records if r["variant"] == variant]
        agree = all(r["stop_agrees"] for r in mine)
        tol = BOUND_ATOL_PER_POINT * len(y)
        close = all(max(r["max_abs_diff"].values()) <= tol for r in mine)
        print(
            f"authors' {variant}: stop block agrees at every r: {'yes' if agree else 'no'}; "
            f"bounds agree within {tol:.1e} nats ({BOUND_ATOL_PER_POINT:g} per point) at every "
            f"common block: {'yes' if close else 'no'}"
        )
    return {"N": len(y), "block_size": block_size, "exact": exact, "records": records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", help="checkout of SimonBartels/acgp (with .venv)")
    parser.add_argument("--reference-python", help="default DIR/.venv/bin/python")
    parser.add_argument("--dataset", default="pumadyn32nm")
    parser.add_argument("--seed", type=int, default=0, help="shuffle (split and permutation)")
    parser.add_argument("--block-size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--theta-from", help="an acgp_uci.py --json file: use its first θ")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    set_cpu_threads(args.threads)
    print(header("ACGP stopped Cholesky vs the authors' (SimonBartels/acgp)", torch.device("cpu"),
                 torch.float64, args.seed))  # fmt: skip
    ref = locate(args.reference, args.reference_python)
    if isinstance(ref, str):
        print(f"skipped: {ref}")
        write_json(args.json, {"skipped": ref})
        return 0
    from acgp_uci import INITIAL_NOISE, matern32_ard  # the UCI protocol's kernel and θ₀

    data = load_uci(args.dataset, data_dir() / "uci")
    split = standardised_split(data, args.seed)
    kernel, noise = matern32_ard(split.X_train.shape[1]), INITIAL_NOISE
    if args.theta_from:
        found = json.loads(Path(args.theta_from).read_text())
        theta = found["datasets"][args.dataset]["acgp"]["hyperparameters"][0]
        kernel = Matern32(theta["kernel_variance"], theta["lengthscale"], ard_dims=len(
            theta["lengthscale"]))  # fmt: skip
        noise = float(theta["noise_variance"])
    for p in kernel.parameters():
        p.requires_grad_(False)
    # The permutation of AdaptiveCholeskyGP.fit with seed = the shuffle.
    perm = torch.randperm(len(split.y_train), generator=torch.Generator().manual_seed(args.seed))
    X, y = split.X_train[perm.numpy()], split.y_train[perm.numpy()]
    result = compare_and_print(
        ref, X, y, kernel, noise, block_size=args.block_size, repeats=args.repeats,
        threads=max(args.threads, 1),
    )  # fmt: skip
    write_json(args.json, {"dataset": args.dataset, "seed": args.seed, **result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
