"""Snapshot -> published messages: grids, cloud, markers and the occupancy scale."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from visualization_msgs.msg import Marker

from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.occupancy import occupancy_to_values
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.ros import convert
from gp_mapper.ros.products import SCALE_KEYS, empty_products, snapshot_products

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
    products = snapshot_products(snapshot, frame_id="map", unknown_variance_ratio=RATIO, z_m=0.5)
    unknown = snapshot.unknown(RATIO)
    assert unknown.sum() == 2
    for msg, values, lo_key, hi_key in (
        (products.mean, snapshot.mean, "mean_scale_lo", "mean_scale_hi"),
        (products.variance, snapshot.variance, "variance_scale_lo", "variance_scale_hi"),
    ):
        assert msg.header.frame_id == "map"
        assert convert.stamp_to_ns(msg.header.stamp) == snapshot.stamp_ns
        assert (msg.info.height, msg.info.width) == snapshot.grid.shape
        assert msg.info.resolution == pytest.approx(0.25)
        assert (msg.info.origin.position.x, msg.info.origin.position.y) == (-1.0, 2.0)
        assert msg.info.origin.position.z == 0.5
        data = convert.occupancy_to_array(msg)
        np.testing.assert_array_equal(data == -1, unknown)
        assert data[~unknown].min() == 1 and data[~unknown].max() == 98
        lo, hi = products.scale[lo_key], products.scale[hi_key]
        assert lo == pytest.approx(values[~unknown].min())
        assert hi == pytest.approx(values[~unknown].max())
        back = occupancy_to_values(data, lo, hi)
        np.testing.assert_allclose(back[~unknown], values[~unknown], atol=(hi - lo) / 194 + 1e-9)
    assert set(products.scale) == set(SCALE_KEYS)


def test_cloud_holds_exact_values_at_cell_centres(snapshot: MapSnapshot) -> None:
    products = snapshot_products(snapshot, frame_id="map", unknown_variance_ratio=RATIO)
    points = convert.cloud_to_array(products.field)
    x, y = snapshot.grid.cell_centres()
    assert points.shape == snapshot.grid.shape
    np.testing.assert_array_equal(points["x"][0], x.astype(np.float32))
    np.testing.assert_array_equal(points["y"][:, 0], y.astype(np.float32))
    np.testing.assert_array_equal(points["mean"], snapshot.mean.astype(np.float32))
    np.testing.assert_array_equal(points["variance"], snapshot.variance.astype(np.float32))


def test_markers_hold_the_inducing_points(snapshot: MapSnapshot) -> None:
    products = snapshot_products(snapshot, frame_id="map", unknown_variance_ratio=RATIO, z_m=0.2)
    (marker,) = products.markers.markers
    assert marker.type == Marker.SPHERE_LIST and marker.action == Marker.ADD
    got = [(p.x, p.y, p.z) for p in marker.points]
    assert got == [(0.0, 2.5, 0.2), (0.5, 2.75, 0.2)]
    assert marker.scale.x == pytest.approx(1.5 * 0.25)


def test_empty_products_clear_every_latched_topic() -> None:
    products = empty_products("map", 42, 0.1)
    assert (products.mean.info.width, products.mean.info.height) == (0, 0)
    assert len(products.mean.data) == 0 and len(products.variance.data) == 0
    assert products.field.width == 0 and len(products.field.data) == 0
    assert products.markers.markers[0].action == Marker.DELETEALL
    assert all(np.isnan(v) for v in products.scale.values())
