"""Map files keep every engine state the engine can reach, bit for bit, through the pipeline.

The states come from the engine's randomised round-trip test: raw θ and noise on their floors,
on the variance limit, and between; with and without a posterior.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.mapping import MapData, MapperConfig, MappingPipeline, load_map, save_map

from ..engine.test_state_roundtrip import assert_same_state, random_engine
from .conftest import FAST_ENGINE

SEED = 20261125
NUM_MAPS = 12


@pytest.fixture(scope="module")
def config() -> MapperConfig:
    return MapperConfig(
        pose_source="topic",
        batch_size=60,
        resolution=0.5,
        bounds=(0.0, 4.0, 0.0, 4.0),
        engine=FAST_ENGINE,
    )


def map_data(state: dict[str, np.ndarray], config: MapperConfig) -> MapData:
    return MapData(
        engine_state=state,
        config=config.to_dict(),
        trajectory_m=np.array([[0.0, 0.0], [4.0, 4.0]]),
        explored_box=(0.0, 4.0, 0.0, 4.0),
        num_samples=48,
        stamp_ns=1_700_000_000_000_000_000,
        drops={},
    )


def test_every_engine_state_survives_save_map_load_and_save(
    config: MapperConfig, tmp_path: Path
) -> None:
    rng = np.random.default_rng(SEED)
    config = config.replace(tile_size=0.0)  # the engine's own state, not wrapped as one tile
    covered = 0
    for i in range(NUM_MAPS):
        engine = random_engine(rng)
        if engine.dtype != torch.float64:
            continue  # the mapper runs in float64; the engine test covers float32
        covered += 1
        state = engine.state_dict()
        written, rewritten = tmp_path / f"map{i}.npz", tmp_path / f"again{i}.npz"
        save_map(written, map_data(state, config))
        pipeline = MappingPipeline(config, background=False)
        pipeline.load(written)
        pipeline.save(rewritten)
        assert_same_state(state, load_map(written).engine_state)
        assert_same_state(state, load_map(rewritten).engine_state)
        if engine.posterior is None:
            continue
        # A second load of the rewritten file draws the same map.
        again = MappingPipeline(config, background=False)
        again.load(rewritten)
        first, second = pipeline.latest(), again.latest()
        assert first is not None and second is not None
        np.testing.assert_array_equal(first.mean, second.mean, strict=True)
        np.testing.assert_array_equal(first.variance, second.variance, strict=True)
    assert covered >= NUM_MAPS // 2
