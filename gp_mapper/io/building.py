"""A synthetic office floor for building-scale mapping benchmarks (numpy and scipy only).

The floor (default 60 m x 40 m; x east, y north, map frame, walking plane z = 0) is laid out as
many office floors are: a ring corridor 2 m wide runs 6 m inside the outer wall; the band
between the ring and the outer wall holds perimeter offices about 6 m wide, and the four
corners are closed cores (stairs, lifts). Inside the ring, two north-south cross corridors and
one east-west cross corridor divide the core into 3 x 2 blocks, each split into two rooms. Every
room has one 1 m door onto a corridor. The corridors form a graph: nodes at the junctions and
corners (4 x 3 of them), edges the corridor segments between them (17 at the default size).

The true field, in µT in the map frame, is a uniform Earth field plus magnetic dipoles buried
below the walking plane (reinforcement and cables in the slab, pipes and machines below it,
structural steel deeper down) at depths of 0.3-3 m, so their anomalies spread over 0.3-3 m;
each one peaks at 5-30 µT on the walking plane.

The walk goes at about 1.2 m/s along an Eulerian circuit of the corridor graph in which every
corridor segment is walked once in each direction, and visits every room on the way (in
through its door, one loop inside, back out). Corners are rounded with a limited turn rate;
when a lap ends before the walk does, the next lap takes the corridors in another order. A
"pass" is one traversal of a corridor segment or one room visit; a run adds a random offset
per pass along the field (a calibration residue constant along a pass) and white noise, and
reads the field in the SENSOR frame, as :func:`gp_mapper.io.synthetic.simulate_run` does.

The scoring helpers pick the map cells within 0.3 m of the path and the time the walk first
came that close to each, so that a benchmark can split the cells by when they were first seen.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.spatial import cKDTree

from .bag_writer import (
    DEFAULT_MAG_TOPIC,
    DEFAULT_POSE_TOPIC,
    BagSummary,
)
from .heading import rotate_z
from .synthetic import ANOMALY_PEAK_UT, EARTH_FIELD_UT, write_walk_bag

__all__ = [
    "DEFAULT_DURATION_S",
    "DEFAULT_FLOOR_SIZE_M",
    "DEFAULT_WALK_RATE_HZ",
    "DEFAULT_WALK_SPEED_MPS",
    "PATH_RADIUS_M",
    "BuildingRun",
    "BuildingWalk",
    "BuildingWorld",
    "FloorPlan",
    "building_walk",
    "first_visit_times",
    "make_building_world",
    "path_cells",
    "simulate_building_run",
    "write_building_bag",
]

# --- Floor plan, metres -------------------------------------------------------------------
DEFAULT_FLOOR_SIZE_M: tuple[float, float] = (60.0, 40.0)
# Wide enough for two people to pass (building codes ask for ~1.2-1.8 m in offices).
CORRIDOR_WIDTH_M = 2.0
# Outer wall to the ring corridor: the depth of a perimeter office with windows.
PERIMETER_DEPTH_M = 6.0
# Target width of a perimeter office along its corridor.
ROOM_WIDTH_M = 6.0
# Interior partition thickness (a stud wall with boards both sides).
WALL_M = 0.2
# A standard office door.
DOOR_WIDTH_M = 1.0
# Door centres keep this far from the room's side walls and the walk's loop can start beside it.
DOOR_SIDE_MARGIN_M = 1.5
# Doors keep this far from corridor junctions and from each other along a corridor, so that the
# walk's rounded turns into a door (TURN_RADIUS_M each) never overlap a junction's or another
# door's.
MIN_DOOR_GAP_M = 2.0
# North-south cross corridors dividing the core into this many + 1 columns of blocks.
CROSS_CORRIDORS = 2
# The smallest room the layout may produce along either axis (one must fit a loop in it).
MIN_ROOM_M = 3.0
# Slack of the plan's comparisons of coordinates built by different sums, m.
GEOMETRY_TOL_M = 1e-9

# --- Field ----------------------------------------------------------------------------------
# Buried sources in three populations: (min depth m, max depth m, sources per 100 m² of floor).
# A dipole's anomaly on the plane spreads over about its depth, so the depths set the 0.3-3 m
# scales; the densities make the shallow, small anomalies common (rebar, conduits and cables in
# the slab), the middle ones occasional (pipes, ducts, machines under the floor) and the deep,
# wide ones rare (structural steel).
SOURCE_POPULATIONS: tuple[tuple[float, float, float], ...] = (
    (0.3, 0.8, 10.0),
    (0.8, 1.8, 2.0),
    (1.8, 3.0, 0.4),
)
# A source is left out of the sum where even its largest possible field, 2|m| / r³, is below
# this (µT): it keeps the sum local (fast) and changes the field by far less than the noise.
FIELD_CUTOFF_UT = 0.01
# Side of the square tiles the points are grouped in to find the sources near them, m (about
# the fastest: smaller tiles gain few sources and lose to the per-tile overhead).
FIELD_TILE_M = 3.0
# Points x sources evaluated at once: keeps the temporaries (a few MB) in cache.
MAX_PAIRS_PER_BLOCK = 2**16
# Horizontal offsets (in source depths) searched for a source's peak on the plane, and the step.
PEAK_SEARCH_HALF_WIDTH = 2.0
PEAK_SEARCH_STEP = 1e-3

# --- Walk -----------------------------------------------------------------------------------
DEFAULT_DURATION_S = 1200.0
# A handheld or body-worn magnetometer (phone IMUs log at 100 Hz or more).
DEFAULT_WALK_RATE_HZ = 100.0
# A typical indoor walking pace (people walk corridors at ~1.2-1.4 m/s).
DEFAULT_WALK_SPEED_MPS = 1.2
# Relative standard deviation of the pace along the walk, and the range of the wavelengths (m)
# of the sinusoids it is made of: the pace drifts over some steps, it does not jitter.
SPEED_VARIATION = 0.05
SPEED_WAVELENGTHS_M = (5.0, 40.0)
SPEED_HARMONICS = 4
# A walker turns a corner in about a second: ~90 deg/s at most; slows down and speeds up again
# at this rate when a turn is tighter than TURN_RADIUS_M allows at full pace.
MAX_TURN_RATE_RADPS = 1.5
MAX_ACCELERATION_MPS2 = 0.5
# Corners are rounded with this radius where the waypoints leave room (it keeps within the 1 m
# half-width of a corridor: the arc cuts the corner by 0.41 radii).
TURN_RADIUS_M = 0.8
# A U-turn at a junction is a step to the side of this length, then back to the centre line
# this far along the way back: the walk has no on-the-spot turns (the heading must stay
# smooth). The step stays inside the junction's square, the rejoin short of the nearest door.
SIDESTEP_M = 0.8
REJOIN_M = 2.0 * TURN_RADIUS_M
# Room loops keep this far from the walls and are at most this long per side.
ROOM_LOOP_INSET_M = 1.0
ROOM_LOOP_MAX_M = 4.0
# Arc-length step of the speed profile, m (100 samples per metre of walk).
PROFILE_STEP_M = 0.01
# Turns smaller than this (radians) are straight on: no rounding.
MIN_TURN_RAD = 1e-9
# Independent random streams of a walk's seed.
_LAP_STREAM = 0
_PACE_STREAM = 1

# --- Run, bag, scoring ----------------------------------------------------------------------
# White noise per axis, µT: a phone magnetometer's (e.g. AK09916: 0.15 µT/LSB, ~0.4 µT rms).
DEFAULT_NOISE_UT = 0.5
# Standard deviation of the per-pass offset of the field's norm, µT (what remains of a hard-iron
# calibration that drifts between passes).
DEFAULT_PASS_OFFSET_UT = 1.0
# Poses on every fourth 100 Hz reading: a visual-inertial odometry rate.
DEFAULT_POSE_RATE_HZ = 25.0
# The benchmark scores the map within this distance of the path, m.
PATH_RADIUS_M = 0.3
# Walk samples searched at once by first_visit_times.
VISIT_CHUNK = 8192


@dataclass(frozen=True, eq=False)
class FloorPlan:
    """An office floor: corridors (a graph of segments), rooms and their doors.

    Rectangles are (xmin, xmax, ymin, ymax) in metres, map frame. The free space (where one can
    walk) is the union of the corridors, the rooms and the doors (the openings in the walls
    between a room and its corridor).

    Attributes:
        size_m: (width along x, depth along y) of the floor, metres; it spans [0, w] x [0, d].
        nodes_m: [V, 2] corridor junctions and corners (centre lines), metres.
        edges: [E, 2] int node indices of the corridor segments.
        corridors_m: [E, 4] each segment's corridor rectangle (its junction squares included).
        rooms_m: [R, 4] room rectangles.
        doors_m: [R, 4] door openings, each spanning its wall.
        door_centres_m: [R, 2] centre of each door, on the middle of its wall.
        door_normals: [R, 2] unit vectors from the corridor into each room.
        room_edges: [R] the corridor segment each door opens onto.
    """

    size_m: tuple[float, float]
    nodes_m: np.ndarray
    edges: np.ndarray
    corridors_m: np.ndarray
    rooms_m: np.ndarray
    doors_m: np.ndarray
    door_centres_m: np.ndarray
    door_normals: np.ndarray
    room_edges: np.ndarray

    @property
    def edge_lengths_m(self) -> np.ndarray:
        """[E] centre-line length of each corridor segment, metres."""
        a, b = self.nodes_m[self.edges[:, 0]], self.nodes_m[self.edges[:, 1]]
        return np.linalg.norm(b - a, axis=1)

    @property
    def door_stops_m(self) -> np.ndarray:
        """[R, 2] the point on each door's corridor centre line in front of the door, metres."""
        back = 0.5 * (WALL_M + CORRIDOR_WIDTH_M)
        return self.door_centres_m - back * self.door_normals

    def contains(self, points_m: np.ndarray) -> np.ndarray:
        """Whether points [N, 2] (metres) are in the free space (boundaries included) -> [N]."""
        p = np.asarray(points_m, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] != 2:
            raise ValueError(f"expected points [N, 2], got {p.shape}")
        boxes = np.vstack([self.corridors_m, self.rooms_m, self.doors_m])  # [B, 4]
        x, y = p[:, :1], p[:, 1:]
        inside = (x >= boxes[:, 0]) & (x <= boxes[:, 1]) & (y >= boxes[:, 2]) & (y <= boxes[:, 3])
        return inside.any(axis=1)


