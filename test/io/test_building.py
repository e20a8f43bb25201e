"""The synthetic office floor: its plan, field, walk, runs, bag and scoring helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gp_mapper.io import (
    BagError,
    BuildingWalk,
    BuildingWorld,
    bag_info,
    building_walk,
    first_visit_times,
    make_building_world,
    path_cells,
    read_bag,
    rotate_z,
    simulate_building_run,
    write_building_bag,
    yaw_from_quaternion,
)
from gp_mapper.io.building import PATH_RADIUS_M, FloorPlan
from gp_mapper.io.building.plan import CORRIDOR_WIDTH_M, WALL_M
from gp_mapper.io.building.walk import MAX_TURN_RATE_RADPS
from gp_mapper.mapping.records import FieldReading, Pose

SPEED_MPS = 1.2
RATE_HZ = 100.0
# A sample within this distance of a junction's centre is at that junction (its square is 2 m).
JUNCTION_RADIUS_M = 0.5 * CORRIDOR_WIDTH_M


@pytest.fixture(scope="module")
def world() -> BuildingWorld:
    return make_building_world(seed=0)


@pytest.fixture(scope="module")
def walk(world: BuildingWorld) -> BuildingWalk:
    """The default walk: 20 minutes at 100 Hz."""
    return building_walk(world)


def _floor_grid(world: BuildingWorld, step_x: float, step_y: float) -> np.ndarray:
    width, depth = world.size_m
    x, y = np.meshgrid(np.arange(0.0, width, step_x), np.arange(0.0, depth, step_y))
    return np.column_stack([x.ravel(), y.ravel()])


def _dipole_field(points: np.ndarray, position: np.ndarray, moment: np.ndarray) -> np.ndarray:
    """Reference dipole sum [N, 3] µT at points [N, 3]: every source, no cutoff."""
    r = points[:, None, :] - position[None]  # [N, P, 3]
    dist = np.linalg.norm(r, axis=2, keepdims=True)
    unit = r / dist
    along = np.sum(unit * moment[None], axis=2, keepdims=True)
    return np.sum((3.0 * along * unit - moment[None]) / dist**3, axis=1)


def _corridor_traversals(plan: FloorPlan, positions: np.ndarray) -> np.ndarray:
    """[E] times the walk goes from one end of each corridor segment to the other.

    Reads the junctions the walk passes through, in order, from the positions alone.
    """
    dist = np.linalg.norm(positions[:, None, :] - plan.nodes_m[None], axis=2)
    at = np.where(dist.min(axis=1) <= JUNCTION_RADIUS_M, dist.argmin(axis=1), -1)
    visited = at[at >= 0]
    visited = visited[np.r_[True, visited[1:] != visited[:-1]]]
    edge_of = {frozenset(e): k for k, e in enumerate(plan.edges.tolist())}
    counts = np.zeros(len(plan.edges), dtype=int)
    for a, b in zip(visited[:-1].tolist(), visited[1:].tolist(), strict=True):
        counts[edge_of[frozenset((a, b))]] += 1  # KeyError: a jump between junctions
    return counts


def _inside(points: np.ndarray, box: np.ndarray, margin: float = 1e-9) -> np.ndarray:
    x0, x1, y0, y1 = box
    return (
        (points[:, 0] >= x0 - margin)
        & (points[:, 0] <= x1 + margin)
        & (points[:, 1] >= y0 - margin)
        & (points[:, 1] <= y1 + margin)
    )


def test_same_seed_same_world_other_seed_other_world() -> None:
    a, b, c = make_building_world(3), make_building_world(3), make_building_world(4)
    points = _floor_grid(a, 1.0, 1.0)
    np.testing.assert_array_equal(a.field_at(points), b.field_at(points))
    assert not np.allclose(a.field_at(points), c.field_at(points))
    first, again = (
        building_walk(a, duration_s=30.0, seed=5),
        building_walk(b, duration_s=30.0, seed=5),
    )
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    other = building_walk(a, duration_s=30.0, seed=6)
    assert not np.allclose(first.position_m, other.position_m)


def test_plan_is_an_office_floor_of_corridors_and_rooms(world: BuildingWorld) -> None:
    plan = world.plan
    assert plan.size_m == (60.0, 40.0)
    # a ring plus cross corridors: 4 x 3 junctions, 17 segments of 13-16 m
    assert plan.nodes_m.shape == (12, 2) and plan.edges.shape == (17, 2)
    assert np.all((plan.edge_lengths_m > 12.0) & (plan.edge_lengths_m < 16.0))
    widths = np.minimum(np.diff(plan.corridors_m[:, :2]), np.diff(plan.corridors_m[:, 2:]))
    np.testing.assert_allclose(widths, CORRIDOR_WIDTH_M)
    rooms = plan.rooms_m
    assert rooms.shape[0] >= 30
    sides = np.column_stack([rooms[:, 1] - rooms[:, 0], rooms[:, 3] - rooms[:, 2]])
    assert sides.min() >= 3.0
    assert rooms[:, [0, 2]].min() >= 0.0 and rooms[:, 1].max() <= 60.0 and rooms[:, 3].max() <= 40
    # the rooms reach the outer walls: the free space spans the floor
    assert rooms[:, 1].max() - rooms[:, 0].min() > 59.0
    assert rooms[:, 3].max() - rooms[:, 2].min() > 39.0
    # rooms overlap neither each other nor the corridors (walls between them)
    others = np.vstack([rooms, plan.corridors_m])
    overlap_x = np.minimum(rooms[:, None, 1], others[None, :, 1]) - np.maximum(
        rooms[:, None, 0], others[None, :, 0]
    )
    overlap_y = np.minimum(rooms[:, None, 3], others[None, :, 3]) - np.maximum(
        rooms[:, None, 2], others[None, :, 2]
    )
    overlaps = (overlap_x > 0.0) & (overlap_y > 0.0)
    assert np.array_equal(overlaps[:, : len(rooms)], np.eye(len(rooms), dtype=bool))
    assert not overlaps[:, len(rooms) :].any()
    # each door joins its room to the corridor segment it opens onto
    # (a wall's thickness from the door's centre is half a wall beyond either face)
    in_room = plan.door_centres_m + WALL_M * plan.door_normals
    in_corridor = plan.door_centres_m - WALL_M * plan.door_normals
    for k, (room, edge) in enumerate(zip(rooms, plan.room_edges, strict=True)):
        assert _inside(in_room[k : k + 1], room)[0]
        assert _inside(in_corridor[k : k + 1], plan.corridors_m[edge])[0]
        assert _inside(plan.door_stops_m[k : k + 1], plan.corridors_m[edge])[0]
    assert plan.contains(plan.door_centres_m).all()
    assert not plan.contains(np.array([[1.0, 1.0], [59.0, 39.0]])).any()  # corner cores


def test_floor_scales_and_rejects_a_floor_too_small() -> None:
    large = make_building_world(1, size_m=(80.0, 50.0))
    assert large.size_m == (80.0, 50.0)
    assert large.plan.rooms_m.shape[0] > make_building_world(1).plan.rooms_m.shape[0]
    walk = building_walk(large, duration_s=120.0)
    assert large.plan.contains(walk.position_m).all()
    with pytest.raises(ValueError, match="too small"):
        make_building_world(0, size_m=(30.0, 20.0))


def test_walk_stays_in_the_free_space_at_walking_pace(
    world: BuildingWorld, walk: BuildingWalk
) -> None:
    assert walk.time_s.shape == (120_001,)
    np.testing.assert_allclose(np.diff(walk.time_s), 1.0 / RATE_HZ)
    assert world.plan.contains(walk.position_m).all()
    speed = np.linalg.norm(np.diff(walk.position_m, axis=0), axis=1) * RATE_HZ
    assert np.median(speed) == pytest.approx(SPEED_MPS, rel=0.1)
    assert speed.max() < 1.25 * SPEED_MPS and speed.min() > 0.1
    # the heading is the direction of travel and turns at a limited rate
    step = np.diff(walk.position_m, axis=0)
    travel = np.arctan2(step[:, 1], step[:, 0])
    mid = walk.heading_rad[:-1] + 0.5 * np.angle(np.exp(1j * np.diff(walk.heading_rad)))
    # (a chord across a bend start is off the mid heading by a fraction of the step's turn)
    step_turn = MAX_TURN_RATE_RADPS / RATE_HZ
    assert np.abs(np.angle(np.exp(1j * (travel - mid)))).max() < 0.5 * step_turn
    turn_rate = np.abs(np.angle(np.exp(1j * np.diff(walk.heading_rad)))) * RATE_HZ
    assert turn_rate.max() <= MAX_TURN_RATE_RADPS * (1.0 + 1e-6)


def test_default_walk_covers_every_corridor_twice_and_every_room(
    world: BuildingWorld, walk: BuildingWalk
) -> None:
    plan = world.plan
    traversals = _corridor_traversals(plan, walk.position_m)
    assert traversals.min() >= 2, traversals
    # the labels agree: every segment has at least two passes, every room a visit
    assert np.bincount(walk.pass_edge[walk.pass_edge >= 0], minlength=17).min() >= 2
    assert set(walk.pass_room[walk.pass_room >= 0].tolist()) == set(range(len(plan.rooms_m)))
    for room in plan.rooms_m:  # and the walk goes well inside each room
        assert _inside(walk.position_m, room + np.array([0.9, -0.9, 0.9, -0.9])).any()


def test_passes_are_labelled_where_they_are(world: BuildingWorld, walk: BuildingWalk) -> None:
    plan = world.plan
    passes = walk.pass_edge.size
    assert walk.pass_room.shape == (passes,)
    assert set(np.unique(walk.pass_index).tolist()) == set(range(passes))
    # a pass is a corridor traversal or a room visit, never both
    assert np.all((walk.pass_edge >= 0) != (walk.pass_room >= 0))
    # passes start in order of their index
    first = np.array([np.argmax(walk.pass_index == p) for p in range(passes)])
    assert np.all(np.diff(first) > 0)
    for p in range(passes):
        where = walk.position_m[walk.pass_index == p]
        if (edge := walk.pass_edge[p]) >= 0:
            assert _inside(where, plan.corridors_m[edge]).all()
        else:
            room = walk.pass_room[p]
            edge = plan.room_edges[room]
            spaces = (plan.rooms_m[room], plan.doors_m[room], plan.corridors_m[edge])
            assert np.any([_inside(where, box) for box in spaces], axis=0).all()
            assert _inside(where, plan.rooms_m[room]).any()


def test_a_shorter_walk_is_the_start_of_the_default(
    world: BuildingWorld, walk: BuildingWalk
) -> None:
    short = building_walk(world, duration_s=60.0)
    n = short.time_s.size
    np.testing.assert_allclose(short.position_m, walk.position_m[:n], atol=1e-9)
    np.testing.assert_array_equal(short.pass_index, walk.pass_index[:n])


def test_sources_are_buried_and_each_peaks_at_5_to_30_ut(world: BuildingWorld) -> None:
    depth = -world.source_positions_m[:, 2]
    assert depth.min() >= 0.3 and depth.max() <= 3.0
    assert world.source_positions_m.shape[0] >= 100  # many, spread over the floor
    for position, moment, d in zip(
        world.source_positions_m, world.source_moments, depth, strict=True
    ):
        offsets = np.linspace(-2.0 * d, 2.0 * d, 161)
        gx, gy = np.meshgrid(offsets, offsets)
        plane = np.column_stack(
            [gx.ravel() + position[0], gy.ravel() + position[1], 0 * gx.ravel()]
        )
        peak = np.linalg.norm(_dipole_field(plane, position[None], moment[None]), axis=1).max()
        assert 5.0 * 0.99 <= peak <= 30.0 * (1.0 + 1e-9)


def test_field_is_the_dipole_sum_up_to_a_small_cutoff(world: BuildingWorld) -> None:
    rng = np.random.default_rng(20240611)
    points = np.column_stack(
        [rng.uniform((0.0, 0.0), world.size_m, size=(3000, 2)), np.zeros(3000)]
    )
    reference = world.earth_field_ut + _dipole_field(
        points, world.source_positions_m, world.source_moments
    )
    assert np.abs(world.field_at(points) - reference).max() < 0.1  # µT, far below the noise
    # above and below the Earth field by 5-30 µT anomalies (overlaps may add up)
    anomaly = world.norm_at(_floor_grid(world, 0.1, 0.1)) - np.linalg.norm(world.earth_field_ut)
    assert anomaly.max() > 5.0 and anomaly.min() < -5.0
    assert np.abs(anomaly).max() < 60.0
    assert np.median(np.abs(anomaly)) < 5.0  # most of the floor is near the background


def test_field_varies_on_scales_of_0_3_to_3_m(world: BuildingWorld) -> None:
    step = 0.05
    rows = world.norm_at(_floor_grid(world, step, 0.5)).reshape(-1, round(60.0 / step))
    anomaly = rows - rows.mean()
    lags = np.arange(1, round(5.0 / step))
    corr = np.array(
        [
            np.sum(anomaly[:, :-k] * anomaly[:, k:])
            / np.sqrt(np.sum(anomaly[:, :-k] ** 2) * np.sum(anomaly[:, k:] ** 2))
            for k in lags
        ]
    )
    length = lags[np.argmax(corr < np.exp(-1.0))] * step  # e-folding correlation length
    assert 0.3 <= length <= 3.0
    # noticeable (above the 0.5 µT noise) over 0.3 m, more so over 3 m
    change_03 = np.abs(rows[:, 6:] - rows[:, :-6])
    change_3 = np.abs(rows[:, 60:] - rows[:, :-60])
    assert np.percentile(change_03, 95) > 1.0
    assert np.percentile(change_3, 95) > 2.0 * np.percentile(change_03, 95)


def test_field_input_checks(world: BuildingWorld) -> None:
    xy = _floor_grid(world, 5.0, 5.0)
    np.testing.assert_array_equal(
        world.field_at(xy), world.field_at(np.column_stack([xy, np.zeros(len(xy))]))
    )
    np.testing.assert_allclose(world.norm_at(xy), np.linalg.norm(world.field_at(xy), axis=1))
    assert world.field_at(np.zeros((0, 2))).shape == (0, 3)
    # a point's value does not depend on the other points asked for
    np.testing.assert_allclose(world.field_at(xy[7:8]), world.field_at(xy)[7:8], rtol=1e-13)
    with pytest.raises(ValueError, match=r"\[N, 2\] or \[N, 3\]"):
        world.field_at(np.zeros((4, 4)))


def test_pass_offsets_are_constant_per_pass(world: BuildingWorld, walk: BuildingWalk) -> None:
    clean = simulate_building_run(world, walk, noise_ut=0.0, seed=3)
    gained = np.linalg.norm(clean.mag_ut, axis=1) - np.linalg.norm(clean.field_ut, axis=1)
    np.testing.assert_allclose(gained, clean.pass_offset_ut[clean.pass_index], atol=1e-9)
    assert clean.pass_offset_ut.shape == (walk.pass_edge.size,)
    assert np.std(clean.pass_offset_ut) == pytest.approx(1.0, rel=0.25)
    # with noise, each pass's mean norm error is its offset
    noisy = simulate_building_run(world, walk, seed=3)
    error = np.linalg.norm(noisy.mag_ut, axis=1) - np.linalg.norm(noisy.field_ut, axis=1)
    mean = np.bincount(noisy.pass_index, error) / np.bincount(noisy.pass_index)
    np.testing.assert_allclose(mean, noisy.pass_offset_ut, atol=0.15)


def test_sensor_frame_readings_rotate_back_to_the_map_field(world: BuildingWorld) -> None:
    walk = building_walk(world, duration_s=120.0, seed=1)
    truth = world.field_at(walk.position_m)
    run = simulate_building_run(world, walk, noise_ut=0.5, pass_offset_ut=0.0, seed=2)
    np.testing.assert_array_equal(run.field_ut, truth)
    residual = rotate_z(run.mag_ut, run.heading_rad) - truth
    assert residual.mean(axis=0) == pytest.approx([0.0, 0.0, 0.0], abs=0.03)
    np.testing.assert_allclose(residual.std(axis=0), 0.5, rtol=0.05)
    clean = simulate_building_run(world, walk, noise_ut=0.0, pass_offset_ut=0.0)
    np.testing.assert_allclose(rotate_z(clean.mag_ut, clean.heading_rad), truth, atol=1e-12)
    # the walk turns, so the sensor frame really differs from the map frame
    assert np.abs(clean.mag_ut[:, :2] - truth[:, :2]).max() > 10.0
    with pytest.raises(ValueError, match="non-negative"):
        simulate_building_run(world, walk, noise_ut=-1.0)


def test_walk_rejects_bad_arguments(world: BuildingWorld) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        building_walk(world, duration_s=0.0)
    with pytest.raises(ValueError, match="must be positive"):
        building_walk(world, speed_mps=-1.0)


def test_building_bag_round_trips(world: BuildingWorld, tmp_path: Path) -> None:
    out = tmp_path / "floor"
    summary = write_building_bag(out, world, seed=4, duration_s=20.0)
    assert (summary.num_field, summary.num_pose) == (2001, 501)
    info = bag_info(out)
    assert info.storage == "mcap"
    assert info.topics["/imu/mag"].msgtype == "sensor_msgs/msg/MagneticField"
    assert info.topics["/pose"].msgtype == "geometry_msgs/msg/PoseStamped"

    walk = building_walk(world, duration_s=20.0, seed=4)
    run = simulate_building_run(world, walk, seed=4)
    records = list(read_bag(out))
    fields = [r for r in records if isinstance(r, FieldReading)]
    poses = [r for r in records if isinstance(r, Pose)]
    np.testing.assert_allclose([f.field_t for f in fields], run.mag_ut * 1e-6, rtol=1e-12)
    assert {f.frame_id for f in fields} == {"imu_link"}
    np.testing.assert_allclose([p.position_m[:2] for p in poses], run.position_m[::4])
    yaw = yaw_from_quaternion(np.array([p.orientation_xyzw for p in poses]))
    np.testing.assert_allclose(np.angle(np.exp(1j * (yaw - run.heading_rad[::4]))), 0.0, atol=1e-12)
    with pytest.raises(BagError, match="exists"):
        write_building_bag(out, world, duration_s=1.0)


def test_path_cells_are_the_cells_near_the_path(world: BuildingWorld) -> None:
    walk = building_walk(world, duration_s=20.0)
    resolution = 0.1
    cells = path_cells(walk.position_m, resolution, origin_m=(0.05, -0.02))
    # brute force over every cell of the walk's bounding box
    lo = np.floor((walk.position_m.min(axis=0) - 1.0 - (0.05, -0.02)) / resolution)
    hi = np.ceil((walk.position_m.max(axis=0) + 1.0 - (0.05, -0.02)) / resolution)
    ix, iy = np.meshgrid(np.arange(lo[0], hi[0]), np.arange(lo[1], hi[1]), indexing="ij")
    centres = (0.05, -0.02) + (np.column_stack([ix.ravel(), iy.ravel()]) + 0.5) * resolution
    dist = np.linalg.norm(centres[:, None, :] - walk.position_m[None, ::5], axis=2).min(axis=1)
    np.testing.assert_allclose(cells, centres[dist <= PATH_RADIUS_M], atol=1e-9)
    assert path_cells(np.zeros((0, 2)), resolution).shape == (0, 2)
    with pytest.raises(ValueError, match="resolution_m"):
        path_cells(walk.position_m, 0.0)


def test_first_visit_times_follow_the_walk() -> None:
    # out along x at 1 m/s and back: first visits grow on the way out, not on the way back
    t = np.arange(0.0, 20.0, 0.01)
    x = np.where(t <= 10.0, t, 20.0 - t)
    walk = np.column_stack([x, np.zeros_like(x)])
    points = np.column_stack([np.linspace(1.0, 9.0, 81), np.full(81, 0.1)])
    first = first_visit_times(points, t, walk)
    reach = np.sqrt(PATH_RADIUS_M**2 - 0.1**2)
    np.testing.assert_allclose(first, points[:, 0] - reach, atol=0.011)
    assert np.all(np.diff(first) > 0.0)
    far = first_visit_times(np.array([[5.0, 1.0]]), t, walk)
    assert np.isinf(far).all()
    with pytest.raises(ValueError, match="walk_time_s"):
        first_visit_times(points, t[:-1], walk)


def test_first_visit_times_on_the_default_walk(world: BuildingWorld, walk: BuildingWalk) -> None:
    # the walker's own positions: first reached no later than now, and on new ground just now
    own = walk.position_m[::25]
    now = walk.time_s[::25]
    first = first_visit_times(own, walk.time_s, walk.position_m)
    assert np.all(first <= now)
    running = np.maximum.accumulate(first)
    assert np.all(running <= now) and np.all(np.diff(running) >= 0.0)
    # on new ground the walker came within reach a radius ago, and those first visits grow
    fresh = first > now - 1.0
    assert fresh.mean() > 0.3
    lag = np.median(now[fresh] - first[fresh])
    assert lag == pytest.approx(PATH_RADIUS_M / SPEED_MPS, rel=0.1)
    assert np.all(np.diff(first[fresh]) >= 0.0)
    # every path cell is visited; the cells split into thirds by first visit
    cells = path_cells(walk.position_m, 0.1)
    visits = first_visit_times(cells, walk.time_s, walk.position_m)
    assert np.isfinite(visits).all() and visits.max() <= walk.time_s[-1]
    thirds = np.quantile(visits, [1.0 / 3.0, 2.0 / 3.0])
    assert 0.0 < thirds[0] < thirds[1] < walk.time_s[-1]
