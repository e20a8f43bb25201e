"""Run the authors' stopped Cholesky (SimonBartels/acgp) on given data; a separate process.

This script runs with the reference checkout's own Python (its venv), never with gp_mapper's:
the authors' code stays in its checkout outside this repository and is only imported from there.
It reads the permuted data and θ from an ``.npz``, builds the Matérn-3/2 ARD kernel matrix block
by block with the same formula as ``gp_mapper.engine.core.kernels`` (the expanded squared
distance, clamped at 1e-36 before the square root), runs ``MetaCholesky`` with the ``TorchWrapper``
BLAS calls and a ``StopHook`` (torch backend), and writes one JSON record per relative tolerance:
the block starts at which the bounds were evaluated, the four bounds there, where it stopped, the
accumulated log-determinant and quadratic form, and the wall time of each repeat.

    <ref>/.venv/bin/python benchmarks/reference/acgp_driver.py --reference <ref> \\
        --inputs case.npz --output result.json [--threads 1]

Inputs (``case.npz``): X [N, D] and y [N] (already permuted), lengthscale [D], variance, noise,
block_size, initial_block_size, rel_tols [R], repeats.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

# gp_mapper.engine.core.kernels: sqrt(max(r², 1e-36)) keeps the gradient at r = 0 finite.
R2_FLOOR = 1e-36
SQRT3 = math.sqrt(3.0)
# "as_is": the authors' hook unchanged; "from_m0": without its check at s = 0.
VARIANTS = ("as_is", "from_m0")


def matern32(X: torch.Tensor, X2: torch.Tensor, ls: torch.Tensor, variance: float) -> torch.Tensor:
    """σ² (1 + √3 r) exp(−√3 r) on inputs divided by their lengthscales [N, N2]."""
    A, B = X / ls, X2 / ls
    r2 = (A * A).sum(-1)[:, None] + (B * B).sum(-1)[None, :] - 2.0 * A @ B.mT
    s = SQRT3 * torch.sqrt(torch.clamp(r2, min=R2_FLOOR))
    return variance * (1.0 + s) * torch.exp(-s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="checkout of SimonBartels/acgp")
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # The authors' TorchWrapper calls torch.triangular_solve, deprecated in torch 2; it still works.
    warnings.filterwarnings("ignore", message="torch.triangular_solve is deprecated")
    sys.path.insert(0, str(Path(args.reference) / "src"))
    from acgp.backends.torch_backend import TorchBackend
    from acgp.blas_wrappers.torch_wrapper import TorchWrapper
    from acgp.hooks.stop_hook import StopHook
    from acgp.meta_cholesky import MetaCholesky

    class RecordingStopHook(StopHook):
        """The authors' hook, plus where each check happened and whether it stopped."""

        def __init__(self, *a, skip_first_check: bool = False, **kw) -> None:
            super().__init__(*a, **kw)
            self.skip_first_check = skip_first_check
            self.checked_at: list[int] = []
            self.stopped_at: int | None = None

        def pre_chol(self, idi: int, K_, y_) -> bool:
            # The variant "from_m0" leaves out the authors' check before the first block (s = 0),
            # to compare the rest of the run with gp_mapper's, which checks from s = m0 on.
            if idi == 0 and self.skip_first_check:
                return False
            before = len(self.bound_estimates)
            stop = super().pre_chol(idi, K_, y_)
            if len(self.bound_estimates) > before:
                self.checked_at.append(idi)
            if stop:
                self.stopped_at = idi
            return stop

    case = np.load(args.inputs)
    X = torch.as_tensor(case["X"], dtype=torch.float64)
    y = torch.as_tensor(case["y"], dtype=torch.float64)
    ls = torch.as_tensor(case["lengthscale"], dtype=torch.float64)
    variance, noise = float(case["variance"]), float(case["noise"])
    N = X.shape[0]
    sn2 = torch.as_tensor(noise, dtype=torch.float64)

    def kernel_evaluator(A: torch.Tensor, i0: int, i1: int, j0: int, j1: int) -> None:
        # MetaCholesky's calls: (start row, rows, start column, columns).
        if i0 == j0 and i1 == j1:
            K = matern32(X[i0 : i0 + i1], X[i0 : i0 + i1], ls, variance)
            A[i0 : i0 + i1, i0 : i0 + i1] = K + noise * torch.eye(i1, dtype=torch.float64)
        else:
            A[i0 : i0 + i1, j0 : j0 + j1] = matern32(X[i0 : i0 + i1], X[j0 : j0 + j1], ls, variance)

    records = []
    A = torch.empty(N, N, dtype=torch.float64)  # the authors preallocate N_max × N_max
    for variant in VARIANTS:
        for r in case["rel_tols"].tolist():
            seconds, cpu_seconds = [], []
            for _ in range(int(case["repeats"])):
                chol = MetaCholesky(
                    block_size=int(case["block_size"]),
                    initial_block_size=int(case["initial_block_size"]),
                    blaswrapper=TorchWrapper(),
                )
                alpha = y[:, None].clone()
                hook = RecordingStopHook(
                    N=N,
                    min_noise=sn2,
                    relative_tolerance=r,
                    backend=TorchBackend(),
                    skip_first_check=variant == "from_m0",
                )
                start, cpu = time.perf_counter(), time.process_time()
                with torch.no_grad():
                    chol.run_configuration(
                        A, err=alpha, kernel_evaluator=kernel_evaluator, hook=hook
                    )
                seconds.append(time.perf_counter() - start)
                cpu_seconds.append(time.process_time() - cpu)
            checked = hook.bound_estimates[: len(hook.checked_at)]
            records.append(
                {
                    "variant": variant,
                    "rel_tol": r,
                    "checked_at": hook.checked_at,
                    # (U_D, L_D, U_Q, L_Q) as the hook stores them
                    "bounds": [[float(v) for v in b] for b in checked],
                    "stopped_at": hook.stopped_at,
                    "iteration": int(hook.iteration),
                    "logdet": float(hook.ldet),
                    "quad": float(hook.quad),
                    "seconds": seconds,
                    "cpu_seconds": cpu_seconds,
                }
            )
    Path(args.output).write_text(json.dumps({"N": N, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
