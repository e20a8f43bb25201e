"""The scoring helpers: the map cells near the path and when the walk first came near each."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.spatial import cKDTree

# The benchmark scores the map within this distance of the path, m.
PATH_RADIUS_M = 0.3
# Walk samples searched at once by first_visit_times.
VISIT_CHUNK = 8192


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


def _points_2d(points: np.ndarray, name: str) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"expected {name} [N, 2], got {p.shape}")
    return p
