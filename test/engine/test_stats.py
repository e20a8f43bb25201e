"""Running statistics and the noise model; the hyperprior; the engine spec."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    EngineSpec,
    Jitter,
    RunningStats,
    build_engine,
    noise_model_log_likelihood,
)
from gp_mapper.engine.core.hyperprior import LogNormalHyperprior
from gp_mapper.engine.core.kernels import Matern52


def test_running_stats_equal_direct_statistics(rng: np.random.Generator) -> None:
    chunks = [rng.normal(48.0, 12.0, n) for n in (469, 3, 1, 200)]
    stats = RunningStats.empty()
    for c in chunks:
        stats = stats.updated(torch.as_tensor(c))
    allv = np.concatenate(chunks)
    assert stats.count == allv.size
    assert stats.mean == pytest.approx(allv.mean(), rel=1e-14)
    assert stats.variance == pytest.approx(allv.var(ddof=1), rel=1e-12)


def test_noise_model_uses_statistics_that_include_the_batch(rng: np.random.Generator) -> None:
    y = torch.as_tensor(rng.normal(0.0, 2.0, 50))
    stats = RunningStats.empty().updated(y)
    var = float(y.var())
    expected = float(
        -0.5 * 50 * math.log(2 * math.pi * var) - 0.5 * ((y - y.mean()) ** 2).sum() / var
    )
    assert noise_model_log_likelihood(y, stats) == pytest.approx(expected, rel=1e-12)


def test_hyperprior_peaks_at_its_centre() -> None:
    k = Matern52(100.0, 1.0).double()
    prior = LogNormalHyperprior(0.5, {"matern52_variance": 100.0, "matern52_lengthscale": 1.0})
    at_centre = float(prior.log_density(k))
    with torch.no_grad():
        k.raw_variance.add_(3.0)
    assert at_centre == pytest.approx(0.0, abs=1e-12)
    assert float(prior.log_density(k)) < at_centre


def test_engine_spec_validates_and_builds() -> None:
    engine = build_engine(EngineSpec(selector="oips", device="cpu"), input_dim=2)
    assert engine.selector.name == "oips" and engine.hyperprior_scale == 0.5
    with pytest.raises(ValueError, match="selector must be one of"):
        EngineSpec(selector="random")
    with pytest.raises(ValueError, match="lengthscale must be in"):
        EngineSpec(lengthscale=0.0)
    assert engine.jitter == Jitter()  # relative 1e-8 by default
    authors = build_engine(EngineSpec(jitter=1e-6, jitter_relative=False, device="cpu"), 2)
    assert authors.jitter == Jitter(1e-6, relative=False)
    with pytest.raises(ValueError, match="absolute jitter must be positive"):
        EngineSpec(jitter=0.0, jitter_relative=False)
