"""speed.py's flop count: the dense linear algebra of a step, each operation by its formula."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from speed import counted_flops, gemm_peak_gflops, primed_engine, synthetic


def test_each_operation_is_counted_by_its_formula() -> None:
    n, k = 60, 7
    a = torch.randn(n, n, dtype=torch.float64)
    spd = a @ a.mT + n * torch.eye(n, dtype=torch.float64)
    b = torch.randn(n, k, dtype=torch.float64)
    L = torch.linalg.cholesky(spd)
    cases = {
        "cholesky": (lambda: torch.linalg.cholesky(spd), n**3 // 3),
        "triangular solve": (lambda: torch.linalg.solve_triangular(L, b, upper=False), n * n * k),
        "cholesky solve": (lambda: torch.cholesky_solve(b, L), 2 * n * n * k),
        "product": (lambda: a @ b, 2 * n * n * k),
        "matrix-vector": (lambda: a @ b[:, 0], 2 * n * n),
        "batched cholesky": (lambda: torch.linalg.cholesky(spd.expand(3, n, n)), 3 * (n**3 // 3)),
        "elementwise": (lambda: torch.exp(a).sqrt(), 0),
    }
    for name, (step, flops) in cases.items():
        assert counted_flops(step) == flops, name


def test_an_update_is_counted_and_grows_with_m() -> None:
    rng = np.random.default_rng(0)
    X, y = (torch.as_tensor(v) for v in synthetic(40, rng))
    counts = []
    for M in (20, 40):
        engine = primed_engine(M, torch.device("cpu"), torch.float64, np.random.default_rng(1))
        counts.append(counted_flops(lambda e=engine: e.update(X, y)))
    assert 0 < counts[0] < counts[1]
    assert gemm_peak_gflops(torch.device("cpu"), torch.float64, repeats=1) > 0.0
