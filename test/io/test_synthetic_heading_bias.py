"""The synthetic world's heading bias: added to the norm, off by default."""

from __future__ import annotations

import numpy as np

from gp_mapper.io.synthetic import (
    HEADING_BIAS_SHAPE,
    heading_bias,
    make_synthetic_world,
    simulate_run,
)


def test_heading_bias_is_added_to_the_norm_and_off_by_default() -> None:
    world = make_synthetic_world(0)
    clean = simulate_run(world, 20.0, 10.0, 0, noise_ut=0.0)
    biased = simulate_run(world, 20.0, 10.0, 0, noise_ut=0.0, heading_bias_ut=2.0)
    plain = simulate_run(world, 20.0, 10.0, 0)
    again = simulate_run(world, 20.0, 10.0, 0, heading_bias_ut=0.0)
    np.testing.assert_array_equal(plain.mag_ut, again.mag_ut)
    gained = np.linalg.norm(biased.mag_ut, axis=1) - np.linalg.norm(clean.mag_ut, axis=1)
    np.testing.assert_allclose(gained, heading_bias(clean.heading_rad, 2.0), atol=1e-12)
    # The curve has no constant (it would be a calibration offset) and peaks near 1.4 amplitudes.
    assert HEADING_BIAS_SHAPE[0] == 0.0
    turn = np.linspace(0.0, 2.0 * np.pi, 3601)[:-1]
    assert abs(heading_bias(turn, 1.0).mean()) < 1e-12
    assert 1.0 < np.abs(heading_bias(turn, 1.0)).max() < 2.0