@dataclass(frozen=True, eq=False)
class BuildingWorld:
    """An office floor and its magnetic field: a uniform Earth field plus buried dipoles.

    Attributes:
        plan: the floor plan.
        earth_field_ut: [3] uniform background field, µT, map frame.
        source_positions_m: [P, 3] dipole positions (z < 0: below the walking plane), metres.
        source_moments: [P, 3] dipole moments scaled so that B = (3 (m.r^) r^ - m) / |r|^3 is
            in µT with r in metres (units µT m^3).
        source_cutoffs_m: [P] distance beyond which a source is left out of the sum (its field
            is below ``FIELD_CUTOFF_UT`` there), metres.
        seed: the seed the world was made with.
    """

    plan: FloorPlan
    earth_field_ut: np.ndarray
    source_positions_m: np.ndarray
    source_moments: np.ndarray
    source_cutoffs_m: np.ndarray
    seed: int = 0

    @property
    def size_m(self) -> tuple[float, float]:
        """(width, depth) of the floor, metres."""
        return self.plan.size_m

    def field_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field at points (which must not sit on a source).

        Sources are looked up per tile of ``FIELD_TILE_M``; each one's term is exact within
        its cutoff distance and left out beyond it, so a point's value does not depend (beyond
        rounding) on the other points asked for.

        Args:
            points_m: [N, 2] (x, y) on the walking plane z = 0, or [N, 3] (x, y, z), metres.

        Returns:
            [N, 3] field in µT, map frame.
        """
        p = np.asarray(points_m, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] not in (2, 3):
            raise ValueError(f"expected points [N, 2] or [N, 3], got {p.shape}")
        if p.shape[1] == 2:
            p = np.column_stack([p, np.zeros(p.shape[0])])
        total = np.broadcast_to(self.earth_field_ut, p.shape).copy()
        if p.shape[0] == 0:
            return total
        tile = np.floor(p[:, :2] / FIELD_TILE_M).astype(np.int64)
        tile -= tile.min(axis=0)
        key = tile[:, 0] * (int(tile[:, 1].max()) + 1) + tile[:, 1]
        order = np.argsort(key, kind="stable")
        starts = np.flatnonzero(np.diff(key[order], prepend=-1))
        ends = np.append(starts[1:], order.size)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            rows = order[start:end]
            near = self._sources_near_tile(p[rows[0], :2])
            if near.size == 0:
                continue
            block = max(1, MAX_PAIRS_PER_BLOCK // near.size)
            for first in range(0, rows.size, block):
                chunk = rows[first : first + block]
                total[chunk] += self._dipole_sum(p[chunk], near)
        return total

    def norm_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field magnitude ||B|| at points [N, 2] or [N, 3] (metres) -> [N] µT."""
        return np.linalg.norm(self.field_at(points_m), axis=1)

    def _sources_near_tile(self, point_m: np.ndarray) -> np.ndarray:
        """Indices of the sources whose cutoff reaches the tile holding ``point_m`` [2]."""
        lo = np.floor(point_m / FIELD_TILE_M) * FIELD_TILE_M
        hi = lo + FIELD_TILE_M
        xy = self.source_positions_m[:, :2]
        # Horizontal distance to the tile bounds the 3-D distance from below for any z.
        gap = np.maximum(np.maximum(lo - xy, xy - hi), 0.0)
        return np.flatnonzero(np.sum(gap**2, axis=1) < self.source_cutoffs_m**2)

    def _dipole_sum(self, points: np.ndarray, sources: np.ndarray) -> np.ndarray:
        """Sum of the fields of ``sources`` [K] at ``points`` [n, 3] within their cutoffs."""
        q = self.source_positions_m[sources]  # [K, 3]
        m = self.source_moments[sources]  # [K, 3]
        r = points[:, None, :] - q[None, :, :]  # [n, K, 3]
        r2 = np.einsum("nki,nki->nk", r, r)
        inv_r2 = 1.0 / r2
        inv_r3 = inv_r2 * np.sqrt(inv_r2)
        inv_r3 *= r2 < self.source_cutoffs_m[sources] ** 2
        mr = np.einsum("nki,ki->nk", r, m)
        radial = np.einsum("nk,nki->ni", 3.0 * mr * inv_r2 * inv_r3, r)
        return radial - inv_r3 @ m


