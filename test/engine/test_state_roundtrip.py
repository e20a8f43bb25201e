"""Every state the streaming engine can reach saves and loads back bit for bit.

Randomised over kernels, dtypes and raw parameters across their whole range: past the underflow
of softplus and sigmoid (±800: values exactly on their floor or limit), ±40 (a sigmoid on its
limit in double precision, a softplus a hair above its floor), the middle, and random values
between. A seeded numpy loop stands in for a property-based
test: the same states every run, many of them.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest
import torch

from gp_mapper.engine import OnlineSparseGP
from gp_mapper.engine.core import Constant, Kernel, Matern32, Matern52, SquaredExponential
from gp_mapper.engine.core.noise import NOISE_FLOOR
from gp_mapper.engine.core.transforms import softplus_with_floor

SEED = 20261124
NUM_STATES = 48
EXTREME_RAWS = (-800.0, -40.0, 0.0, 40.0, 800.0)
EXTREME_SHARE = 0.6  # the rest drawn uniformly from RANDOM_RAW_RANGE
RANDOM_RAW_RANGE = 60.0
VARIANCE_MAX = 2000.0  # the VIPS authors' limit on their UCI runs
BATCH = 24

KERNELS: tuple[Callable[[], Kernel], ...] = (
    lambda: Matern52(1.0, 1.0),
    lambda: Constant(500.0) + Matern52(300.0, 0.7),
    lambda: Constant(500.0) + SquaredExponential(1.0, 1.0, variance_max=VARIANCE_MAX),
    lambda: Constant(1.0) + Matern32(1.0, [1.0, 1.0], ard_dims=2),
    lambda: Constant(1.0) * Matern52(1.0, 1.0, active_dims=[0, 1]) + Matern32(active_dims=[1]),
)


def draw_raw(rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    extreme = rng.choice(EXTREME_RAWS, size=shape)
    uniform = rng.uniform(-RANDOM_RAW_RANGE, RANDOM_RAW_RANGE, size=shape)
    return torch.as_tensor(np.where(rng.random(shape) < EXTREME_SHARE, extreme, uniform))


def random_engine(rng: np.random.Generator) -> OnlineSparseGP:
    """An engine in some reachable state: θ anywhere, zero to two batches absorbed."""
    kernel = KERNELS[rng.integers(len(KERNELS))]()
    with torch.no_grad():
        for p in kernel.parameters():
            p.copy_(draw_raw(rng, tuple(p.shape)))
    raw_noise = draw_raw(rng, ())
    noise_variance = float(softplus_with_floor(raw_noise, NOISE_FLOOR))
    engine = OnlineSparseGP(
        kernel,
        noise_variance,
        device="cpu",
        dtype=torch.float32 if rng.random() < 0.25 else torch.float64,
        max_inducing=int(rng.integers(4, 20)),
        fit_iterations=int(rng.choice([0, 0, 3])),
        hyperprior_scale=float(rng.choice([0.0, 1.0])),
    )
    for _ in range(rng.integers(0, 3)):
        X = rng.uniform(0.0, 4.0, size=(BATCH, 2))
        y = 50.0 + np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=BATCH)
        engine.update(X, y)  # a rejected update is a reachable state too
    return engine


def through_npz(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def assert_same_state(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        np.testing.assert_array_equal(a[key], b[key], err_msg=key, strict=True)


@pytest.fixture(scope="module")
def engines() -> list[tuple[int, OnlineSparseGP]]:
    rng = np.random.default_rng(SEED)
    return [(i, random_engine(rng)) for i in range(NUM_STATES)]


def test_the_random_states_reach_floors_limits_and_fitted_maps(engines) -> None:
    """The draw covers what it claims: values on their floors, on the limit, and posteriors."""
    raws = np.concatenate(
        [np.ravel(v) for _, e in engines for k, v in e.state_dict().items() if "raw_" in k]
    )
    assert {-800.0, 800.0} <= set(raws.tolist())
    assert any(e.posterior is not None for _, e in engines)
    assert any(e.dtype == torch.float32 and e.posterior is not None for _, e in engines)
    assert any(e.noise_variance == NOISE_FLOOR for _, e in engines)


def test_every_state_saves_and_loads_bit_for_bit(engines) -> None:
    rng = np.random.default_rng(SEED + 1)
    Xs = rng.uniform(-1.0, 5.0, size=(50, 2))
    for i, engine in engines:
        saved = engine.state_dict()
        loaded = OnlineSparseGP.from_state(through_npz(saved), device="cpu")
        assert_same_state(saved, loaded.state_dict())
        assert loaded.hyperparameters() == engine.hyperparameters(), i
        if engine.posterior is None:
            assert loaded.posterior is None, i
            continue
        for ours, theirs in zip(engine.predict(Xs), loaded.predict(Xs), strict=True):
            assert torch.equal(ours, theirs), f"state {i}: predictions differ"


def test_a_loaded_state_continues_exactly_as_the_original(engines) -> None:
    rng = np.random.default_rng(SEED + 2)
    X = rng.uniform(0.0, 4.0, size=(BATCH, 2))
    y = 50.0 + np.sin(2.0 * X[:, 0]) + 0.1 * rng.normal(size=BATCH)
    for i, engine in engines[:: len(KERNELS)]:
        # Copies through the state, which the test above shows to be exact: the module
        # fixture's engines stay as they are.
        saved = engine.state_dict()
        original = OnlineSparseGP.from_state(saved, device="cpu")
        resumed = OnlineSparseGP.from_state(through_npz(saved), device="cpu")
        a, b = original.update(X, y), resumed.update(X, y)
        assert (a.accepted, a.reason) == (b.accepted, b.reason), i
        assert_same_state(original.state_dict(), resumed.state_dict())
