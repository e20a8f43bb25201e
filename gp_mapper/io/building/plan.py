"""The office floor's plan: corridors as a graph of segments, rooms and their doors."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

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
# Corners are rounded with this radius where the waypoints leave room (it keeps within the 1 m
# half-width of a corridor: the arc cuts the corner by 0.41 radii).
TURN_RADIUS_M = 0.8


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