class BuildingWalk(NamedTuple):
    """A walk through the floor.

    Attributes:
        time_s: [N] seconds since the start.
        position_m: [N, 2] (x, y), map frame, metres.
        heading_rad: [N] yaw (direction of travel), radians in (-pi, pi].
        pass_index: [N] int pass of each sample, 0..P-1 in the order the passes start; a
            corridor traversal keeps its pass on both sides of the room visits it makes.
        pass_edge: [P] corridor segment of each pass, -1 for a room visit.
        pass_room: [P] room of each pass, -1 for a corridor traversal.
    """

    time_s: np.ndarray
    position_m: np.ndarray
    heading_rad: np.ndarray
    pass_index: np.ndarray
    pass_edge: np.ndarray
    pass_room: np.ndarray


class BuildingRun(NamedTuple):
    """A simulated magnetometer run along a walk.

    Attributes:
        time_s: [N] seconds since the start.
        position_m: [N, 2] (x, y), map frame, metres.
        heading_rad: [N] yaw of the sensor (direction of travel), radians.
        mag_ut: [N, 3] readings in the SENSOR frame (pass offsets and noise included), µT.
        field_ut: [N, 3] true field at the positions, map frame, µT.
        pass_index: [N] int pass of each sample.
        pass_offset_ut: [P] offset added to the field's norm on each pass, µT.
    """

    time_s: np.ndarray
    position_m: np.ndarray
    heading_rad: np.ndarray
    mag_ut: np.ndarray
    field_ut: np.ndarray
    pass_index: np.ndarray
    pass_offset_ut: np.ndarray


def make_building_world(
    seed: int = 0, size_m: tuple[float, float] = DEFAULT_FLOOR_SIZE_M
) -> BuildingWorld:
    """Build an office floor and a random but reproducible field: same seed, same world.

    Args:
        seed: seed of the sources' positions, depths, directions and strengths.
        size_m: (width, depth) of the floor, metres; the plan scales with it.

    Returns:
        The world.

    Raises:
        ValueError: the floor is too small for the layout.
    """
    plan = _office_plan(size_m)
    rng = np.random.default_rng(seed)
    width, depth = plan.size_m
    area_100m2 = width * depth / 100.0
    positions, moments = [], []
    for lo, hi, per_100m2 in SOURCE_POPULATIONS:
        count = round(per_100m2 * area_100m2)
        xy = rng.uniform((0.0, 0.0), (width, depth), size=(count, 2))
        below = rng.uniform(lo, hi, size=count)
        direction = _unit_vectors(rng, count)
        peak = rng.uniform(*ANOMALY_PEAK_UT, size=count)
        positions.append(np.column_stack([xy, -below]))
        # |B| on the plane peaks at |m| g / depth³ (g from the direction): scale |m| for the peak.
        moments.append(direction * (peak * below**3 / _plane_peak_factor(direction))[:, None])
    moment = np.vstack(moments)
    cutoff = np.cbrt(2.0 * np.linalg.norm(moment, axis=1) / FIELD_CUTOFF_UT)
    return BuildingWorld(
        plan=plan,
        earth_field_ut=np.array(EARTH_FIELD_UT, dtype=np.float64),
        source_positions_m=np.vstack(positions),
        source_moments=moment,
        source_cutoffs_m=cutoff,
        seed=seed,
    )


def building_walk(
    world: BuildingWorld,
    *,
    duration_s: float = DEFAULT_DURATION_S,
    rate_hz: float = DEFAULT_WALK_RATE_HZ,
    speed_mps: float = DEFAULT_WALK_SPEED_MPS,
    seed: int = 0,
) -> BuildingWalk:
    """Walk the corridors (each segment once each way per lap) and visit every room per lap.

    Each lap is an Eulerian circuit of the corridor graph with every segment doubled, drawn
    at random from the start node (the south-west corner); each room is visited on one of the
    two traversals of its segment. Laps repeat, in another order, until ``duration_s``. The
    walk of a shorter duration is the start of a longer one while both fit in one lap.

    Args:
        world: the floor to walk (only its plan is used).
        duration_s: length of the walk in seconds.
        rate_hz: sample rate in Hz.
        speed_mps: the walker's mean pace on straight stretches, m/s.
        seed: seed of the lap orders, the room loops' directions and the pace variation.

    Returns:
        The walk, sampled at ``rate_hz`` from t = 0 to ``duration_s``.
    """
    if not (duration_s > 0.0 and rate_hz > 0.0 and speed_mps > 0.0):
        raise ValueError(
            f"duration_s, rate_hz and speed_mps must be positive; got {duration_s}, {rate_hz}, "
            f"{speed_mps}"
        )
    plan = world.plan
    time_s = np.arange(int(np.floor(duration_s * rate_hz)) + 1) / rate_hz
    laps = 1
    while True:
        route = _route(plan, laps, seed)
        path = _Path.through(route.points)
        s_grid, t_grid = _pace(path, speed_mps, np.random.default_rng((seed, _PACE_STREAM)))
        if t_grid[-1] >= time_s[-1]:
            break
        laps = max(laps + 1, int(np.ceil(laps * time_s[-1] / t_grid[-1])))
    s = np.interp(time_s, t_grid, s_grid)
    position, heading = path.evaluate(s)
    segment = np.clip(np.searchsorted(path.vertex_s, s, side="right") - 1, 0, None)
    pass_index = route.segment_pass[np.minimum(segment, route.segment_pass.size - 1)]
    passes = int(pass_index.max()) + 1
    return BuildingWalk(
        time_s=time_s,
        position_m=position,
        heading_rad=heading,
        pass_index=pass_index,
        pass_edge=route.pass_edge[:passes],
        pass_room=route.pass_room[:passes],
    )


