"""Snapshot -> published messages: grids, cloud, markers and the occupancy scale."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rclpy.serialization import deserialize_message
from visualization_msgs.msg import Marker

from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.map_products import MapProducts
from gp_mapper.mapping.occupancy import occupancy_to_values
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.ros import cloud_messages, grid_messages, marker_messages, stamps
from gp_mapper.ros.cell_marker import cell_marker_cdr, viridis
from gp_mapper.ros.map_messages import SCALE_KEYS, empty_messages, snapshot_messages

pytestmark = pytest.mark.ros

RATIO = 0.9


@pytest.fixture
def snapshot() -> MapSnapshot:
    grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.25, shape=(4, 6))
    x, y = grid.cell_centres()
    xx, yy = np.meshgrid(x, y)
    mean = 48.0 + 3.0 * np.sin(xx) + 2.0 * yy
    prior = np.full(grid.shape, 10.0)
    variance = np.full(grid.shape, 1.0) + 0.1 * xx**2
    variance[3, 4:] = 9.5  # above RATIO * prior: unknown
    return MapSnapshot(
        seq=3,
        stamp_ns=5_000_000_123,
        grid=grid,
        mean=mean,
        variance=variance,
        prior_variance=prior,
        support_m=np.array([[0.0, 2.5], [0.5, 2.75]]),
        trajectory_m=np.zeros((0, 2)),
        num_samples=100,
    )


def test_grids_carry_geometry_scaling_and_unknown_cells(snapshot: MapSnapshot) -> None:
    products = snapshot_messages(snapshot, frame_id="map", unknown_variance_ratio=RATIO, z_m=0.5)
    unknown = snapshot.unknown(RATIO)
    assert unknown.sum() == 2
    for msg, values, lo_key, hi_key in (
        (products.mean, snapshot.mean, "mean_scale_lo", "mean_scale_hi"),
        (products.variance, snapshot.variance, "variance_scale_lo", "variance_scale_hi"),
    ):
        assert msg.header.frame_id == "map"
        assert stamps.stamp_to_ns(msg.header.stamp) == snapshot.stamp_ns
        assert (msg.info.height, msg.info.width) == snapshot.grid.shape
        assert msg.info.resolution == pytest.approx(0.25)
        assert (msg.info.origin.position.x, msg.info.origin.position.y) == (-1.0, 2.0)
        assert msg.info.origin.position.z == 0.5
        data = grid_messages.occupancy_to_array(msg)
        np.testing.assert_array_equal(data == -1, unknown)
        assert data[~unknown].min() == 1 and data[~unknown].max() == 98
        lo, hi = products.scale[lo_key], products.scale[hi_key]
        assert lo == pytest.approx(values[~unknown].min())
        assert hi == pytest.approx(values[~unknown].max())
        back = occupancy_to_values(data, lo, hi)
        np.testing.assert_allclose(back[~unknown], values[~unknown], atol=(hi - lo) / 194 + 1e-9)
    assert set(products.scale) == set(SCALE_KEYS)


def test_cloud_holds_exact_values_at_cell_centres(snapshot: MapSnapshot) -> None:
    products = snapshot_messages(snapshot, frame_id="map", unknown_variance_ratio=RATIO)
    points = cloud_messages.cloud_to_array(products.field)
    x, y = snapshot.grid.cell_centres()
    assert points.shape == snapshot.grid.shape
    np.testing.assert_array_equal(points["x"][0], x.astype(np.float32))
    np.testing.assert_array_equal(points["y"][:, 0], y.astype(np.float32))
    np.testing.assert_array_equal(points["mean"], snapshot.mean.astype(np.float32))
    np.testing.assert_array_equal(points["variance"], snapshot.variance.astype(np.float32))


def test_the_cloud_holds_the_full_resolution_map_where_there_is_one(
    snapshot: MapSnapshot,
) -> None:
    fine_grid = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.125, shape=(8, 12))
    x, y = fine_grid.cell_centres()
    mean = 48.0 + np.add.outer(y, x)
    fine = MapProducts(fine_grid, mean, mean / 100.0, np.full(fine_grid.shape, 10.0),
                       snapshot.support_m, {})  # fmt: skip
    products = snapshot_messages(
        dataclasses.replace(snapshot, fine=fine), frame_id="map", unknown_variance_ratio=RATIO
    )
    points = cloud_messages.cloud_to_array(products.field)
    assert points.shape == fine_grid.shape  # the cloud is the fine map's
    np.testing.assert_array_equal(points["mean"], mean.astype(np.float32))
    grid = products.mean  # and the grids keep the published grid's cells
    assert (grid.info.height, grid.info.width) == snapshot.grid.shape


def test_markers_hold_the_inducing_points(snapshot: MapSnapshot) -> None:
    products = snapshot_messages(snapshot, frame_id="map", unknown_variance_ratio=RATIO, z_m=0.2)
    (marker,) = products.markers.markers
    assert marker.type == Marker.SPHERE_LIST and marker.action == Marker.ADD
    got = [(p.x, p.y, p.z) for p in marker.points]
    assert got == [(0.0, 2.5, 0.2), (0.5, 2.75, 0.2)]
    assert marker.scale.x == pytest.approx(1.5 * 0.25)


def test_empty_products_clear_every_latched_topic() -> None:
    products = empty_messages("map", 42, 0.1)
    assert (products.mean.info.width, products.mean.info.height) == (0, 0)
    assert len(products.mean.data) == 0 and len(products.variance.data) == 0
    assert products.field.width == 0 and len(products.field.data) == 0
    assert products.markers.markers[0].action == Marker.DELETEALL
    assert all(np.isnan(v) for v in products.scale.values())


def _cells(products: Any) -> Marker:
    return deserialize_message(products.cells, Marker)


def test_cells_are_cubes_one_grid_cell_wide_at_the_known_cells(snapshot: MapSnapshot) -> None:
    products = snapshot_messages(snapshot, frame_id="map", unknown_variance_ratio=RATIO, z_m=0.5)
    cells = _cells(products)
    assert cells.type == Marker.CUBE_LIST and cells.action == Marker.ADD
    assert cells.header.frame_id == "map"
    assert stamps.stamp_to_ns(cells.header.stamp) == snapshot.stamp_ns
    assert (cells.scale.x, cells.scale.y) == (0.25, 0.25)
    known = ~snapshot.unknown(RATIO)
    assert len(cells.points) == len(cells.colors) == int(known.sum())
    x, y = snapshot.grid.cell_centres()
    xx, yy = np.meshgrid(x, y)
    got = np.array([[p.x, p.y, p.z] for p in cells.points])
    np.testing.assert_allclose(got[:, 0], xx[known])
    np.testing.assert_allclose(got[:, 1], yy[known])
    assert np.all(got[:, 2] == 0.5)
    # coloured on the mean's scale: the lowest known cell darkest, the highest brightest
    brightness = np.array([c.r + c.g + c.b for c in cells.colors])
    assert np.argmin(brightness) == np.argmin(snapshot.mean[known])
    assert np.argmax(brightness) == np.argmax(snapshot.mean[known])


def test_cell_size_follows_a_coarsened_grid(snapshot: MapSnapshot) -> None:
    """RViz cannot size a PointCloud2's points; the cells carry the resolution in use."""
    coarse = GridSpec(origin_m=(-1.0, 2.0), resolution_m=0.75, shape=(2, 2))
    field = np.full(coarse.shape, 48.0)
    coarsened = dataclasses.replace(
        snapshot, grid=coarse, mean=field, variance=np.ones(coarse.shape), prior_variance=field
    )
    cells = _cells(snapshot_messages(coarsened, frame_id="map", unknown_variance_ratio=RATIO))
    assert (cells.scale.x, cells.scale.y) == (0.75, 0.75)
    assert len(cells.points) == 4


