"""CUDA against the CPU for every registered model (benchmarks/gpu_agreement.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gpu_agreement import compare

from gp_mapper.engine import model_names

# Float32 arithmetic lands far under 1e-3 of the output's size on either device.
FLOAT32_TOLERANCE = 1e-3
# A fitted model: this close, or within ten times the CPU's own change under a rounding-size
# nudge of the inputs (a fit stopped at a tolerance moves that much on any device).
FITTED_TOLERANCE = 1e-6


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", model_names())
def test_cuda_agrees_with_the_cpu(name: str) -> None:
    fixed = compare(name, "cuda", "float64", "fixed_theta")
    assert fixed["devices"][1].startswith("cuda") and not fixed["rejected"]
    assert fixed["support"][0] == fixed["support"][1]
    assert max(fixed["mean_rel"], fixed["var_rel"]) <= 1e-8, fixed
    fitted = compare(name, "cuda", "float64", "fitted")
    bound = max(FITTED_TOLERANCE, 10.0 * fitted["sensitivity"])
    assert max(fitted["mean_rel"], fitted["var_rel"]) <= bound, fitted
    single = compare(name, "cuda", "float32", "fixed_theta")
    assert max(single["mean_rel"], single["var_rel"]) <= FLOAT32_TOLERANCE, single
