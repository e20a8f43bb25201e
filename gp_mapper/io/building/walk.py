"""The walk: an Eulerian circuit of the corridors with every room visited, rounded corners and a
drifting pace."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .field import BuildingWorld
from .plan import TURN_RADIUS_M, WALL_M, FloorPlan

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
