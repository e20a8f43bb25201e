"""The pass noise: an error that stays the same along a pass is added to the noise, not fitted.

A window covers one pass along the path, so an error constant over that pass (a heading-
dependent calibration residue, a pose offset) looks like field to its fit: the fitted noise
drops to the within-pass level and the lengthscale shortens to follow each pass. A reading on
another pass then falls outside the map's intervals. ``pass_noise_variance`` adds that error
as a fixed variance.
"""

from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.engine import EngineSpec, GaussianNoise, OnlineSparseGP, build_model

PASS_STD = 1.5  # µT: the error shared by every reading of one pass
WHITE_STD = 0.1  # µT: the error of each reading alone
NUM_PASSES = 8
PASS_READINGS = 120
LINES_M = (1.0, 2.0)  # the passes run along x and along y at these offsets (m)
WANDER_M = 0.05  # how far a pass strays from its line (m)
NUM_DRAWS = 40  # passes over the test line, each with its own error
Z95 = 1.959963984540054
SPEC = EngineSpec(device="cpu", fit_iterations=20)


def field(X: np.ndarray) -> np.ndarray:
    """A ~50 µT field with ~1 m structure at [N, 2] points (m)."""
    return 50.0 + 20.0 * np.sin(1.3 * X[:, 0]) * np.cos(0.9 * X[:, 1]) + 5.0 * np.sin(3.0 * X[:, 1])


def passes(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Passes over a 4 m square, alternately along x and y, one window each.

    Passes along the same line wander a few cm apart, as a robot's do, so no two readings
    of different passes share a place: a short lengthscale can follow each pass's error.
    """
    out = []
    s = np.linspace(0.0, 4.0, PASS_READINGS)
    for p in range(NUM_PASSES):
        line = LINES_M[(p // 2) % len(LINES_M)] + WANDER_M * np.sin(2.0 * s + p)
        X = np.column_stack([s, line] if p % 2 == 0 else [line, s])
        y = field(X) + PASS_STD * rng.standard_normal() + WHITE_STD * rng.standard_normal(len(s))
        out.append((X, y))
    return out


def stream(pass_noise: float) -> tuple[OnlineSparseGP, float]:
    """The engine after the passes, and the coverage of its 95 % intervals on new passes."""
    rng = np.random.default_rng(1058390)
    engine = build_model(SPEC.replace(vips_pass_noise_variance=pass_noise), input_dim=2)
    for X, y in passes(rng):
        assert engine.update(X, y).accepted
    # Another pass along a mapped line: the map there averages two passes' errors.
    Xt = np.column_stack([np.linspace(0.2, 3.8, 100), np.full(100, LINES_M[1])])
    mean, var = (t.numpy() for t in engine.predict(Xt))
    sd = np.sqrt(var + engine.noise_variance)
    errors = PASS_STD * rng.standard_normal((NUM_DRAWS, 1))
    y = field(Xt) + errors + WHITE_STD * rng.standard_normal((NUM_DRAWS, len(Xt)))
    return engine, float(np.mean(np.abs(y - mean) <= Z95 * sd))


@pytest.fixture(scope="module")
def white_only() -> tuple[OnlineSparseGP, float]:
    return stream(0.0)


@pytest.fixture(scope="module")
def with_pass() -> tuple[OnlineSparseGP, float]:
    return stream(PASS_STD**2)


def test_the_fit_sees_only_the_within_pass_noise(white_only) -> None:
    engine, coverage = white_only
    # A fraction of the error a reading on another pass carries: the intervals are too narrow.
    assert engine.noise_variance < 0.25 * PASS_STD**2
    assert coverage < 0.85


def test_pass_noise_is_added_to_the_fitted_noise_and_restores_coverage(
    white_only, with_pass
) -> None:
    engine, coverage = with_pass
    fitted = engine.noise_variance - PASS_STD**2
    assert 0.0 < fitted < 0.1 * PASS_STD**2  # the fit leaves the pass error to the setting
    assert coverage >= 0.9
    # No longer asked to follow each pass's error, the lengthscale stays at the field's scale.
    assert (
        engine.hyperparameters()["lengthscale"]
        > 2.0 * white_only[0].hyperparameters()["lengthscale"]
    )


def test_pass_noise_is_not_a_fitted_parameter() -> None:
    noise = GaussianNoise(0.2, pass_variance=1.5)
    assert [name for name, _ in noise.named_parameters()] == ["raw_variance"]
    assert float(noise.variance.detach()) == pytest.approx(1.7)
    assert float(noise.fitted_variance.detach()) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="pass_variance"):
        GaussianNoise(0.2, pass_variance=-1.0)


def test_pass_noise_is_checked_and_survives_a_state_round_trip(with_pass) -> None:
    with pytest.raises(ValueError, match="pass_noise_variance"):
        EngineSpec(vips_pass_noise_variance=-1.0)
    engine = with_pass[0]
    state = engine.state_dict()
    back = OnlineSparseGP.from_state(state, device="cpu")
    assert back.pass_noise_variance == PASS_STD**2
    assert back.noise_variance == engine.noise_variance
    again = back.state_dict()
    assert all(np.array_equal(state[k], again[k]) for k in state)
