from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gp_mapper.engine.errors import NotSupportedError
from gp_mapper.engine.model import ScalarOutputs
from gp_mapper.engine.vips.posterior import BLOCK_CUTOFF
from gp_mapper.mapping import GridSpec, extend_box, grid_for, predict_grid


def test_cell_centres_follow_the_occupancy_grid_convention() -> None:
    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.5, shape=(3, 4))
    x, y = grid.cell_centres()
    np.testing.assert_allclose(x, [-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_allclose(y, [2.25, 2.75, 3.25])
    points = grid.cell_points()
    assert points.shape == (12, 2)
    # Cell (i, j) = (column, row) is at index j * W + i.
    np.testing.assert_allclose(points[1 * 4 + 2], [0.25, 2.75])
    assert grid.extent == (-1.0, 1.0, 2.0, 3.5)
    assert (grid.height, grid.width, grid.num_cells) == (3, 4, 12)


def test_world_to_cell_inverts_cell_centres() -> None:
    grid = GridSpec(origin_m=(0.3, -7.1), resolution_m=0.1, shape=(37, 53))
    i, j, valid = grid.world_to_cell(grid.cell_points())
    assert valid.all()
    jj, ii = np.divmod(np.arange(grid.num_cells), grid.width)
    np.testing.assert_array_equal(i, ii)
    np.testing.assert_array_equal(j, jj)


def test_world_to_cell_marks_points_off_the_grid() -> None:
    grid = GridSpec(origin_m=(0.0, 0.0), resolution_m=1.0, shape=(2, 3))
    xy = np.array([[0.0, 0.0], [2.999, 1.999], [3.0, 0.5], [-0.001, 0.5], [0.5, 2.0], [np.nan, 0]])
    i, j, valid = grid.world_to_cell(xy)
    np.testing.assert_array_equal(valid, [True, True, False, False, False, False])
    assert (i[1], j[1]) == (2, 1)


def test_grid_spec_checks() -> None:
    with pytest.raises(ValueError, match="resolution_m"):
        GridSpec((0.0, 0.0), 0.0, (2, 2))
    with pytest.raises(ValueError, match="shape"):
        GridSpec((0.0, 0.0), 1.0, (0, 2))
    with pytest.raises(ValueError, match="origin_m"):
        GridSpec((math.inf, 0.0), 1.0, (2, 2))


def test_grid_for_covers_the_box_plus_margin_on_snapped_edges() -> None:
    box = (0.23, 3.61, -1.07, 0.98)
    grid = grid_for(box, resolution_m=0.1, max_cells=10**6, margin_m=0.5)
    xmin, xmax, ymin, ymax = grid.extent
    assert xmin <= 0.23 - 0.5 + 1e-9 and xmax >= 3.61 + 0.5 - 1e-9
    assert ymin <= -1.07 - 0.5 + 1e-9 and ymax >= 0.98 + 0.5 - 1e-9
    # No more than one extra cell per side beyond what the margin needs.
    assert xmax - xmin < 3.38 + 1.0 + 0.2 + 1e-9
    # Edges on multiples of the resolution: a growing box keeps its cells in place.
    np.testing.assert_allclose(
        np.array(grid.origin_m) / 0.1, np.round(np.array(grid.origin_m) / 0.1)
    )
    bigger = grid_for(extend_box(box, np.array([[5.0, 2.0]])), 0.1, 10**6, 0.5)
    shift = (np.array(bigger.origin_m) - np.array(grid.origin_m)) / 0.1
    np.testing.assert_allclose(shift, np.round(shift), atol=1e-9)


def test_grid_for_a_box_on_cell_edges_adds_no_cell() -> None:
    grid = grid_for((0.0, 4.0, 0.0, 4.0), 0.25, 10**6)
    assert grid.shape == (16, 16) and grid.origin_m == (0.0, 0.0)
    point = grid_for((1.0, 1.0, 2.0, 2.0), 0.5, 10**6)  # a single point, no margin
    assert point.num_cells == 1


def test_grid_for_coarsens_to_stay_within_max_cells() -> None:
    box = (0.0, 100.0, 0.0, 50.0)
    fine = grid_for(box, 0.1, 10**7)
    assert fine.shape == (500, 1000)
    coarse = grid_for(box, 0.1, 20_000)
    assert coarse.num_cells <= 20_000
    factor = coarse.resolution_m / 0.1
    assert factor == pytest.approx(round(factor)) and round(factor) > 1
    # The smallest such multiple: one step finer would not fit.
    finer = grid_for(box, 0.1 * (round(factor) - 1), 10**7)
    assert finer.num_cells > 20_000
    x0, x1, y0, y1 = coarse.extent
    assert x0 <= 0.0 and x1 >= 100.0 and y0 <= 0.0 and y1 >= 50.0


def test_grid_for_checks() -> None:
    with pytest.raises(ValueError, match="box"):
        grid_for((1.0, 0.0, 0.0, 1.0), 0.1, 100)
    with pytest.raises(ValueError, match="resolution_m"):
        grid_for((0.0, 1.0, 0.0, 1.0), -0.1, 100)


def test_extend_box() -> None:
    assert extend_box(None, np.zeros((0, 2))) is None
    box = extend_box(None, np.array([[1.0, 2.0], [-1.0, 5.0]]))
    assert box == (-1.0, 1.0, 2.0, 5.0)
    assert extend_box(box, np.array([[0.0, 0.0]])) == (-1.0, 1.0, 0.0, 5.0)


def test_predict_grid_in_tiles_equals_one_shot_and_the_posterior(engine_2d) -> None:
    grid = GridSpec((0.0, 0.0), 0.3, (9, 11))
    posterior = engine_2d.posterior
    tiled = predict_grid(posterior, grid, tile=7)
    whole = predict_grid(posterior, grid, tile=10_000)
    # Tiles skip inducing points whose correlation with the tile is below BLOCK_CUTOFF of the
    # kernel variance (Posterior.predict_block), so tiles of other sizes, and the dense
    # prediction, agree to a few hundred times that cutoff of the prior variance.
    atol = 1e3 * BLOCK_CUTOFF * float(whole[2].max())
    for a, b in zip(tiled, whole, strict=True):
        assert a.shape == (9, 11) and a.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=atol)
    Xs = torch.as_tensor(grid.cell_points(), dtype=posterior.Z.dtype)
    mean, var = posterior.predict(Xs)
    np.testing.assert_allclose(tiled[0].ravel(), mean.numpy(), rtol=1e-12, atol=atol)
    np.testing.assert_allclose(tiled[1].ravel(), var.numpy(), rtol=1e-12, atol=atol)
    assert np.all(tiled[1] <= tiled[2] * (1 + 1e-9))  # data only ever reduces the variance


def test_predict_grid_with_three_dimensional_inputs_uses_z(engine_3d) -> None:
    grid = GridSpec((0.0, 0.0), 0.5, (4, 4))
    posterior = engine_3d.posterior
    mean, _, _ = predict_grid(posterior, grid, z=1.5, tile=5)
    points = np.column_stack([grid.cell_points(), np.full(16, 1.5)])
    expected, _ = posterior.predict(torch.as_tensor(points, dtype=posterior.Z.dtype))
    np.testing.assert_allclose(mean.ravel(), expected.numpy(), rtol=1e-12)
    other, _, _ = predict_grid(posterior, grid, z=3.5)
    assert not np.allclose(mean, other)


def test_predict_grid_checks(engine_2d) -> None:
    with pytest.raises(ValueError, match="tile"):
        predict_grid(engine_2d.posterior, GridSpec((0.0, 0.0), 1.0, (2, 2)), tile=0)


class _PlainPosterior(ScalarOutputs):
    """The grid's view of a scalar posterior with no extra layers."""

    support = torch.zeros((1, 2), dtype=torch.float64)


class _LayeredPosterior(_PlainPosterior):
    """A posterior with extra layers: x and y themselves, so each cell's value is checkable."""

    def layers(self, Xs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"coarse_mean": Xs[:, 0], "detail_variance": Xs[:, 1] ** 2}


def test_extra_layers_are_predicted_per_cell_across_tiles() -> None:
    from gp_mapper.mapping.grid import predict_grid_layers

    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.5, shape=(7, 9))
    layers = predict_grid_layers(_LayeredPosterior(), grid, tile=4)  # 2 x 2 tiles, ragged edges
    x, y = grid.cell_centres()
    np.testing.assert_array_equal(layers["coarse_mean"], np.tile(x, (7, 1)))
    np.testing.assert_array_equal(layers["detail_variance"], np.tile(y[:, None] ** 2, (1, 9)))
    assert predict_grid_layers(_PlainPosterior(), grid) == {}  # none without layers


