"""The tile layout: routing, and weights that blend the tiles smoothly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gp_mapper.engine.tiled import ONE_TILE, UNANCHORED, TileLayout, smooth_step

LAYOUT = TileLayout(4.0, 1.0)


def points(n: int = 4000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-9.0, 13.0, (n, 2))


def test_the_weights_are_a_partition_of_unity() -> None:
    xy = points()
    keys = {(i, j) for i in range(-4, 5) for j in range(-4, 5)}
    total = sum(LAYOUT.weight(k, xy) for k in keys)
    np.testing.assert_allclose(total, 1.0, atol=1e-12)
    t = np.linspace(-0.5, 1.5, 101)
    np.testing.assert_allclose(smooth_step(t) + smooth_step(1.0 - t), 1.0, atol=1e-15)


def test_a_reading_goes_to_every_tile_that_weighs_it_and_no_other() -> None:
    xy = points()
    routes = LAYOUT.route(xy)
    counts = np.zeros(len(xy), dtype=int)
    for key, rows in routes.items():
        counts[rows] += 1
        x0, x1, y0, y1 = LAYOUT.reach(key)
        inside = xy[rows]
        assert ((inside[:, 0] >= x0) & (inside[:, 0] <= x1)).all()
        assert ((inside[:, 1] >= y0) & (inside[:, 1] <= y1)).all()
    assert counts.min() >= 1 and counts.max() <= 4
    for key in routes:  # a tile with weight at a point has taken the reading there
        positive = np.flatnonzero(LAYOUT.weight(key, xy) > 0.0)
        assert np.isin(positive, routes[key]).all()


def test_the_weights_change_smoothly_across_an_edge() -> None:
    x = np.linspace(2.0, 6.0, 4001)  # across the edge at x = 4 (overlap 3 .. 5)
    xy = np.column_stack([x, np.full_like(x, 2.0)])
    w = LAYOUT.weight((0, 0), xy)
    assert w[0] == 1.0 and w[-1] == 0.0
    assert np.abs(np.diff(w)).max() < 2e-3  # 1 mm steps: no jump
    np.testing.assert_allclose(w + LAYOUT.weight((1, 0), xy), 1.0, atol=1e-12)


def test_one_infinite_tile_takes_everything_with_weight_one() -> None:
    single = TileLayout(math.inf, 0.0).check()
    xy = points(10)
    assert list(single.route(xy)) == [ONE_TILE]
    np.testing.assert_array_equal(single.weight(ONE_TILE, xy), 1.0)


@pytest.mark.parametrize("size, overlap", [(0.0, 1.0), (4.0, 0.0), (4.0, 2.5)])
def test_a_bad_layout_is_refused(size: float, overlap: float) -> None:
    with pytest.raises(ValueError, match="tile"):
        TileLayout(size, overlap).check()


def test_a_layout_centred_on_a_point_is_the_origin_0_layout_shifted() -> None:
    xy = points()
    centre = np.array([31.3, -7.9])
    centred = TileLayout(4.0, 1.0, UNANCHORED).centred_at(centre)
    assert centred.anchored and not TileLayout(4.0, 1.0, UNANCHORED).anchored
    assert centred.route(centre[None])[(0, 0)].tolist() == [0]
    x0, x1, y0, y1 = centred.reach((0, 0))
    np.testing.assert_allclose([x0 + x1, y0 + y1], 2.0 * centre)  # (0, 0) centred there
    shifted = xy - centred.origin
    for key in [(0, 0), (1, -1), (-2, 3)]:
        np.testing.assert_allclose(centred.weight(key, xy), LAYOUT.weight(key, shifted))
    routes, base = centred.route(xy), LAYOUT.route(shifted)
    assert routes.keys() == base.keys()
    assert all(np.array_equal(routes[k], base[k]) for k in routes)
    with pytest.raises(ValueError, match="no origin"):
        TileLayout(4.0, 1.0, UNANCHORED).route(xy)
