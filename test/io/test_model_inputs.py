"""The auxiliary model inputs (yaw, run label, time) and the synthetic heading bias."""

from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.io.bag_convert import SEQUENCE_GAP_S
from gp_mapper.io.heading import yaw_to_quaternion
from gp_mapper.io.model_inputs import auxiliary_columns, run_labels, with_auxiliary_inputs
from gp_mapper.io.synthetic import (
    HEADING_BIAS_SHAPE,
    heading_bias,
    make_synthetic_world,
    simulate_run,
)
from gp_mapper.mapping.inputs import CollectedSamples

NS = 1_000_000_000


def samples(stamps_s: np.ndarray, yaw: np.ndarray) -> CollectedSamples:
    n = len(stamps_s)
    xy = np.column_stack([np.linspace(0.0, 1.0, n), np.zeros(n)])
    return CollectedSamples(
        xy, np.zeros(n), (np.asarray(stamps_s) * NS).astype(np.int64), yaw_to_quaternion(yaw),
        np.empty((0, 2)), {},
    )  # fmt: skip


def test_runs_split_at_the_conversion_gap() -> None:
    # Three runs at 50 Hz laid SEQUENCE_GAP_S apart, as `convert aalto` writes them.
    parts, start = [], 0.0
    for length in (3.0, 1.0, 2.0):
        t = start + np.arange(0.0, length, 0.02)
        parts.append(t)
        start = t[-1] + SEQUENCE_GAP_S
    stamps = np.concatenate(parts)
    labels = run_labels((stamps * NS).astype(np.int64), SEQUENCE_GAP_S)
    expected = np.concatenate([np.full(len(p), float(i)) for i, p in enumerate(parts)])
    np.testing.assert_array_equal(labels, expected)
    with pytest.raises(ValueError, match="gap_s must be positive"):
        run_labels(np.zeros(3, np.int64), 0.0)


def test_columns_in_the_order_asked_and_yaw_from_the_pose() -> None:
    yaw = np.array([0.1, -2.0, 3.0, 1.0])
    s = samples(np.array([10.0, 10.5, 20.0, 20.5]), yaw)
    cols = auxiliary_columns(s, ("yaw", "run", "time"), run_gap_s=5.0)
    np.testing.assert_allclose(cols[:, 0], yaw, atol=1e-12)
    np.testing.assert_array_equal(cols[:, 1], [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(cols[:, 2], [0.0, 0.5, 10.0, 10.5])
    widened = with_auxiliary_inputs(s, ("time",), 5.0)
    assert widened.X.shape == (4, 3) and with_auxiliary_inputs(s, (), 5.0) is s
    with pytest.raises(ValueError, match="unknown auxiliary inputs"):
        auxiliary_columns(s, ("speed",), 5.0)


def test_yaw_falls_back_to_the_direction_of_travel() -> None:
    s = samples(np.arange(20) * 0.1, np.zeros(20))
    s = s._replace(orientation_xyzw=np.full((20, 4), np.nan))  # poses without orientation
    yaw = auxiliary_columns(s, ("yaw",), 5.0)[:, 0]
    np.testing.assert_allclose(yaw, 0.0, atol=1e-9)  # the track runs along +x


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