class _FieldPosterior:
    """A vector posterior whose field is (x, y, x y) with covariance diag(1, 2, 3) + x: each
    cell's components and variances are checkable."""

    support = torch.zeros((1, 2), dtype=torch.float64)
    target = "vector"

    def predict_field(self, Xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = Xs[:, 0], Xs[:, 1]
        mean = torch.stack([x, y, x * y], dim=1)  # [S, 3]
        diag = torch.tensor([1.0, 2.0, 3.0], dtype=Xs.dtype) + x[:, None]
        cov = torch.diag_embed(diag) + 0.5  # off-diagonal terms the variances must ignore
        return mean, cov

    def predict_block_with_field(self, Xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mean, cov = self.predict_field(Xs)
        return mean.norm(dim=1), cov.sum((1, 2)), mean, cov

    def prior_variance(self, Xs: torch.Tensor) -> torch.Tensor:
        return torch.ones(Xs.shape[0], dtype=Xs.dtype)


def test_field_components_are_predicted_per_cell_across_tiles() -> None:
    from gp_mapper.mapping.grid import predict_grid_with_field

    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.5, shape=(7, 9))
    # 2 x 2 tiles, ragged edges
    *_, mean, var = predict_grid_with_field(_FieldPosterior(), grid, tile=4)
    assert mean.shape == var.shape == (7, 9, 3)
    xx, yy = np.meshgrid(*grid.cell_centres())
    np.testing.assert_array_equal(mean, np.stack([xx, yy, xx * yy], axis=-1))
    np.testing.assert_array_equal(var, np.stack([xx + 1.5, xx + 2.5, xx + 3.5], axis=-1))
    with pytest.raises(NotSupportedError):  # a scalar posterior has none
        predict_grid_with_field(_LayeredPosterior(), grid)


def test_a_field_predicted_every_few_cells_is_interpolated_onto_every_cell() -> None:
    from gp_mapper.mapping.grid import predict_grid_map, predict_grid_map_every

    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.25, shape=(13, 17))
    full = predict_grid_map(_FieldPosterior(), grid, tile=16, full_covariance=True)
    for layer, same in zip(
        full,
        predict_grid_map_every(_FieldPosterior(), grid, 1, tile=16, full_covariance=True),
        strict=True,
    ):
        np.testing.assert_array_equal(layer, same)  # stride 1: every cell predicted
    every = predict_grid_map_every(_FieldPosterior(), grid, 3, tile=16, full_covariance=True)
    *_, mean, cov = every
    assert mean.shape == (13, 17, 3) and cov.shape == (13, 17, 3, 3)
    # The field (x, y, x y) and its covariance are bilinear: exact on every cell, the edges
    # too (the coarse centres lie on cells 0, 3, ..., the last at or past the grid's edge) ...
    np.testing.assert_allclose(mean, full[3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(cov, full[4], rtol=0, atol=1e-12)
    # ... while ‖B‖ (not bilinear) is interpolated, not predicted, between them.
    assert not np.allclose(every[0], full[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(every[0][::3, ::3], full[0][::3, ::3], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="stride"):
        predict_grid_map_every(_FieldPosterior(), grid, 0)
