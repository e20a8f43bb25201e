"""A MapSnapshot -> the messages the node publishes (pure: no node, no clock).

``~/mean`` and ``~/variance`` are occupancy-style grids (known cells scaled into 1..98,
unknown cells -1; the scale goes to /diagnostics so values can be recovered), ``~/field``
holds the exact float values, ``~/field_cells`` the known cells as RViz cubes one grid cell
wide (at the resolution in use, coarsened or not), ``~/inducing_points`` the inducing inputs.
A vector map (target: vector) adds its components to ``~/field`` and draws its horizontal
field as ``~/field_arrows``; its ``~/mean`` and ``~/variance`` are those of |B|.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from nav_msgs.msg import OccupancyGrid
from sensor_msgs.msg import PointCloud2
from visualization_msgs.msg import Marker, MarkerArray

from gp_mapper.mapping.occupancy import direction_unknown, scale_to_occupancy
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.ros.cell_marker import cell_marker_cdr, viridis
from gp_mapper.ros.cloud_messages import field_cloud
from gp_mapper.ros.grid_messages import occupancy_grid
from gp_mapper.ros.marker_messages import (
    ARROW_MARKER_NS,
    delete_all_markers,
    field_arrows,
    inducing_markers,
)

# Inducing-point spheres are 1.5 cells across: visible over the grid without covering
# the neighbouring cells.
MARKER_DIAMETER_CELLS = 1.5

# Keys of the occupancy scale in /diagnostics: a grid value v in 1..98 stands for
# lo + (v - 1) / 97 * (hi - lo).
SCALE_KEYS = ("mean_scale_lo", "mean_scale_hi", "variance_scale_lo", "variance_scale_hi")


class MapMessages(NamedTuple):
    """Every map message of one snapshot, and the occupancy scale of the two grids.

    Attributes:
        mean: occupancy-style posterior mean.
        variance: occupancy-style posterior variance.
        field: exact mean and variance at the cell centres.
        markers: the inducing points (or a DELETEALL after a reset).
        cells: the known cells as a serialized Marker CUBE_LIST coloured by the mean, each
            cube as wide as a grid cell (or a DELETE after a reset).
        scale: SCALE_KEYS -> value [µT for the mean, µT² for the variance]; NaN when
            no cell is known.
        arrows: a vector map's field arrows (a DELETEALL first), a lone DELETEALL for "no
            map"; None for a map of one scalar.
    """

    mean: OccupancyGrid
    variance: OccupancyGrid
    field: PointCloud2
    markers: MarkerArray
    cells: bytes
    scale: dict[str, float]
    arrows: MarkerArray | None = None


def snapshot_messages(
    snapshot: MapSnapshot,
    *,
    frame_id: str,
    unknown_variance_ratio: float,
    z_m: float = 0.0,
) -> MapMessages:
    """The published messages of one snapshot, stamped with its newest sample's stamp.

    Args:
        snapshot: the map.
        frame_id: the map frame.
        unknown_variance_ratio: a cell is unknown (-1 in both grids) where its variance
            exceeds this times the prior variance.
        z_m: height of the grid plane and of 2-D inducing points [m].
    """
    grid = snapshot.grid
    stamp = snapshot.stamp_ns
    unknown = snapshot.unknown(unknown_variance_ratio)
    mean_data, mean_lo, mean_hi = scale_to_occupancy(snapshot.mean, unknown)
    var_data, var_lo, var_hi = scale_to_occupancy(snapshot.variance, unknown)
    res = grid.resolution_m
    x, y = grid.cell_centres()
    arrows = None
    if snapshot.field_mean is not None:
        assert snapshot.field_variance is not None
        drawn = ~unknown & ~direction_unknown(snapshot.field_mean, snapshot.field_variance)
        arrows = field_arrows(
            x, y, snapshot.field_mean, snapshot.mean, drawn, res, frame_id, stamp, z_m
        )
    return MapMessages(
        mean=occupancy_grid(mean_data, grid.origin_m, res, frame_id, stamp, z_m),
        variance=occupancy_grid(var_data, grid.origin_m, res, frame_id, stamp, z_m),
        field=exact_cloud(snapshot, frame_id, z_m),
        markers=inducing_markers(
            snapshot.inducing_m, frame_id, stamp, MARKER_DIAMETER_CELLS * res, z_m
        ),
        cells=_cells(x, y, snapshot.mean, unknown, (mean_lo, mean_hi), res, frame_id, stamp, z_m),
        scale=dict(zip(SCALE_KEYS, (mean_lo, mean_hi, var_lo, var_hi), strict=True)),
        arrows=arrows,
    )


def exact_cloud(snapshot: MapSnapshot, frame_id: str, z_m: float = 0.0) -> PointCloud2:
    """``~/field``: the exact values, at full resolution where the snapshot has them
    (``full_resolution_cells``), else on its grid."""
    exact = snapshot.exact
    x, y = exact.grid.cell_centres()
    return field_cloud(
        x, y, exact.mean, exact.variance, frame_id, snapshot.stamp_ns, z_m,
        field_mean=exact.field_mean, field_variance=exact.field_variance,
    )  # fmt: skip


def empty_messages(frame_id: str, stamp_ns: int, resolution_m: float) -> MapMessages:
    """What "no map" looks like on the latched topics: 0 x 0 grids, an empty cloud and
    DELETEALL markers, so a late subscriber never sees a map that was reset."""
    empty = np.zeros((0, 0))
    return MapMessages(
        mean=occupancy_grid(empty, (0.0, 0.0), resolution_m, frame_id, stamp_ns),
        variance=occupancy_grid(empty, (0.0, 0.0), resolution_m, frame_id, stamp_ns),
        field=field_cloud(np.zeros(0), np.zeros(0), empty, empty, frame_id, stamp_ns),
        markers=delete_all_markers(frame_id, stamp_ns),
        cells=cell_marker_cdr(
            np.zeros((0, 3)), np.zeros((0, 4)), resolution_m, frame_id, stamp_ns, Marker.DELETE
        ),
        scale=dict.fromkeys(SCALE_KEYS, float("nan")),
        arrows=delete_all_markers(frame_id, stamp_ns, ARROW_MARKER_NS),
    )


def _cells(
    x: np.ndarray,
    y: np.ndarray,
    mean: np.ndarray,
    unknown: np.ndarray,
    mean_range: tuple[float, float],
    resolution_m: float,
    frame_id: str,
    stamp_ns: int,
    z_m: float,
) -> bytes:
    """The known cells as a CUBE_LIST, coloured on the same scale as the ``~/mean`` grid."""
    xx, yy = np.meshgrid(x, y)  # [H, W], cell (i, j) at [j, i]
    known = ~unknown
    centres = np.stack([xx[known], yy[known], np.full(int(known.sum()), z_m)], axis=1)
    lo, hi = mean_range
    span = hi - lo if np.isfinite(hi - lo) and hi > lo else 1.0
    colors = viridis((mean[known] - lo) / span)
    return cell_marker_cdr(centres, colors, resolution_m, frame_id, stamp_ns)
