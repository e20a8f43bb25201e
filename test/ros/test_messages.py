"""ROS messages to and from gp_mapper records and arrays (ros/stamps.py, ros/*_messages.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import MagneticField, PointCloud2, PointField
from visualization_msgs.msg import Marker

from gp_mapper.mapping.occupancy import occupancy_to_values, scale_to_occupancy
from gp_mapper.mapping.records import FieldReading, Pose
from gp_mapper.ros import (
    cloud_messages,
    diagnostic_messages,
    grid_messages,
    input_messages,
    marker_messages,
    stamps,
)
from gp_mapper.ros.errors import ConversionError

pytestmark = pytest.mark.ros

STAMP_NS = 1_700_000_123_456_789_012


def _stamp(stamp_ns: int) -> Time:
    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


# ---------------------------------------------------------------------------- stamps


@pytest.mark.parametrize(
    "stamp_ns", [0, 1, 999_999_999, 1_000_000_000, STAMP_NS, -1, -1_500_000_000]
)
def test_stamp_round_trip(stamp_ns: int) -> None:
    stamp = stamps.ns_to_stamp(stamp_ns)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert stamps.stamp_to_ns(stamp) == stamp_ns


def test_stamp_to_ns_splits_seconds_and_nanoseconds() -> None:
    assert stamps.stamp_to_ns(Time(sec=12, nanosec=34)) == 12_000_000_034


# ---------------------------------------------------------------------------- inputs


def test_field_reading_keeps_tesla_stamp_and_frame() -> None:
    msg = MagneticField()
    msg.header.stamp = _stamp(STAMP_NS)
    msg.header.frame_id = "imu_link"
    msg.magnetic_field.x, msg.magnetic_field.y, msg.magnetic_field.z = 2.1e-5, -3.3e-6, 4.4e-5
    reading = input_messages.field_reading_from_msg(msg)
    assert isinstance(reading, FieldReading)
    assert reading.stamp_ns == STAMP_NS
    assert reading.frame_id == "imu_link"
    assert reading.field_t.dtype == np.float64
    np.testing.assert_array_equal(reading.field_t, [2.1e-5, -3.3e-6, 4.4e-5])


def test_field_reading_passes_nan_through_for_the_pipeline_to_count() -> None:
    msg = MagneticField()
    msg.magnetic_field.x = float("nan")
    reading = input_messages.field_reading_from_msg(msg)
    assert np.isnan(reading.field_t[0])
    assert reading.field_t[1] == 0.0


def _fill_pose(pose: object) -> None:
    pose.position.x, pose.position.y, pose.position.z = 1.5, -2.5, 0.25
    q = pose.orientation
    q.x, q.y, q.z, q.w = 0.0, 0.0, np.sin(0.3), np.cos(0.3)


def _assert_pose(pose: Pose) -> None:
    assert isinstance(pose, Pose)
    assert pose.stamp_ns == STAMP_NS
    np.testing.assert_array_equal(pose.position_m, [1.5, -2.5, 0.25])
    np.testing.assert_array_equal(pose.orientation_xyzw, [0.0, 0.0, np.sin(0.3), np.cos(0.3)])
    assert pose.position_m.dtype == np.float64 and pose.orientation_xyzw.dtype == np.float64


def test_pose_from_pose_stamped() -> None:
    msg = PoseStamped()
    msg.header.stamp = _stamp(STAMP_NS)
    _fill_pose(msg.pose)
    _assert_pose(input_messages.pose_from_pose_stamped(msg))


def test_pose_from_pose_with_covariance() -> None:
    msg = PoseWithCovarianceStamped()
    msg.header.stamp = _stamp(STAMP_NS)
    _fill_pose(msg.pose.pose)
    msg.pose.covariance[0] = 9.0
    _assert_pose(input_messages.pose_from_pose_with_covariance(msg))


def test_pose_from_odometry() -> None:
    msg = Odometry()
    msg.header.stamp = _stamp(STAMP_NS)
    msg.child_frame_id = "base_link"
    _fill_pose(msg.pose.pose)
    _assert_pose(input_messages.pose_from_odometry(msg))


def test_pose_inputs_table_pairs_types_and_converters() -> None:
    assert set(input_messages.POSE_INPUTS) == {
        "pose_stamped",
        "pose_with_covariance",
        "odometry",
    }
    for entry in input_messages.POSE_INPUTS.values():
        msg = entry.msg_type()
        msg.header.stamp = _stamp(STAMP_NS)
        assert entry.convert(msg).stamp_ns == STAMP_NS


# ---------------------------------------------------------------------------- grids


def test_occupancy_grid_fields_and_cell_order() -> None:
    height, width = 3, 4
    data = np.arange(height * width, dtype=np.int8).reshape(height, width)  # data[j, i]
    data[2, 3] = -1
    msg = grid_messages.occupancy_grid(data, (-1.25, 2.5), 0.5, "map", STAMP_NS, z_m=0.3)
    assert isinstance(msg, OccupancyGrid)
    assert msg.header.frame_id == "map"
    assert stamps.stamp_to_ns(msg.header.stamp) == STAMP_NS
    assert stamps.stamp_to_ns(msg.info.map_load_time) == STAMP_NS
    assert msg.info.width == width and msg.info.height == height
    assert msg.info.resolution == pytest.approx(0.5)
    origin = msg.info.origin
    assert (origin.position.x, origin.position.y, origin.position.z) == (-1.25, 2.5, 0.3)
    q = origin.orientation
    assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0)
    assert len(msg.data) == height * width
    # cell (i, j) sits at index j * width + i: (1, 0) next in +x, (0, 1) at index width.
    assert msg.data[0] == data[0, 0]
    assert msg.data[1] == data[0, 1]
    assert msg.data[width] == data[1, 0]
    assert msg.data[2 * width + 3] == -1
    np.testing.assert_array_equal(grid_messages.occupancy_to_array(msg), data)


def test_occupancy_grid_survives_serialization() -> None:
    data = np.array([[1, 98, -1], [50, -1, 7]], dtype=np.int8)
    msg = grid_messages.occupancy_grid(data, (0.0, 0.0), 0.1, "map", STAMP_NS)
    back = deserialize_message(serialize_message(msg), OccupancyGrid)
    np.testing.assert_array_equal(grid_messages.occupancy_to_array(back), data)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (np.zeros(4, dtype=np.int8), "must be \\[H, W\\]"),
        (np.full((2, 2), -2), "-1..100"),
        (np.full((2, 2), 101), "-1..100"),
    ],
)
def test_occupancy_grid_rejects_bad_data(data: np.ndarray, match: str) -> None:
    with pytest.raises(ConversionError, match=match):
        grid_messages.occupancy_grid(data, (0.0, 0.0), 0.1, "map", 0)


def test_occupancy_grid_rejects_non_positive_resolution() -> None:
    with pytest.raises(ConversionError, match="resolution"):
        grid_messages.occupancy_grid(np.zeros((2, 2)), (0.0, 0.0), 0.0, "map", 0)


def test_scale_is_recoverable_through_the_message() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(48.0, 6.0, (6, 9))
    unknown = np.zeros(values.shape, dtype=bool)
    unknown[0, :3] = True
    data, lo, hi = scale_to_occupancy(values, unknown)
    msg = grid_messages.occupancy_grid(data, (0.0, 0.0), 0.1, "map", 0)
    back = deserialize_message(serialize_message(msg), OccupancyGrid)
    grid = grid_messages.occupancy_to_array(back)
    assert grid.min() == -1 and set(np.unique(grid[~unknown])) <= set(range(1, 99))
    assert grid[~unknown].min() == 1 and grid[~unknown].max() == 98
    np.testing.assert_array_equal(grid == -1, unknown)
    recovered = occupancy_to_values(grid, lo, hi)
    assert np.all(np.isnan(recovered[unknown]))
    np.testing.assert_allclose(recovered[~unknown], values[~unknown], atol=(hi - lo) / 194 + 1e-12)


# ---------------------------------------------------------------------------- cloud


def test_field_cloud_round_trip_is_exact_in_float32() -> None:
    rng = np.random.default_rng(1058390)
    height, width = 3, 5
    x = -1.0 + 0.2 * (np.arange(width) + 0.5)
    y = 4.0 + 0.2 * (np.arange(height) + 0.5)
    mean = rng.normal(50.0, 5.0, (height, width))
    variance = rng.uniform(0.1, 3.0, (height, width))
    msg = cloud_messages.field_cloud(x, y, mean, variance, "map", STAMP_NS, z_m=0.7)

    assert msg.header.frame_id == "map"
    assert stamps.stamp_to_ns(msg.header.stamp) == STAMP_NS
    assert (msg.height, msg.width) == (height, width)
    assert [f.name for f in msg.fields] == ["x", "y", "z", "mean", "variance"]
    assert [f.offset for f in msg.fields] == [0, 4, 8, 12, 16]
    assert all(f.datatype == PointField.FLOAT32 and f.count == 1 for f in msg.fields)
    assert msg.point_step == 20 and msg.row_step == 20 * width
    assert not msg.is_bigendian and msg.is_dense
    assert len(msg.data) == height * width * 20

    back = deserialize_message(serialize_message(msg), PointCloud2)
    points = cloud_messages.cloud_to_array(back)
    assert points.shape == (height, width)
    np.testing.assert_array_equal(points["x"], np.broadcast_to(x, (height, width)).astype("f4"))
    np.testing.assert_array_equal(
        points["y"], np.broadcast_to(y[:, None], (height, width)).astype("f4")
    )
    np.testing.assert_array_equal(points["z"], np.float32(0.7))
    np.testing.assert_array_equal(points["mean"], mean.astype(np.float32))
    np.testing.assert_array_equal(points["variance"], variance.astype(np.float32))
    # point j * W + i is cell (i, j), as in the grids
    flat = points.ravel()
    assert flat[width]["x"] == np.float32(x[0]) and flat[width]["y"] == np.float32(y[1])


def test_field_cloud_accepts_full_coordinate_grids_and_flags_non_finite() -> None:
    xx, yy = np.meshgrid([0.5, 1.5], [0.5, 1.5, 2.5])
    mean = np.ones((3, 2))
    mean[1, 1] = np.nan
    msg = cloud_messages.field_cloud(xx, yy, mean, np.ones((3, 2)), "map", 0)
    assert not msg.is_dense
    points = cloud_messages.cloud_to_array(msg)
    np.testing.assert_array_equal(points["x"], xx.astype("f4"))
    assert np.isnan(points["mean"][1, 1])


def test_field_cloud_rejects_mismatched_shapes() -> None:
    with pytest.raises(ConversionError, match="mean and variance"):
        cloud_messages.field_cloud(
            np.zeros(2), np.zeros(3), np.zeros((3, 2)), np.zeros((2, 3)), "map", 0
        )
    with pytest.raises(ConversionError, match="cell centres"):
        cloud_messages.field_cloud(
            np.zeros(3), np.zeros(3), np.zeros((3, 2)), np.zeros((3, 2)), "map", 0
        )


def test_cloud_to_array_honours_padding_and_rejects_truncation() -> None:
    msg = PointCloud2(height=1, width=2, point_step=8, row_step=20, is_bigendian=False)
    msg.fields = [PointField(name="v", offset=4, datatype=PointField.FLOAT32, count=1)]
    row = np.zeros(20, dtype=np.uint8)
    row[4:8] = np.frombuffer(np.float32(1.5).tobytes(), np.uint8)
    row[12:16] = np.frombuffer(np.float32(-2.0).tobytes(), np.uint8)
    msg.data = row.tobytes()
    np.testing.assert_array_equal(cloud_messages.cloud_to_array(msg)["v"], [[1.5, -2.0]])
    msg.data = row[:10].tobytes()
    with pytest.raises(ConversionError, match="bytes"):
        cloud_messages.cloud_to_array(msg)


def test_vector_field_cloud_adds_components_and_their_variances() -> None:
    rng = np.random.default_rng(1058390)
    height, width = 3, 4
    x, y = 0.1 * np.arange(width), 0.1 * np.arange(height)
    field = rng.normal(0.0, 30.0, (height, width, 3))
    field_var = rng.uniform(0.1, 2.0, (height, width, 3))
    norm = np.linalg.norm(field, axis=-1)
    msg = cloud_messages.field_cloud(
        x, y, norm, np.ones((height, width)), "map", STAMP_NS,
        field_mean=field, field_variance=field_var,
    )  # fmt: skip
    assert [f.name for f in msg.fields] == list(cloud_messages.VECTOR_CLOUD_FIELDS)
    assert [f.name for f in msg.fields][5:] == ["bx", "by", "bz", "var_bx", "var_by", "var_bz"]
    assert [f.offset for f in msg.fields] == [4 * k for k in range(11)]
    assert all(f.datatype == PointField.FLOAT32 and f.count == 1 for f in msg.fields)
    assert msg.point_step == 44 and msg.row_step == 44 * width and msg.is_dense
    points = cloud_messages.cloud_to_array(deserialize_message(serialize_message(msg), PointCloud2))
    np.testing.assert_array_equal(points["mean"], norm.astype("f4"))
    for k, axis in enumerate("xyz"):
        np.testing.assert_array_equal(points[f"b{axis}"], field[..., k].astype("f4"))
        np.testing.assert_array_equal(points[f"var_b{axis}"], field_var[..., k].astype("f4"))
    field[1, 2, 1] = np.nan
    assert not cloud_messages.field_cloud(
        x, y, norm, norm, "map", 0, field_mean=field, field_variance=field_var
    ).is_dense
    with pytest.raises(ConversionError, match="come together"):
        cloud_messages.field_cloud(x, y, norm, norm, "map", 0, field_mean=field)
    with pytest.raises(ConversionError, match=r"\[H, W, 3\]"):
        cloud_messages.field_cloud(
            x, y, norm, norm, "map", 0, field_mean=field[..., :2], field_variance=field_var
        )


# ---------------------------------------------------------------------------- markers


def test_inducing_markers_2d_use_grid_height() -> None:
    pts = np.array([[0.0, 1.0], [2.0, -3.0], [4.5, 5.5]])
    array = marker_messages.inducing_markers(pts, "map", STAMP_NS, diameter_m=0.2, z_m=0.4)
    assert len(array.markers) == 1
    m = array.markers[0]
    assert m.header.frame_id == "map"
    assert stamps.stamp_to_ns(m.header.stamp) == STAMP_NS
    assert m.ns == marker_messages.INDUCING_MARKER_NS and m.id == marker_messages.INDUCING_MARKER_ID
    assert m.type == Marker.SPHERE_LIST and m.action == Marker.ADD
    assert (m.scale.x, m.scale.y, m.scale.z) == pytest.approx((0.2, 0.2, 0.2))
    assert m.pose.orientation.w == 1.0
    assert m.color.a == 1.0
    assert m.lifetime.sec == 0 and m.lifetime.nanosec == 0
    got = np.array([[p.x, p.y, p.z] for p in m.points])
    np.testing.assert_array_equal(got, np.column_stack([pts, np.full(3, 0.4)]))


def test_inducing_markers_3d_keep_their_height_and_stable_identity() -> None:
    pts = np.array([[0.0, 1.0, 2.0]])
    first = marker_messages.inducing_markers(pts, "map", 1, diameter_m=0.1).markers[0]
    second = marker_messages.inducing_markers(np.zeros((0, 3)), "map", 2, diameter_m=0.1).markers[0]
    assert (first.points[0].x, first.points[0].y, first.points[0].z) == (0.0, 1.0, 2.0)
    assert (first.ns, first.id) == (second.ns, second.id)
    assert len(second.points) == 0


def test_inducing_markers_reject_bad_shapes() -> None:
    with pytest.raises(ConversionError, match="\\[M, 2\\] or \\[M, 3\\]"):
        marker_messages.inducing_markers(np.zeros((3, 4)), "map", 0, diameter_m=0.1)


def test_delete_all_markers() -> None:
    array = marker_messages.delete_all_markers("map", STAMP_NS)
    assert len(array.markers) == 1
    m = array.markers[0]
    assert m.action == Marker.DELETEALL
    assert m.header.frame_id == "map"
    assert m.ns == marker_messages.INDUCING_MARKER_NS


def _arrow_field(height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell centres of a 0.1 m grid and a field turning with x, its horizontal part growing
    with y: every arrow's direction and length is checkable."""
    x, y = 0.1 * (np.arange(width) + 0.5), 0.1 * (np.arange(height) + 0.5)
    xx, yy = np.meshgrid(x, y)
    strength = 10.0 + 20.0 * yy
    field = np.stack([strength * np.cos(xx), strength * np.sin(xx), np.full_like(xx, -45.0)], -1)
    return x, y, field


