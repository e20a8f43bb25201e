"""A known synthetic room for the localizer's tests: its field and a saved ‖B‖ map of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.io.synthetic import make_synthetic_world, simulate_run
from gp_mapper.mapping import MapData, MapperConfig, save_map

WORLD = make_synthetic_world(seed=3)
ROOM_BOX = (0.0, 8.0, 0.0, 6.0)


def write_world_map(path: Path) -> Path:
    """A ‖B‖ map of the world from 50 m of its coverage path (θ fixed: fast), as a map file."""
    mapping = simulate_run(WORLD, 100.0, rate_hz=20.0, seed=1, speed_mps=0.5)
    spec = EngineSpec(fit_iterations=0, lengthscale=0.6, kernel_variance=100.0,
                      noise_variance=0.1, device="cpu")  # fmt: skip
    model = build_model(spec, input_dim=2)
    y = np.linalg.norm(mapping.mag_ut, axis=1)
    for part in np.array_split(np.arange(y.size), 10):
        assert model.update(mapping.position_m[part], y[part]).accepted
    save_map(path, MapData(model.state_dict(), MapperConfig().to_dict(), mapping.position_m[::10],
                           ROOM_BOX, y.size, 0, {}))  # fmt: skip
    return path


def write_world_vector_map(path: Path) -> Path:
    """A map of the world's field vector (``target: vector``, the potential model) from the
    same 50 m of its coverage path, readings in the map frame (θ fixed: fast)."""
    mapping = simulate_run(WORLD, 100.0, rate_hz=20.0, seed=1, speed_mps=0.5)
    # The room's Gaussian bumps are not curl-free, so a potential misses them by ~1 µT per
    # component; σ²_pass says so (without it the map claims 0.3 µT and the filter that trusts
    # it wanders off in some runs).
    spec = EngineSpec(model="potential", kernel="se", fit_iterations=0, lengthscale=0.6,
                      kernel_variance=100.0, noise_variance=0.1, vips_pass_noise_variance=1.0,
                      device="cpu")  # fmt: skip
    model = build_model(spec, input_dim=2)
    field = WORLD.field_at(mapping.position_m)
    rng = np.random.default_rng(2)
    field = field + rng.normal(0.0, 0.3, field.shape)
    for part in np.array_split(np.arange(field.shape[0]), 10):
        assert model.update(mapping.position_m[part], field[part]).accepted
    config = MapperConfig.from_dict({"target": "vector", "model": "potential"}).to_dict()
    save_map(path, MapData(model.state_dict(), config, mapping.position_m[::10], ROOM_BOX,
                           field.shape[0], 0, {}))  # fmt: skip
    return path
