"""Fixtures for the mapping tests: small configs and a small trained engine."""

from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.engine import EngineSpec, OnlineSparseGP, build_model
from gp_mapper.mapping import MapperConfig

from .synthetic import true_field

# Few L-BFGS iterations keep every engine test at well under a second per update.
FAST_ENGINE = EngineSpec(fit_iterations=5, device="cpu")


@pytest.fixture
def fast_config() -> MapperConfig:
    """A small, fast configuration: windows of 120 samples, a 0.25 m grid over [0, 4]^2."""
    return MapperConfig(
        pose_source="topic",
        batch_size=120,
        resolution=0.25,
        margin=0.5,
        bounds=(0.0, 4.0, 0.0, 4.0),
        engine=FAST_ENGINE,
    )


def trained_engine(input_dim: int, seed: int = 3) -> OnlineSparseGP:
    """An engine after one update on 150 noisy points of the synthetic field."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 4.0, size=(150, input_dim))
    if input_dim == 3:
        X[:, 2] *= 0.1  # a ground robot's sensor height varies by centimetres, not metres
    y = true_field(X[:, :2]) + 0.1 * rng.normal(size=150)
    engine = build_model(FAST_ENGINE, input_dim=input_dim)
    report = engine.update(X, y)
    assert report.accepted, report.reason
    return engine


@pytest.fixture(scope="module")
def engine_2d() -> OnlineSparseGP:
    return trained_engine(2)


@pytest.fixture(scope="module")
def engine_3d() -> OnlineSparseGP:
    return trained_engine(3)