def simulate_building_run(
    world: BuildingWorld,
    walk: BuildingWalk,
    *,
    noise_ut: float = DEFAULT_NOISE_UT,
    pass_offset_ut: float = DEFAULT_PASS_OFFSET_UT,
    seed: int = 0,
) -> BuildingRun:
    """Read the field along a walk in the sensor frame, with per-pass offsets and noise.

    The reading is the map-frame field stretched along itself by the pass's offset (its norm
    gains exactly the offset), rotated by minus the heading into the sensor frame, plus white
    noise per axis.

    Args:
        world: the field to read.
        walk: where and when.
        noise_ut: standard deviation of the white noise per axis, µT.
        pass_offset_ut: standard deviation of the per-pass offset of the norm, µT.
        seed: seed of the offsets and the noise.

    Returns:
        The run; with no noise ``|mag_ut| == |field_ut| + pass_offset_ut[pass_index]`` and
        ``rotate_z(mag_ut, heading_rad)`` points along ``field_ut``.
    """
    if not (noise_ut >= 0.0 and pass_offset_ut >= 0.0):
        raise ValueError(
            f"noise_ut and pass_offset_ut must be non-negative; got {noise_ut}, {pass_offset_ut}"
        )
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0.0, pass_offset_ut, size=walk.pass_edge.size)
    field_map = world.field_at(walk.position_m)
    norm = np.linalg.norm(field_map, axis=1)
    stretched = field_map * ((norm + offsets[walk.pass_index]) / norm)[:, None]
    mag = rotate_z(stretched, -walk.heading_rad) + rng.normal(0.0, noise_ut, size=field_map.shape)
    return BuildingRun(
        time_s=walk.time_s,
        position_m=walk.position_m,
        heading_rad=walk.heading_rad,
        mag_ut=mag,
        field_ut=field_map,
        pass_index=walk.pass_index,
        pass_offset_ut=offsets,
    )


def write_building_bag(
    out_bag: str | os.PathLike[str],
    world: BuildingWorld | None = None,
    *,
    seed: int = 0,
    duration_s: float = DEFAULT_DURATION_S,
    rate_hz: float = DEFAULT_WALK_RATE_HZ,
    pose_rate_hz: float | None = DEFAULT_POSE_RATE_HZ,
    speed_mps: float = DEFAULT_WALK_SPEED_MPS,
    noise_ut: float = DEFAULT_NOISE_UT,
    pass_offset_ut: float = DEFAULT_PASS_OFFSET_UT,
    storage: str = "mcap",
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    pose_type: str = "pose_stamped",
    force: bool = False,
) -> BagSummary:
    """Walk the floor and write the run in the layout of :func:`write_synthetic_bag`.

    ``mag_topic``: MagneticField in tesla, sensor frame ``imu_link``, covariance diag = noise
    variance (the pass offsets are not in it: they are the error a map must average out);
    ``pose_topic``: the true pose in frame ``map`` (z = 0, yaw = heading). Stamps start at
    ``BASE_EPOCH_NS``.

    Args:
        out_bag: the bag directory to create.
        world: the floor; None builds ``make_building_world(seed)``.
        seed: seed of the world (unless given), the walk and the run.
        duration_s: walk length in seconds.
        rate_hz: magnetometer rate in Hz.
        pose_rate_hz: pose rate in Hz; None writes one pose per reading.
        speed_mps: walking pace, m/s.
        noise_ut: magnetometer white noise per axis, µT.
        pass_offset_ut: standard deviation of the per-pass offset of the norm, µT.
        storage: ``"mcap"`` or ``"sqlite3"``.
        mag_topic: magnetometer topic.
        pose_topic: pose topic.
        pose_type: ``"pose_stamped"``, ``"pose_with_covariance_stamped"`` or ``"odometry"``.
        force: replace an existing bag at ``out_bag``.

    Returns:
        A summary of the bag written.

    Raises:
        BagError: ``out_bag`` exists and ``force`` is false, or the bag cannot be written.
    """
    world = make_building_world(seed) if world is None else world
    walk = building_walk(
        world, duration_s=duration_s, rate_hz=rate_hz, speed_mps=speed_mps, seed=seed
    )
    run = simulate_building_run(
        world, walk, noise_ut=noise_ut, pass_offset_ut=pass_offset_ut, seed=seed
    )
    width, depth = world.size_m
    return write_walk_bag(
        out_bag, run, noise_ut=noise_ut, pose_rate_hz=pose_rate_hz, storage=storage,
        mag_topic=mag_topic, pose_topic=pose_topic, pose_type=pose_type, force=force,
        custom_data={
            "gp_mapper.source": (
                f"building world {width:g} x {depth:g} m seed {world.seed}, walk seed {seed}"
            ),
            "gp_mapper.field_frame": "body (rotated by -heading)",
            "gp_mapper.pass_offset_ut": f"{pass_offset_ut:g}",
        },
    )  # fmt: skip