def test_cell_marker_round_trips_through_rclpy() -> None:
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(7, 3))
    colors = viridis(rng.uniform(size=7))
    for frame in ("map", "m", "a_much_longer_frame"):  # every string-length alignment
        msg = deserialize_message(cell_marker_cdr(centres, colors, 0.3, frame, 10**9 + 7), Marker)
        assert msg.header.frame_id == frame and msg.ns == "field_cells"
        assert stamps.stamp_to_ns(msg.header.stamp) == 10**9 + 7
        np.testing.assert_array_equal([[p.x, p.y, p.z] for p in msg.points], centres)
        np.testing.assert_array_equal([[c.r, c.g, c.b, c.a] for c in msg.colors], colors)
        assert msg.pose.orientation.w == 1.0 and msg.texture_resource == "" and msg.text == ""
    with pytest.raises(ValueError, match="centres"):
        cell_marker_cdr(centres, colors[:3], 0.3, "map", 0)


def test_empty_products_delete_the_cells() -> None:
    cells = _cells(empty_messages("map", 42, 0.1))
    assert cells.action == Marker.DELETE and len(cells.points) == 0


def test_vector_map_adds_components_to_the_cloud_and_arrows(snapshot: MapSnapshot) -> None:
    xx, yy = np.meshgrid(*snapshot.grid.cell_centres())
    field = np.stack([10.0 + xx, 5.0 * yy, np.full_like(xx, -40.0)], axis=-1)
    vector = dataclasses.replace(
        snapshot,
        mean=np.linalg.norm(field, axis=-1),
        field_mean=field,
        field_variance=np.full(field.shape, 0.5),
    )
    products = snapshot_messages(vector, frame_id="map", unknown_variance_ratio=RATIO)
    points = cloud_messages.cloud_to_array(products.field)
    np.testing.assert_array_equal(points["mean"], vector.mean.astype(np.float32))  # |B|
    np.testing.assert_array_equal(points["by"], field[..., 1].astype(np.float32))
    np.testing.assert_array_equal(points["var_bz"], np.float32(0.5))
    assert products.arrows is not None
    clear, *arrows = products.arrows.markers
    assert clear.action == Marker.DELETEALL
    known = ~vector.unknown(RATIO)
    assert len(arrows) == int(known.sum())  # a 4 x 6 grid: an arrow on every known cell
    # A known cell whose horizontal direction is not (its sd above half the arrow's length)
    # gets no arrow: the posterior's mean off the path points somewhere all the same.
    unsure = vector.field_variance.copy()
    unsure[0, 0, :2] = 0.5 * float(np.hypot(*field[0, 0, :2])) ** 2
    assert known[0, 0]
    fewer = snapshot_messages(
        dataclasses.replace(vector, field_variance=unsure), frame_id="map",
        unknown_variance_ratio=RATIO,
    )  # fmt: skip
    assert fewer.arrows is not None and len(fewer.arrows.markers) == len(arrows)
    assert all(m.type == Marker.ARROW and m.header.frame_id == "map" for m in arrows)
    # a scalar map has no arrows; "no map" clears them
    assert snapshot_messages(snapshot, frame_id="map", unknown_variance_ratio=RATIO).arrows is None
    cleared = empty_messages("map", 42, 0.1).arrows
    assert cleared is not None and [m.action for m in cleared.markers] == [Marker.DELETEALL]
    assert cleared.markers[0].ns == marker_messages.ARROW_MARKER_NS
