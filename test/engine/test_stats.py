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
    build_model,
    noise_model_log_likelihood,
)
from gp_mapper.engine.core.hyperprior import LogNormalHyperprior
from gp_mapper.engine.core.kernels import Matern52
from gp_mapper.engine.vips.stats import GroupedStats


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
    engine = build_model(EngineSpec(vips_selector="oips", device="cpu"), input_dim=2)
    assert engine.selector.name == "oips" and engine.hyperprior_scale == 0.5
    with pytest.raises(ValueError, match="selector must be one of"):
        EngineSpec(vips_selector="random")
    with pytest.raises(ValueError, match="lengthscale must be in"):
        EngineSpec(lengthscale=0.0)
    assert engine.jitter == Jitter()  # relative 1e-8 by default
    authors = build_model(EngineSpec(jitter=1e-6, jitter_relative=False, device="cpu"), 2)
    assert authors.jitter == Jitter(1e-6, relative=False)
    with pytest.raises(ValueError, match="absolute jitter must be positive"):
        EngineSpec(jitter=0.0, jitter_relative=False)


def test_grouped_stats_pool_within_group_variance(rng: np.random.Generator) -> None:
    levels = torch.tensor([-22.0, -2.5, -43.0], dtype=torch.float64)
    stats = GroupedStats.empty(3)
    seen: list[torch.Tensor] = []
    for n in (40, 7, 1, 90):
        group = torch.as_tensor(rng.integers(0, 3, n))
        y = levels[group] + torch.as_tensor(rng.normal(0.0, 2.0, n))
        stats = stats.updated(y, group)
        seen.append(torch.stack([y, group.double()], 1))
    allv = torch.cat(seen)
    within = sum(
        float(((allv[allv[:, 1] == g, 0] - allv[allv[:, 1] == g, 0].mean()) ** 2).sum())
        for g in range(3)
    )
    assert stats.count == allv.shape[0]
    assert stats.variance == pytest.approx(within / (allv.shape[0] - 3), rel=1e-12)
    # The levels' spread is not variation of the field: pooled it would be ~300 µT².
    assert stats.variance < 6.0 < float(allv[:, 0].var())
    group = allv[:, 1].long()
    means = torch.tensor([g.mean for g in stats.groups], dtype=torch.float64)
    r = allv[:, 0] - means[group]
    expected = (
        -0.5 * len(r) * math.log(2 * math.pi * stats.variance) - 0.5 * float(r @ r) / stats.variance
    )
    assert stats.log_likelihood(allv[:, 0], group) == pytest.approx(expected, rel=1e-12)


def test_one_group_is_the_running_stats_and_keeps_the_state_format(
    rng: np.random.Generator,
) -> None:
    y = torch.as_tensor(rng.normal(48.0, 12.0, 300))
    single, grouped = RunningStats.empty().updated(y), GroupedStats.empty().updated(y)
    assert grouped.groups == (single,) and grouped.variance == single.variance
    assert grouped.log_likelihood(y) == noise_model_log_likelihood(y, single)
    assert grouped.to_array().shape == (3,)  # the layout of states written before groups
    assert GroupedStats.from_array(grouped.to_array()) == grouped
    three = GroupedStats.empty(3).updated(y, torch.arange(300) % 3)
    assert GroupedStats.from_array(three.to_array()) == three
    with pytest.raises(ValueError, match="need a group per target"):
        three.updated(y)
    with pytest.raises(ValueError, match="malformed"):
        GroupedStats.from_array(np.array([1.0, np.nan, 0.0]))
