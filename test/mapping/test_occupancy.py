from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.mapping import (
    OCCUPANCY_MAX,
    OCCUPANCY_MIN,
    OCCUPANCY_UNKNOWN,
    occupancy_to_values,
    scale_to_occupancy,
    unknown_mask,
)
from gp_mapper.mapping.occupancy import ARROW_SD_SHARE, direction_unknown


def test_round_trip_within_half_a_level() -> None:
    rng = np.random.default_rng(11)
    values = 48.0 + 10.0 * rng.normal(size=(30, 40))
    unknown = np.zeros(values.shape, dtype=bool)
    occupancy, lo, hi = scale_to_occupancy(values, unknown)
    assert occupancy.dtype == np.int8
    assert (lo, hi) == (values.min(), values.max())
    assert occupancy.min() == OCCUPANCY_MIN and occupancy.max() == OCCUPANCY_MAX
    recovered = occupancy_to_values(occupancy, lo, hi)
    step = (hi - lo) / (OCCUPANCY_MAX - OCCUPANCY_MIN)
    assert np.max(np.abs(recovered - values)) <= step / 2 + 1e-12


def test_unknown_and_non_finite_cells_are_minus_one() -> None:
    values = np.array([[1.0, 2.0, np.nan], [3.0, np.inf, 5.0]])
    unknown = np.array([[False, True, False], [False, False, False]])
    occupancy, lo, hi = scale_to_occupancy(values, unknown)
    expected_unknown = np.array([[False, True, True], [False, True, False]])
    np.testing.assert_array_equal(occupancy == OCCUPANCY_UNKNOWN, expected_unknown)
    assert (lo, hi) == (1.0, 5.0)  # the scale comes from known cells only
    assert occupancy[0, 0] == OCCUPANCY_MIN and occupancy[1, 2] == OCCUPANCY_MAX
    assert occupancy[1, 0] == OCCUPANCY_MIN + round(0.5 * (OCCUPANCY_MAX - OCCUPANCY_MIN))
    assert np.isnan(occupancy_to_values(occupancy, lo, hi)[expected_unknown]).all()


def test_fixed_scale_clips() -> None:
    values = np.array([[-5.0, 0.0, 2.0, 10.0, 15.0]])
    occupancy, lo, hi = scale_to_occupancy(values, np.zeros_like(values, bool), lo=0.0, hi=10.0)
    assert (lo, hi) == (0.0, 10.0)
    np.testing.assert_array_equal(occupancy[0], [1, 1, 20, 98, 98])  # 1 + rint(97 * 0.2)


def test_constant_layer_and_nothing_known() -> None:
    values = np.full((2, 2), 7.0)
    occupancy, lo, hi = scale_to_occupancy(values, np.zeros((2, 2), bool))
    assert (occupancy == OCCUPANCY_MIN).all() and lo == hi == 7.0
    np.testing.assert_allclose(occupancy_to_values(occupancy, lo, hi), 7.0)

    occupancy, lo, hi = scale_to_occupancy(values, np.ones((2, 2), bool))
    assert (occupancy == OCCUPANCY_UNKNOWN).all() and np.isnan(lo) and np.isnan(hi)


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="match"):
        scale_to_occupancy(np.zeros((2, 2)), np.zeros((2, 3), bool))


def test_unknown_mask_compares_with_the_prior() -> None:
    prior = np.full((1, 4), 500.0)
    variance = np.array([[1.0, 449.0, 451.0, np.nan]])
    np.testing.assert_array_equal(unknown_mask(variance, prior, 0.9), [[False, False, True, True]])


def test_an_arrow_needs_its_horizontal_direction_known() -> None:
    # |(bx, by)| = 5 µT; the horizontal sd sqrt(var_bx + var_by) at 0.4, 0.6 x that, then NaN.
    mean = np.tile([3.0, 4.0, -40.0], (1, 3, 1))
    sd = np.array([0.4, 0.6, np.nan]) * 5.0
    variance = np.stack([sd**2 / 2, sd**2 / 2, np.ones(3)], axis=-1)[None]
    assert ARROW_SD_SHARE == 0.5
    np.testing.assert_array_equal(direction_unknown(mean, variance), [[False, True, True]])