def test_arrow_stride_keeps_at_most_the_cap() -> None:
    assert marker_messages.arrow_stride((10, 20)) == 1
    for shape in ((200, 200), (201, 1999), (1, 40000), (7, 9)):
        k = marker_messages.arrow_stride(shape, 400)
        assert -(-shape[0] // k) * -(-shape[1] // k) <= 400
        assert k == 1 or -(-shape[0] // (k - 1)) * -(-shape[1] // (k - 1)) > 400


def test_field_arrows_point_along_the_horizontal_field_on_a_coarse_grid() -> None:
    height, width = 60, 90  # 5400 cells: stride 4, arrows on rows 2, 6, ... and columns 2, 6, ...
    x, y, field = _arrow_field(height, width)
    norm = np.linalg.norm(field, axis=-1)
    known = np.ones((height, width), bool)
    known[:8] = False  # the first two coarse rows are unknown
    array = marker_messages.field_arrows(x, y, field, norm, known, 0.1, "map", STAMP_NS, z_m=0.3)
    first, arrows = array.markers[0], array.markers[1:]
    assert first.action == Marker.DELETEALL and first.ns == marker_messages.ARROW_MARKER_NS
    k = marker_messages.arrow_stride((height, width))
    assert k == 4 and len(arrows) == 13 * 22 <= marker_messages.MAX_ARROWS  # 15 rows less 2 unknown
    assert [m.id for m in arrows] == list(range(len(arrows)))
    lengths = []
    for m in arrows:
        assert (
            m.type == Marker.ARROW
            and m.action == Marker.ADD
            and m.ns == marker_messages.ARROW_MARKER_NS
        )
        assert m.header.frame_id == "map" and stamps.stamp_to_ns(m.header.stamp) == STAMP_NS
        start, end = m.points
        i, j = int(start.x / 0.1), int(start.y / 0.1)  # the cell the arrow starts in
        assert known[j, i] and i % k == k // 2 and j % k == k // 2
        assert (start.x, start.y, start.z, end.z) == pytest.approx((x[i], y[j], 0.3, 0.3))
        d = np.array([end.x - start.x, end.y - start.y])
        np.testing.assert_allclose(
            d / np.linalg.norm(d), field[j, i, :2] / np.hypot(*field[j, i, :2])
        )
        lengths.append((np.linalg.norm(d), np.hypot(*field[j, i, :2])))
        assert m.scale.x < m.scale.y  # shaft thinner than the head
    lengths = np.array(lengths)
    assert lengths[:, 0].max() == pytest.approx(k * 0.1)  # the longest: one coarse cell
    np.testing.assert_allclose(lengths[:, 0] / lengths[:, 1], k * 0.1 / lengths[:, 1].max())
    # coloured by |B|: the strongest cell brightest
    brightness = np.array([m.color.r + m.color.g + m.color.b for m in arrows])
    assert np.argmax(brightness) == np.argmax(lengths[:, 1])


def test_field_arrows_of_an_unknown_map_only_clear_and_shapes_are_checked() -> None:
    x, y, field = _arrow_field(5, 6)
    norm = np.linalg.norm(field, axis=-1)
    none = marker_messages.field_arrows(x, y, field, norm, np.zeros((5, 6), bool), 0.1, "map", 0)
    assert [m.action for m in none.markers] == [Marker.DELETEALL]
    small = marker_messages.field_arrows(x, y, field, norm, np.ones((5, 6), bool), 0.1, "map", 0)
    assert len(small.markers) == 1 + 30  # stride 1: every cell
    with pytest.raises(ConversionError, match="field_arrows"):
        marker_messages.field_arrows(
            x, y, field[..., :2], norm, np.ones((5, 6), bool), 0.1, "map", 0
        )
    with pytest.raises(ConversionError, match="max_arrows"):
        marker_messages.field_arrows(
            x, y, field, norm, np.ones((5, 6), bool), 0.1, "map", 0, 0.0, 0
        )


# ---------------------------------------------------------------------------- diagnostics


def test_diagnostic_array_values_parse_back_exactly() -> None:
    values = {"inducing_points": 17, "mean_lo_ut": 0.1 + 0.2, "device": "cpu", "ok": True}
    msg = diagnostic_messages.diagnostic_array(
        STAMP_NS, "gp_mapper: engine", "cpu", diagnostic_messages.DIAGNOSTIC_WARN, "drops", values
    )
    assert stamps.stamp_to_ns(msg.header.stamp) == STAMP_NS
    assert len(msg.status) == 1
    status = msg.status[0]
    assert status.level == diagnostic_messages.DIAGNOSTIC_WARN
    assert status.name == "gp_mapper: engine"
    assert status.hardware_id == "cpu"
    assert status.message == "drops"
    got = diagnostic_messages.diagnostic_values(msg, "gp_mapper: engine")
    assert got == {
        "inducing_points": "17",
        "mean_lo_ut": repr(0.1 + 0.2),
        "device": "cpu",
        "ok": "True",
    }
    assert float(got["mean_lo_ut"]) == 0.1 + 0.2
    assert diagnostic_messages.diagnostic_values(msg, "other") is None