def path_cells(
    walk_positions_m: np.ndarray,
    resolution_m: float,
    radius_m: float = PATH_RADIUS_M,
    *,
    origin_m: tuple[float, float] = (0.0, 0.0),
) -> np.ndarray:
    """Centres of the grid cells within ``radius_m`` of the walk's samples.

    The grid is a :class:`gp_mapper.mapping.grid.GridSpec`'s: cell (i, j) has its centre at
    ``origin_m + ((i, j) + 0.5) * resolution_m`` (i along x).

    Args:
        walk_positions_m: [N, 2] walk samples, metres (dense: 100 Hz at 1.2 m/s is 12 mm).
        resolution_m: cell size, m/cell.
        radius_m: distance from the path, metres.
        origin_m: outer corner of cell (0, 0), metres.

    Returns:
        [C, 2] cell centres, metres, sorted by cell (i, then j).
    """
    walk = _points_2d(walk_positions_m, "walk_positions_m")
    if not (resolution_m > 0.0 and radius_m >= 0.0):
        raise ValueError(
            f"resolution_m must be positive and radius_m non-negative; got {resolution_m}, "
            f"{radius_m}"
        )
    origin = np.asarray(origin_m, dtype=np.float64)
    if walk.shape[0] == 0:
        return np.empty((0, 2))
    cell = np.floor((walk - origin) / resolution_m).astype(np.int64)
    reach = int(np.ceil(radius_m / resolution_m)) + 1
    low = cell.min(axis=0) - reach
    rows = int(cell[:, 1].max() + reach - low[1]) + 1
    # cells as one integer each (x-major), so that unique works on a flat array
    touched = np.unique((cell[:, 0] - low[0]) * rows + (cell[:, 1] - low[1]))
    steps = np.arange(-reach, reach + 1)
    offsets = (steps[:, None] * rows + steps[None, :]).ravel()
    keys = np.unique((touched[:, None] + offsets[None, :]).ravel())
    cells = np.column_stack([keys // rows + low[0], keys % rows + low[1]])
    centres = origin + (cells + 0.5) * resolution_m
    distance, _ = cKDTree(walk).query(centres, distance_upper_bound=radius_m + resolution_m)
    return centres[distance <= radius_m]


def first_visit_times(
    points_m: np.ndarray,
    walk_time_s: np.ndarray,
    walk_positions_m: np.ndarray,
    radius_m: float = PATH_RADIUS_M,
) -> np.ndarray:
    """When the walk first came within ``radius_m`` of each point.

    Args:
        points_m: [M, 2] places (e.g. :func:`path_cells`), metres.
        walk_time_s: [N] sample times, seconds, increasing.
        walk_positions_m: [N, 2] walk samples, metres.
        radius_m: distance that counts as a visit, metres.

    Returns:
        [M] time of the first sample within ``radius_m`` of each point, seconds; inf where the
        walk never comes that close.
    """
    points = _points_2d(points_m, "points_m")
    walk = _points_2d(walk_positions_m, "walk_positions_m")
    times = np.asarray(walk_time_s, dtype=np.float64)
    if times.shape != (walk.shape[0],):
        raise ValueError(f"expected walk_time_s [{walk.shape[0]}], got {times.shape}")
    if np.any(np.diff(times) < 0.0):
        raise ValueError("walk_time_s must be non-decreasing")
    first = np.full(points.shape[0], np.inf)
    if points.shape[0] == 0 or walk.shape[0] == 0:
        return first
    tree = cKDTree(points)
    for start in range(0, walk.shape[0], VISIT_CHUNK):
        chunk = walk[start : start + VISIT_CHUNK]
        hits = tree.query_ball_point(chunk, radius_m)
        counts = np.fromiter(map(len, hits), dtype=np.intp, count=len(hits))
        point = np.fromiter(itertools.chain.from_iterable(hits), np.intp, int(counts.sum()))
        sample = np.repeat(np.arange(start, start + chunk.shape[0]), counts)
        new = np.isinf(first[point])
        # Hits come in sample order, so a point's first hit is its earliest visit.
        found, at = np.unique(point[new], return_index=True)
        first[found] = times[sample[new][at]]
    return first


# --- Floor plan construction ---------------------------------------------------------------


def _office_plan(size_m: tuple[float, float]) -> FloorPlan:
    """The ring-and-cross-corridor office layout scaled to ``size_m`` (see the module doc)."""
    width, depth = (float(v) for v in size_m)
    half = 0.5 * CORRIDOR_WIDTH_M
    ring = PERIMETER_DEPTH_M + half  # centre line of the ring corridor from the outer wall
    xs = np.linspace(ring, width - ring, CROSS_CORRIDORS + 2)
    ys = np.array([ring, 0.5 * depth, depth - ring])
    block_x = np.diff(xs) - CORRIDOR_WIDTH_M - 2.0 * WALL_M
    block_y = np.diff(ys) - CORRIDOR_WIDTH_M - 2.0 * WALL_M
    if min(0.5 * (block_x.min() - WALL_M), block_y.min()) < MIN_ROOM_M:
        raise ValueError(f"floor {width:g} x {depth:g} m is too small for the office layout")

    nodes = np.array([(x, y) for y in ys for x in xs])
    node_id = {(i, j): j * xs.size + i for j in range(ys.size) for i in range(xs.size)}
    edges = [(node_id[i, j], node_id[i + 1, j]) for j in range(ys.size) for i in range(xs.size - 1)]
    edges += [
        (node_id[i, j], node_id[i, j + 1]) for i in range(xs.size) for j in range(ys.size - 1)
    ]
    edge_array = np.array(edges, dtype=np.int64)
    lo = np.minimum(nodes[edge_array[:, 0]], nodes[edge_array[:, 1]]) - half
    hi = np.maximum(nodes[edge_array[:, 0]], nodes[edge_array[:, 1]]) + half
    corridors = np.column_stack([lo[:, 0], hi[:, 0], lo[:, 1], hi[:, 1]])

    # (room rectangle, side of its door): perimeter offices, then two rooms per core block.
    rooms: list[tuple[tuple[float, float, float, float], str]] = []
    # partitions meet the ring at its junctions, so that no office straddles one
    band_x = _split([xs[0] - half, *xs[1:-1], xs[-1] + half])
    band_y = _split([ys[0] - half, *ys[1:-1], ys[-1] + half])
    inner = ring - half - WALL_M
    rooms += [((x0, x1, WALL_M, inner), "north") for x0, x1 in band_x]
    rooms += [((x0, x1, depth - inner, depth - WALL_M), "south") for x0, x1 in band_x]
    rooms += [((WALL_M, inner, y0, y1), "east") for y0, y1 in band_y]
    rooms += [((width - inner, width - WALL_M, y0, y1), "west") for y0, y1 in band_y]
    for j in range(ys.size - 1):
        y0, y1 = ys[j] + half + WALL_M, ys[j + 1] - half - WALL_M
        for i in range(xs.size - 1):
            x0, x1 = xs[i] + half + WALL_M, xs[i + 1] - half - WALL_M
            mid = 0.5 * (x0 + x1)
            # one room of each block opens onto the middle cross corridor, the other onto a
            # north-south one; staggered between the rows so that no two doors face
            west, east = ("west", "north") if j == 0 else ("south", "east")
            rooms.append(((x0, mid - 0.5 * WALL_M, y0, y1), west))
            rooms.append(((mid + 0.5 * WALL_M, x1, y0, y1), east))

    placed: dict[tuple[str, float], list[float]] = {}
    room_rects, doors, centres, normals, room_edges = [], [], [], [], []
    for rect, side in rooms:
        door = _place_door(rect, side, xs, ys, placed)
        room_rects.append(rect)
        doors.append(door.rect)
        centres.append(door.centre)
        normals.append(door.normal)
        room_edges.append(_edge_at(door.stop, nodes, edge_array))
    return FloorPlan(
        size_m=(width, depth),
        nodes_m=nodes,
        edges=edge_array,
        corridors_m=corridors,
        rooms_m=np.array(room_rects, dtype=np.float64),
        doors_m=np.array(doors, dtype=np.float64),
        door_centres_m=np.array(centres, dtype=np.float64),
        door_normals=np.array(normals, dtype=np.float64),
        room_edges=np.array(room_edges, dtype=np.int64),
    )


def _split(stretches: list[float]) -> list[tuple[float, float]]:
    """Rooms about ``ROOM_WIDTH_M`` wide along a band cut at ``stretches`` (partitions between)."""
    rooms = []
    for lo, hi in itertools.pairwise(stretches):
        bounds = np.linspace(lo, hi, max(1, round((hi - lo) / ROOM_WIDTH_M)) + 1)
        rooms += [(x0 + 0.5 * WALL_M, x1 - 0.5 * WALL_M) for x0, x1 in itertools.pairwise(bounds)]
    return rooms


class _Door(NamedTuple):
    rect: tuple[float, float, float, float]
    centre: tuple[float, float]
    normal: tuple[float, float]
    stop: np.ndarray  # [2] point on the corridor centre line in front of the door


# side of the room the door is in -> unit normal from the corridor into the room
_INTO_ROOM = {"north": (0.0, -1.0), "south": (0.0, 1.0), "east": (-1.0, 0.0), "west": (1.0, 0.0)}


def _place_door(
    rect: tuple[float, float, float, float],
    side: str,
    xs: np.ndarray,
    ys: np.ndarray,
    placed: dict[tuple[str, float], list[float]],
) -> _Door:
    """Put a room's door as near the middle of its wall as the junctions and doors allow."""
    x0, x1, y0, y1 = rect
    normal = np.array(_INTO_ROOM[side])
    along_x = side in ("north", "south")
    into = float(normal[1] if along_x else normal[0])  # +1 / -1 across the wall
    face = {"north": y1, "south": y0, "east": x1, "west": x0}[side]  # the room's side
    line = face - (WALL_M + 0.5 * CORRIDOR_WIDTH_M) * into  # the corridor's centre line
    lo, hi = (x0, x1) if along_x else (y0, y1)
    lo, hi = lo + DOOR_SIDE_MARGIN_M, hi - DOOR_SIDE_MARGIN_M
    key = ("y" if along_x else "x", round(line, 6))
    blocked = [float(v) for v in (xs if along_x else ys)] + placed.get(key, [])
    preferred = 0.5 * (lo + hi)
    candidates = [preferred, lo, hi] + [b + s * MIN_DOOR_GAP_M for b in blocked for s in (-1, 1)]
    allowed = [
        c
        for c in candidates
        if lo - GEOMETRY_TOL_M <= c <= hi + GEOMETRY_TOL_M
        and all(abs(c - b) >= MIN_DOOR_GAP_M - GEOMETRY_TOL_M for b in blocked)
    ]
    if not allowed:
        box = tuple(round(float(v), 2) for v in rect)
        raise ValueError(
            f"no room for a door in the {side} wall of room {box}: the floor is too small for "
            "the office layout"
        )
    at = min(allowed, key=lambda c: (abs(c - preferred), c))
    placed.setdefault(key, []).append(at)
    half_door = 0.5 * DOOR_WIDTH_M
    across = sorted((face, face - WALL_M * into))
    middle = face - 0.5 * WALL_M * into
    if along_x:
        door_rect = (at - half_door, at + half_door, across[0], across[1])
        centre, stop = (at, middle), (at, line)
    else:
        door_rect = (across[0], across[1], at - half_door, at + half_door)
        centre, stop = (middle, at), (line, at)
    return _Door(door_rect, centre, (float(normal[0]), float(normal[1])), np.array(stop))


def _edge_at(point: np.ndarray, nodes: np.ndarray, edges: np.ndarray) -> int:
    """The corridor segment whose centre line passes through ``point`` [2]."""
    a, b = nodes[edges[:, 0]], nodes[edges[:, 1]]
    lo, hi = np.minimum(a, b) - GEOMETRY_TOL_M, np.maximum(a, b) + GEOMETRY_TOL_M
    on = np.all((point >= lo) & (point <= hi), axis=1)
    found = np.flatnonzero(on)
    if found.size != 1:
        raise ValueError(f"door stop {point} lies on {found.size} corridor segments")
    return int(found[0])


# --- Route: waypoints and passes -----------------------------------------------------------


class _Route(NamedTuple):
    points: np.ndarray  # [K + 1, 2] waypoints
    segment_pass: np.ndarray  # [K] pass of each segment between waypoints
    pass_edge: np.ndarray  # [P]
    pass_room: np.ndarray  # [P]


class _RouteBuilder:
    """Waypoints with the pass of the segment that reaches each one."""

    def __init__(self, start: np.ndarray) -> None:
        self.points: list[np.ndarray] = [start]
        self.segment_pass: list[int] = []
        self.pass_edge: list[int] = []
        self.pass_room: list[int] = []

    def new_pass(self, *, edge: int = -1, room: int = -1) -> int:
        self.pass_edge.append(edge)
        self.pass_room.append(room)
        return len(self.pass_edge) - 1

    def add(self, point: np.ndarray, pass_id: int) -> None:
        if np.linalg.norm(point - self.points[-1]) < PROFILE_STEP_M:
            raise RuntimeError(f"waypoint {point} repeats {self.points[-1]}")
        self.points.append(np.asarray(point, dtype=np.float64))
        self.segment_pass.append(pass_id)

    def heading(self) -> np.ndarray | None:
        if len(self.points) < 2:
            return None
        step = self.points[-1] - self.points[-2]
        return step / np.linalg.norm(step)

    def build(self) -> _Route:
        return _Route(
            points=np.array(self.points),
            segment_pass=np.array(self.segment_pass, dtype=np.int64),
            pass_edge=np.array(self.pass_edge, dtype=np.int64),
            pass_room=np.array(self.pass_room, dtype=np.int64),
        )


def _route(plan: FloorPlan, laps: int, seed: int) -> _Route:
    """``laps`` laps from node 0, each drawn from its own stream of ``seed``."""
    builder = _RouteBuilder(plan.nodes_m[0])
    stops = plan.door_stops_m
    for lap in range(laps):
        rng = np.random.default_rng((seed, _LAP_STREAM, lap))
        arcs = _euler_circuit(plan.nodes_m.shape[0], plan.edges, 0, rng)
        traversals: dict[int, list[int]] = {}
        for k, (_, _, edge) in enumerate(arcs):
            traversals.setdefault(edge, []).append(k)
        visits: dict[int, list[int]] = {}
        for room, edge in enumerate(plan.room_edges.tolist()):
            visits.setdefault(int(rng.choice(traversals[edge])), []).append(room)
        for k, (a, b, edge) in enumerate(arcs):
            start, end = plan.nodes_m[a], plan.nodes_m[b]
            u = (end - start) / np.linalg.norm(end - start)
            corridor = builder.new_pass(edge=edge)
            came = builder.heading()
            # junctions turn by 0 or 90 degrees, or (came @ u = -1) straight back
            if came is not None and came @ u < -0.5:
                # step aside inside the junction instead of turning on the spot
                left = np.array([-u[1], u[0]])
                builder.add(start + SIDESTEP_M * rng.choice((-1.0, 1.0)) * left, corridor)
                builder.add(start + REJOIN_M * u, corridor)
            for room in sorted(visits.get(k, []), key=lambda r: float((stops[r] - start) @ u)):
                builder.add(stops[room], corridor)
                visit = builder.new_pass(room=room)
                for point in _room_loop(plan, room, float(rng.choice((-1.0, 1.0)))):
                    builder.add(point, visit)
                builder.add(stops[room], visit)
            builder.add(end, corridor)
    return builder.build()


def _euler_circuit(
    num_nodes: int, edges: np.ndarray, start: int, rng: np.random.Generator
) -> list[tuple[int, int, int]]:
    """A random closed walk from ``start`` along every edge once in each direction.

    Hierholzer's algorithm on the symmetric digraph (every node's in-degree equals its
    out-degree, so the circuit exists on a connected graph); it avoids walking straight back
    where it can.

    Returns:
        The arcs (from node, to node, edge index) in walking order.
    """
    out: list[list[tuple[int, int]]] = [[] for _ in range(num_nodes)]
    for e, (a, b) in enumerate(edges.tolist()):
        out[a].append((b, e))
        out[b].append((a, e))
    for arcs in out:
        rng.shuffle(arcs)  # type: ignore[arg-type]
    stack: list[tuple[int, int, int]] = [(start, -1, -1)]  # (node, came from, edge)
    circuit: list[tuple[int, int, int]] = []
    while stack:
        node, came_from, _ = stack[-1]
        arcs = out[node]
        if arcs:
            onward = [i for i, (to, _) in enumerate(arcs) if to != came_from]
            to, edge = arcs.pop(onward[-1] if onward else len(arcs) - 1)
            stack.append((to, node, edge))
        else:
            circuit.append(stack.pop())
    circuit.reverse()
    return [(came_from, node, edge) for node, came_from, edge in circuit[1:]]


def _room_loop(plan: FloorPlan, room: int, sense: float) -> list[np.ndarray]:
    """Waypoints inside a room: from beside the door round a rectangle and back beside it.

    The rectangle keeps ``ROOM_LOOP_INSET_M`` from the walls, is at most ``ROOM_LOOP_MAX_M``
    per side and has its near side through the point ``ROOM_LOOP_INSET_M`` inside the door.
    ``sense`` (+1 / -1) picks the way round.
    """
    x0, x1, y0, y1 = plan.rooms_m[room]
    normal = plan.door_normals[room]
    along = np.array([-normal[1], normal[0]])
    door = plan.door_centres_m[room]
    inside = door + (0.5 * WALL_M + ROOM_LOOP_INSET_M) * normal
    corners = np.array([[x0, y0], [x1, y1]])
    a_lo, a_hi = np.sort(corners @ along)
    a_lo, a_hi = a_lo + ROOM_LOOP_INSET_M, a_hi - ROOM_LOOP_INSET_M
    n_far = float(np.max(corners @ normal)) - ROOM_LOOP_INSET_M
    length = min(ROOM_LOOP_MAX_M, a_hi - a_lo)
    start = float(np.clip(door @ along - 0.5 * length, a_lo, a_hi - length))
    depth = min(ROOM_LOOP_MAX_M, n_far - inside @ normal)
    near_lo = inside + (start - inside @ along) * along
    near_hi = near_lo + length * along
    far = depth * normal
    ring = [near_lo, near_lo + far, near_hi + far, near_hi]
    if sense < 0.0:
        ring.reverse()
    return [inside, *ring, inside]


# --- Smooth path and pace ------------------------------------------------------------------


class _Path(NamedTuple):
    """Straight pieces and circular arcs, joined with a continuous heading.

    Arrays are per piece: ``start_s`` its arc-length start; ``origin`` the start of a line or
    the centre of an arc; ``direction`` a line's unit direction; ``radius`` (0 for lines),
    ``phase`` (an arc's start angle about its centre) and ``sense`` (+1 counter-clockwise,
    -1 clockwise, 0 straight). ``vertex_s`` [K + 1] is the arc length at each waypoint (the
    middle of its rounded corner).
    """

    start_s: np.ndarray
    origin: np.ndarray
    direction: np.ndarray
    radius: np.ndarray
    phase: np.ndarray
    sense: np.ndarray
    vertex_s: np.ndarray
    length_m: float

    @classmethod
    def through(cls, points: np.ndarray) -> _Path:
        """Round each corner of the polyline ``points`` [K + 1, 2] with a tangent arc."""
        step = np.diff(points, axis=0)
        seg = np.linalg.norm(step, axis=1)
        unit = step / seg[:, None]
        count = points.shape[0]
        cut, radius, sense, turn = (np.zeros(count) for _ in range(4))
        for k in range(1, count - 1):
            cross = unit[k - 1, 0] * unit[k, 1] - unit[k - 1, 1] * unit[k, 0]
            theta = float(np.arctan2(abs(cross), unit[k - 1] @ unit[k]))
            if theta < MIN_TURN_RAD:
                continue
            half = np.tan(0.5 * theta)
            # two neighbouring corners share a segment: each may use half of it
            radius[k] = min(TURN_RADIUS_M, 0.5 * min(seg[k - 1], seg[k]) / half)
            cut[k], sense[k], turn[k] = radius[k] * half, np.sign(cross), theta
        pieces: list[tuple[np.ndarray, np.ndarray, float, float, float, float]] = []
        vertex_s = [0.0]
        s = 0.0
        cursor = points[0]
        for k in range(1, count):
            u = unit[k - 1]
            corner_in = points[k] - cut[k] * u
            straight = float(np.linalg.norm(corner_in - cursor))
            if straight > 0.0:
                pieces.append((cursor, u, 0.0, 0.0, 0.0, s))
                s += straight
            if radius[k] > 0.0:
                left = np.array([-u[1], u[0]])
                centre = corner_in + sense[k] * radius[k] * left
                radial = corner_in - centre
                phase = float(np.arctan2(radial[1], radial[0]))
                pieces.append((centre, np.zeros(2), radius[k], phase, sense[k], s))
                vertex_s.append(s + 0.5 * radius[k] * turn[k])
                s += radius[k] * turn[k]
                cursor = points[k] + cut[k] * unit[k]
            else:
                vertex_s.append(s)
                cursor = points[k]
        origin, direction, rad, phase, sense_arr, start = zip(*pieces, strict=True)
        return cls(
            start_s=np.array(start),
            origin=np.array(origin),
            direction=np.array(direction),
            radius=np.array(rad),
            phase=np.array(phase),
            sense=np.array(sense_arr),
            vertex_s=np.array(vertex_s),
            length_m=s,
        )

    def _piece(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        piece = np.clip(np.searchsorted(self.start_s, s, side="right") - 1, 0, None)
        return piece, s - self.start_s[piece]

    def curvature(self, s: np.ndarray) -> np.ndarray:
        """[S] signed curvature (1/m) at arc lengths ``s`` [S]."""
        piece, _ = self._piece(s)
        radius = self.radius[piece]
        return np.where(radius > 0.0, self.sense[piece] / np.where(radius > 0.0, radius, 1.0), 0.0)

    def evaluate(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions [S, 2] and headings [S] (radians in (-pi, pi]) at arc lengths ``s`` [S]."""
        piece, local = self._piece(s)
        radius = self.radius[piece]
        arc = radius > 0.0
        line_xy = self.origin[piece] + local[:, None] * self.direction[piece]
        line_heading = np.arctan2(self.direction[piece, 1], self.direction[piece, 0])
        sense = self.sense[piece]
        angle = self.phase[piece] + sense * local / np.where(arc, radius, 1.0)
        arc_xy = self.origin[piece] + radius[:, None] * np.column_stack(
            [np.cos(angle), np.sin(angle)]
        )
        xy = np.where(arc[:, None], arc_xy, line_xy)
        heading = np.where(arc, angle + sense * 0.5 * np.pi, line_heading)
        return xy, np.angle(np.exp(1j * heading))


def _pace(path: _Path, speed_mps: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Arc length [S] and time [S] along the path at the walker's pace.

    The pace drifts around ``speed_mps`` (a few sinusoids of arc length), is capped where a turn
    would exceed ``MAX_TURN_RATE_RADPS`` and changes at most at ``MAX_ACCELERATION_MPS2``. The
    sinusoids depend on arc length only, so a longer route keeps a shorter one's pace.
    """
    # a fixed step (the last one shorter), so that routes sharing a start share its profile
    step = PROFILE_STEP_M
    count = int(np.ceil(path.length_m / step)) + 1
    s = np.minimum(np.arange(count) * step, path.length_m)
    wavelength = rng.uniform(*SPEED_WAVELENGTHS_M, size=SPEED_HARMONICS)
    phase = rng.uniform(0.0, 2.0 * np.pi, size=SPEED_HARMONICS)
    # SPEED_HARMONICS sinusoids of variance amplitude² / 2 add up to SPEED_VARIATION²
    amplitude = SPEED_VARIATION * np.sqrt(2.0 / SPEED_HARMONICS)
    drift = amplitude * np.sin(2.0 * np.pi * s[:, None] / wavelength + phase).sum(axis=1)
    # the tightest curvature within a step of each point, so both ends of a step on an arc
    # obey the turn-rate cap
    curvature = np.max([np.abs(path.curvature(s + d)) for d in (-step, 0.0, step)], axis=0)
    with np.errstate(divide="ignore"):
        turn_cap = MAX_TURN_RATE_RADPS / curvature  # inf on straight pieces
    cap2 = np.minimum(speed_mps * (1.0 + drift), turn_cap) ** 2
    # v² may change by 2 a ds per step: the largest such profile under the cap is the lower
    # envelope of cones, min_j (cap²_j + 2 a ds |i - j|), i.e. two running minima.
    rise = 2.0 * MAX_ACCELERATION_MPS2 * step * np.arange(count)
    forward = np.minimum.accumulate(cap2 - rise) + rise
    backward = np.minimum.accumulate((cap2 + rise)[::-1])[::-1] - rise
    speed = np.sqrt(np.minimum(forward, backward))
    dt = 0.5 * np.diff(s) * (1.0 / speed[1:] + 1.0 / speed[:-1])
    return s, np.concatenate([[0.0], np.cumsum(dt)])


# --- Helpers ---------------------------------------------------------------------------------


def _plane_peak_factor(direction: np.ndarray) -> np.ndarray:
    """max |B| on a plane 1 m above a unit dipole of each direction [P, 3] -> [P].

    By symmetry the peak lies in the vertical plane through the moment; along it
    |B| = sqrt(1 + 3 (m^.r^)²) / |r|³ with r = (x, 1).
    """
    horizontal = np.hypot(direction[:, 0], direction[:, 1])[:, None]
    vertical = direction[:, 2:3]
    x = np.arange(
        -PEAK_SEARCH_HALF_WIDTH, PEAK_SEARCH_HALF_WIDTH + PEAK_SEARCH_STEP / 2, PEAK_SEARCH_STEP
    )
    r2 = x**2 + 1.0
    cos2 = (horizontal * x + vertical) ** 2 / r2
    return np.max(np.sqrt(1.0 + 3.0 * cos2) / r2**1.5, axis=1)


def _points_2d(points: np.ndarray, name: str) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"expected {name} [N, 2], got {p.shape}")
    return p


def _unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` directions uniform on the sphere, [count, 3]."""
    v = rng.normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)
