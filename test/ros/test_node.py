"""A real gp_mapper node fed a known synthetic field over DDS.

Checks what a user sees: the grids, cloud and markers arrive with the right shapes, frames,
scaling and unknown cells; the map error falls as data arrives; save, reset and load give
back the same map; parameters are validated; every kind of bad input is counted and
survived.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")

from rclpy.context import Context
from rclpy.parameter import Parameter
from visualization_msgs.msg import Marker

from gp_mapper.mapping.occupancy import occupancy_to_values
from gp_mapper.ros import cloud_messages, diagnostic_messages, grid_messages, marker_messages

from .helpers import Spinner, wait_for
from .mapper_harness import (
    EXTENT,
    FIELD_DIRECTION,
    PACE_S,
    T0_NS,
    MapperHarness,
    harness,
    mag_msg,
    path,
    pose_msg,
    true_field,
)

pytestmark = pytest.mark.ros

WINDOW = 100  # = batch_size of the harness
# Grid of the harness: bounds [-2.5, 7.5] x [-2.5, 2.5] at 0.25 m.
GRID_W, GRID_H = 40, 20


@pytest.fixture
def mapper(ros_context: Context, spinner: Spinner, tmp_path: Path) -> Iterator[MapperHarness]:
    parameters = {"map_path": str(tmp_path / "maps" / "map.npz"), "expected_frame": "imu_link"}
    with harness(ros_context, spinner, parameters) as h:
        yield h


def test_products_arrive_with_shapes_frames_scaling_and_unknown_cells(
    mapper: MapperHarness,
) -> None:
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    first_error = mapper.rmse(mapper.cloud())
    first_unknown = int((grid_messages.occupancy_to_array(mapper.latest("mean")) == -1).sum())

    for block in range(2, 6):
        mapper.feed(WINDOW)
        diag = mapper.wait_samples(block * WINDOW)
    cloud = mapper.cloud()
    last_error = mapper.rmse(cloud)
    # the map improves as data arrives, and ends close to the truth
    assert last_error < 0.5 * first_error
    assert last_error < 1.5

    mean = mapper.latest("mean")
    variance = mapper.latest("variance")
    for grid in (mean, variance):
        assert grid.header.frame_id == "map"
        assert (grid.info.width, grid.info.height) == (GRID_W, GRID_H)
        assert grid.info.resolution == pytest.approx(0.25)
        assert (grid.info.origin.position.x, grid.info.origin.position.y) == (-2.5, -2.5)
        assert grid.info.origin.orientation.w == 1.0
    mean_cells = grid_messages.occupancy_to_array(mean)
    var_cells = grid_messages.occupancy_to_array(variance)
    unknown = mean_cells == -1
    np.testing.assert_array_equal(var_cells == -1, unknown)
    assert mean_cells[~unknown].min() >= 1 and mean_cells[~unknown].max() <= 98
    # the walk stays in |x| <= 1.8 m: cells past x = 5 m are unknown, its centre is known
    x_centres = -2.5 + 0.25 * (np.arange(GRID_W) + 0.5)
    assert unknown[:, x_centres > 5.0].all()
    assert not unknown[GRID_H // 2, GRID_W // 3]
    assert 0 < unknown.sum() < first_unknown

    # cell (i, j) of the grid is point j * W + i of the cloud
    assert cloud.shape == (GRID_H, GRID_W)
    np.testing.assert_allclose(cloud["x"][0], x_centres, atol=1e-6)
    assert mapper.latest("field").header.frame_id == "map"
    # the scale in /diagnostics recovers the grid values to within half a level
    lo, hi = float(diag["mean_scale_lo"]), float(diag["mean_scale_hi"])
    recovered = occupancy_to_values(mean_cells, lo, hi)
    np.testing.assert_allclose(
        recovered[~unknown], cloud["mean"][~unknown], atol=(hi - lo) / 194 + 1e-4
    )
    vlo, vhi = float(diag["variance_scale_lo"]), float(diag["variance_scale_hi"])
    np.testing.assert_allclose(
        occupancy_to_values(var_cells, vlo, vhi)[~unknown],
        cloud["variance"][~unknown],
        atol=(vhi - vlo) / 194 + 1e-6,
    )

    (marker,) = mapper.latest("markers").markers
    assert marker.header.frame_id == "map"
    assert marker.type == Marker.SPHERE_LIST and marker.action == Marker.ADD
    assert len(marker.points) == int(diag["inducing_points"]) > 0
    xy = np.array([[p.x, p.y] for p in marker.points])
    assert np.all(np.abs(xy) <= EXTENT + 0.5)

    assert diag["device"] == "cpu"
    assert diag["map_frame"] == "map"
    for key in ("last_batch_latency_s", "pending_windows", "drops_total", "drop_nan"):
        assert key in diag
    assert int(diag["drops_total"]) == int(diag["drop_duplicate"])  # clean input


def test_save_reset_load_restores_the_same_map(mapper: MapperHarness, tmp_path: Path) -> None:
    mapper.feed(2 * WINDOW)
    mapper.wait_samples(2 * WINDOW)
    saved = mapper.cloud()
    saved_mean = grid_messages.occupancy_to_array(mapper.latest("mean"))

    reply = mapper.call("save_map")
    assert reply.success, reply.message
    assert (tmp_path / "maps" / "map.npz").is_file()

    n_mean, n_markers = (
        mapper.sink.count(mapper.topics["mean"]),
        mapper.sink.count(mapper.topics["markers"]),
    )
    reply = mapper.call("reset")
    assert reply.success and "reset" in reply.message
    empty = mapper.wait_new("mean", n_mean)
    assert (empty.info.width, empty.info.height) == (0, 0)
    markers = mapper.wait_new("markers", n_markers)
    assert markers.markers[0].action == Marker.DELETEALL
    wait_for(lambda: mapper.diagnostics()["samples"] == "0", what="an empty map")

    n_field = mapper.sink.count(mapper.topics["field"])
    reply = mapper.call("load_map")
    assert reply.success, reply.message
    mapper.wait_new("field", n_field)
    loaded = mapper.cloud()
    np.testing.assert_array_equal(loaded["x"], saved["x"])
    np.testing.assert_allclose(loaded["mean"], saved["mean"], rtol=1e-6)
    np.testing.assert_allclose(loaded["variance"], saved["variance"], rtol=1e-5)
    wait_for(
        lambda: np.array_equal(grid_messages.occupancy_to_array(mapper.latest("mean")), saved_mean),
        what="the saved grid back",
    )

    # mapping continues on the loaded map
    mapper.feed(WINDOW)
    mapper.wait_samples(3 * WINDOW)


def test_load_of_a_corrupt_or_missing_file_keeps_the_map(
    mapper: MapperHarness, tmp_path: Path
) -> None:
    mapper.feed(WINDOW)
    diag = mapper.wait_samples(WINDOW)
    before = mapper.cloud()
    n_field = mapper.sink.count(mapper.topics["field"])

    map_file = tmp_path / "maps" / "map.npz"
    map_file.parent.mkdir(parents=True)
    map_file.write_bytes(b"not a map at all")
    reply = mapper.call("load_map")
    assert not reply.success
    assert "current map is kept" in reply.message and str(map_file) in reply.message

    map_file.unlink()
    reply = mapper.call("load_map")
    assert not reply.success and str(map_file) in reply.message

    after = mapper.fresh_diagnostics()
    assert after["samples"] == diag["samples"] and after["seq"] == diag["seq"]
    assert mapper.sink.count(mapper.topics["field"]) == n_field
    np.testing.assert_array_equal(mapper.cloud(), before)


def test_parameters_are_validated_with_reasons(mapper: MapperHarness) -> None:
    refused = {
        "resolution": (Parameter("resolution", value=9.0), "out of range"),
        "batch_size": (Parameter("batch_size", value=0), "out of range"),
        "map_frame": (Parameter("map_frame", value="odom"), "read-only"),
        "mag_topic": (Parameter("mag_topic", value="/other"), "read-only"),
        "vips.selector": (Parameter("vips.selector", value="best"), "selector must be one of"),
        "bounds": (Parameter("bounds", value=[1.0, 0.0, 0.0, 1.0]), "xmin < xmax"),
        "bounds_len": (Parameter("bounds", value=[1.0, 2.0]), "bounds"),
        "type": (Parameter("lengthscale", value="long"), "type"),
    }
    for name, (param, reason) in refused.items():
        (result,) = mapper.set_parameters([param])
        assert not result.successful, name
        assert reason in result.reason, (name, result.reason)
    assert mapper.node.get_parameter("resolution").value == 0.25
    assert mapper.node.get_parameter("map_frame").value == "map"

    (ok,) = mapper.set_parameters([Parameter("batch_size", value=50)])
    assert ok.successful, ok.reason
    (ok,) = mapper.set_parameters([Parameter("bounds", value=[-2.0, 2.0, -2.0, 2.0])])
    assert ok.successful, ok.reason
    # mapping parameters apply from the next reset, which rebuilds the pipeline with them
    assert mapper.node.pipeline.config.batch_size == 100
    reply = mapper.call("reset")
    assert reply.success and "batch_size" in reply.message and "bounds" in reply.message
    assert mapper.node.pipeline.config.batch_size == 50
    mapper.feed(50)
    mapper.wait_samples(50)
    assert (mapper.latest("mean").info.width, mapper.latest("mean").info.height) == (16, 16)


def test_bad_inputs_are_counted_and_survived(mapper: MapperHarness) -> None:
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    good = mapper.rmse(mapper.cloud())

    t = T0_NS + 1_000_000_000_000  # well after the good data
    ms = 1_000_000
    x, y = path(0)
    bad = [
        ("mag", mag_msg(t + 1 * ms, np.array([np.nan, 1.0, 1.0]))),  # nan
        ("mag", mag_msg(t + 2 * ms, np.array([np.inf, 1.0, 1.0]))),  # nan (inf)
        ("mag", mag_msg(t + 3 * ms, np.zeros(3))),  # zero_field
        ("mag", mag_msg(t + 4 * ms, 48.0, frame="other_link")),  # frame
        ("pose", pose_msg(t, x, y, frame="odom")),  # pose_frame
        ("pose", pose_msg(1, x, y)),  # late_pose: older than every pose held
        # a gap: poses 1 s apart around a reading (max_pose_gap 0.2 s)
        ("pose", pose_msg(t + 10 * ms, x, y)),
        ("mag", mag_msg(t + 500 * ms, 48.0)),
        ("pose", pose_msg(t + 1010 * ms, x, y)),
        ("mag", mag_msg(t + 100 * ms, 48.0)),  # out_of_order: before the last reading
    ]
    # a stationary robot: the same position for 0.5 s of readings
    for k in range(26):
        bad.append(("pose", pose_msg(t + 1100 * ms + k * 20 * ms, x, y)))
        if k < 25:
            bad.append(("mag", mag_msg(t + 1105 * ms + k * 20 * ms, true_field(x, y))))
    for kind, msg in bad:
        (mapper.mag_pub if kind == "mag" else mapper.pose_pub).publish(msg)
        time.sleep(PACE_S)

    def counted() -> dict[str, str] | None:
        d = mapper.diagnostics()
        wanted = {
            "drop_nan": 2,
            "drop_zero_field": 1,
            "drop_frame": 1,
            "drop_pose_frame": 1,
            "drop_late_pose": 1,
            "drop_pose_gap": 1,
            "drop_out_of_order": 1,
            "drop_duplicate": 20,
        }
        if d is None or any(int(d[k]) < n for k, n in wanted.items()):
            return None
        return d

    diag = wait_for(counted, what="every bad input counted")
    assert int(diag["failed_updates"]) == 0
    # every message is heard, dropped or not (a player waits on these before ~/flush)
    sent = {kind: mapper.fed[kind] + sum(k == kind for k, _ in bad) for kind in ("mag", "pose")}

    def arrived() -> dict[str, int] | None:
        d = mapper.diagnostics()
        got = (
            {
                kind: int(d[f"{kind}_received"]) + int(d[f"{kind}_lost_in_transport"])
                for kind in sent
            }
            if d is not None
            else None
        )
        return got if got == sent else None

    wait_for(arrived, what=f"{sent} messages heard")
    # the warning reaches /diagnostics; the node is alive and the map still stands
    warned = [s for s in mapper.our_statuses() if s.level == diagnostic_messages.DIAGNOSTIC_WARN]
    assert warned and "dropped input" in warned[-1].message
    mapper.fresh_diagnostics()
    mapper.offset_ns = t + 2_000_000_000 - T0_NS  # good data again, after the bad block
    mapper.feed(WINDOW)
    mapper.wait_samples(2 * WINDOW)
    assert mapper.rmse(mapper.cloud()) <= good + 0.5


@pytest.mark.parametrize("pose_type", ["odometry", "pose_with_covariance"])
def test_other_pose_types_under_sim_time(
    ros_context: Context, spinner: Spinner, pose_type: str
) -> None:
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from nav_msgs.msg import Odometry

    msg_type = {"odometry": Odometry, "pose_with_covariance": PoseWithCovarianceStamped}
    parameters = {"pose_type": pose_type, "use_sim_time": True}
    with harness(ros_context, spinner, parameters, pose_msg_type=msg_type[pose_type]) as h:
        # no /clock at all: stamps come from the headers, diagnostics from a steady timer
        h.feed(WINDOW)
        h.wait_samples(WINDOW)
        assert h.latest("mean").info.width == GRID_W
        assert h.node.get_parameter("use_sim_time").value is True


def test_rviz_cells_follow_the_coarsened_resolution(ros_context: Context, spinner: Spinner) -> None:
    # 800 cells at the asked 0.25 m; a 200-cell cap coarsens the grid
    with harness(ros_context, spinner, {"max_cells": 200}) as h:
        h.feed(WINDOW)
        h.wait_samples(WINDOW)
        grid = h.latest("mean")
        assert grid.info.resolution > 0.25
        assert grid.info.width * grid.info.height <= 200
        cells = wait_for(lambda: h.latest("cells"), what="the RViz cells")
        assert cells.type == Marker.CUBE_LIST and cells.header.frame_id == "map"
        # the cubes are one (coarsened) cell wide, so they tile the map in RViz
        assert cells.scale.x == pytest.approx(grid.info.resolution)
        assert cells.scale.y == pytest.approx(grid.info.resolution)
        known = int((grid_messages.occupancy_to_array(grid) != -1).sum())
        assert len(cells.points) == known > 0


def test_a_vector_map_publishes_components_and_field_arrows(
    ros_context: Context, spinner: Spinner
) -> None:
    from visualization_msgs.msg import MarkerArray

    from gp_mapper.ros.qos import MAP_QOS

    # Identity orientations: the map-frame field is the sensor-frame one, |B| the known field.
    with harness(ros_context, spinner, {"target": "vector", "model": "potential"}) as h:
        arrows_topic = h.topics["field"] + "_arrows"
        h.sink.listen(MarkerArray, arrows_topic, MAP_QOS)
        h.feed(WINDOW)
        diag = h.wait_samples(WINDOW)
        assert diag["model"] == "potential"
        cloud = h.cloud()
        assert cloud.dtype.names == cloud_messages.VECTOR_CLOUD_FIELDS
        assert cloud.shape == (GRID_H, GRID_W)
        unknown = grid_messages.occupancy_to_array(h.latest("mean")) == -1
        known = ~unknown
        # ~/mean is |B|; the components point along the field's direction where it is known
        components = np.stack([cloud["bx"], cloud["by"], cloud["bz"]], axis=-1)[known]
        direction = components / np.linalg.norm(components, axis=-1, keepdims=True)
        centre = known & (np.abs(cloud["x"]) < 1.0) & (np.abs(cloud["y"]) < 1.0)
        assert centre.any()
        cosines = direction @ FIELD_DIRECTION
        assert np.median(cosines[centre[known]]) > 0.99
        assert np.all(cloud["var_bx"] > 0.0) and np.all(np.isfinite(cloud["var_bz"]))
        arrows = wait_for(lambda: h.sink.latest(arrows_topic), what="the field arrows")
        clear, *markers = arrows.markers
        assert clear.action == Marker.DELETEALL
        assert 0 < len(markers) <= marker_messages.MAX_ARROWS
        assert all(m.type == Marker.ARROW and m.header.frame_id == "map" for m in markers)


def test_an_additive_map_publishes_its_map_layer_and_nuisance_diagnostics(
    ros_context: Context, spinner: Spinner
) -> None:
    parameters = {"model": "gam_stream", "gam.components": "offset+map+heading+run+drift"}
    with harness(ros_context, spinner, parameters) as h:
        h.feed(WINDOW)
        diag = h.wait_samples(WINDOW)
        assert diag["model"] == "gam_stream" and int(diag["failed_updates"]) == 0
        # the heading curve, the drift and the run offset, beside the map's own figures
        for key in ("heading_B", "heading_E", "heading_sd_max", "drift", "drift_sd",
                    "run_offset_sd"):  # fmt: skip
            assert np.isfinite(float(diag[key])), key
        known = grid_messages.occupancy_to_array(h.latest("mean")) != -1
        assert known.any()
        cloud = h.cloud()
        assert np.all(np.isfinite(cloud["mean"][known]))


def test_a_scalar_map_has_no_field_arrows(mapper: MapperHarness) -> None:
    mapper.feed(WINDOW)
    mapper.wait_samples(WINDOW)
    assert mapper.cloud().dtype.names == cloud_messages.FIELD_CLOUD_FIELDS
    assert mapper.probe.count_publishers(mapper.topics["field"] + "_arrows") == 0
