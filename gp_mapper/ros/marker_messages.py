"""Markers: the inducing points and, for a vector map, the field arrows.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from gp_mapper.ros.cell_marker import viridis
from gp_mapper.ros.errors import ConversionError
from gp_mapper.ros.stamps import message_header

# Marker namespace of the field arrows of a vector map (ids 0..K-1, one ARROW each).
ARROW_MARKER_NS = "field_arrows"

# At most about this many arrows: a readable field in RViz, and a MarkerArray of a few
# hundred Marker objects builds in milliseconds (each is a Python object).
MAX_ARROWS = 400

# Shaft and head diameters and head length of an arrow, as fractions of its spacing: thin
# enough that neighbours never touch, the head long enough to read the direction.
ARROW_SHAFT_CELLS = 0.08
ARROW_HEAD_CELLS = 0.2
ARROW_HEAD_LENGTH_CELLS = 0.25

# Marker namespace and id of the inducing-point SPHERE_LIST: stable, so each publish
# replaces the previous list in RViz instead of adding a new one.
INDUCING_MARKER_NS = "inducing_points"
INDUCING_MARKER_ID = 0

# Inducing points in magenta, opaque: distinct from the costmap palette under them.
INDUCING_MARKER_RGBA = (1.0, 0.0, 1.0, 1.0)


def inducing_markers(
    points_m: np.ndarray,
    frame_id: str,
    stamp_ns: int,
    diameter_m: float,
    z_m: float = 0.0,
) -> MarkerArray:
    """Inducing inputs -> a MarkerArray of one SPHERE_LIST (stable ns and id).

    Args:
        points_m: [M, 2] (x, y) or [M, 3] (x, y, z) inducing inputs in ``frame_id`` [m].
        frame_id: frame of the points (the map frame).
        stamp_ns: header stamp [ns].
        diameter_m: sphere diameter [m] (``scale.x/y/z``).
        z_m: height used for 2-D points [m].

    Raises:
        ConversionError: points are not [M, 2] or [M, 3].
    """
    pts = np.asarray(points_m, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise ConversionError(f"inducing points must be [M, 2] or [M, 3]; got {pts.shape}")
    marker = Marker()
    marker.header = message_header(frame_id, stamp_ns)
    marker.ns = INDUCING_MARKER_NS
    marker.id = INDUCING_MARKER_ID
    marker.type = Marker.SPHERE_LIST
    marker.action = Marker.ADD
    marker.pose.orientation.w = 1.0
    marker.scale.x = marker.scale.y = marker.scale.z = float(diameter_m)
    r, g, b, a = INDUCING_MARKER_RGBA
    marker.color = ColorRGBA(r=r, g=g, b=b, a=a)
    z = pts[:, 2] if pts.shape[1] == 3 else np.full(len(pts), float(z_m))
    marker.points = [
        Point(x=float(px), y=float(py), z=float(pz))
        for px, py, pz in zip(pts[:, 0], pts[:, 1], z, strict=True)
    ]
    return MarkerArray(markers=[marker])


def delete_all_markers(frame_id: str, stamp_ns: int, ns: str = INDUCING_MARKER_NS) -> MarkerArray:
    """A MarkerArray holding one DELETEALL marker, sent when the map is reset."""
    return MarkerArray(markers=[_delete_all(frame_id, stamp_ns, ns)])


def _delete_all(frame_id: str, stamp_ns: int, ns: str) -> Marker:
    marker = Marker()
    marker.header = message_header(frame_id, stamp_ns)
    marker.ns = ns
    marker.id = 0
    marker.action = Marker.DELETEALL
    return marker


def arrow_stride(shape: tuple[int, int], max_arrows: int = MAX_ARROWS) -> int:
    """The smallest cell stride k with at most ``max_arrows`` arrows on every k-th cell of
    every k-th row of an [H, W] grid."""
    height, width = shape
    k = 1
    while math.ceil(height / k) * math.ceil(width / k) > max_arrows:
        k += 1
    return k


def field_arrows(
    x_m: np.ndarray,
    y_m: np.ndarray,
    field_mean: np.ndarray,
    norm_mean: np.ndarray,
    known: np.ndarray,
    resolution_m: float,
    frame_id: str,
    stamp_ns: int,
    z_m: float = 0.0,
    max_arrows: int = MAX_ARROWS,
) -> MarkerArray:
    """A vector map's horizontal field as ARROW markers on a coarse grid.

    Every k-th cell of every k-th row (k = ``arrow_stride``, so at most ``max_arrows``) that
    is known gets an arrow from its centre along the horizontal mean field (bx, by): the
    direction a compass reads there. Lengths are proportional to the horizontal magnitude,
    the longest one coarse cell (k cells); colours run viridis over the known |B| of the
    whole map (as ``~/field_cells``). The vertical component is in ``~/field``. The first
    marker is a DELETEALL of the namespace, so arrows of a larger earlier map do not linger.

    Args:
        x_m: [W] cell-centre x [m].
        y_m: [H] cell-centre y [m].
        field_mean: [H, W, 3] map-frame components [µT].
        norm_mean: [H, W] |B| [µT], for the colour.
        known: [H, W] bool, cells that get arrows (unknown cells stay blank).
        resolution_m: cell size [m/cell].
        frame_id: the map frame.
        stamp_ns: header stamp [ns].
        z_m: height of the arrows [m].
        max_arrows: cap on the number of arrows.

    Returns:
        DELETEALL, then one ARROW per chosen cell (ns ``ARROW_MARKER_NS``, ids 0..K-1).

    Raises:
        ConversionError: the shapes do not agree.
    """
    x = np.asarray(x_m, dtype=np.float64)
    y = np.asarray(y_m, dtype=np.float64)
    field = np.asarray(field_mean, dtype=np.float64)
    norm = np.asarray(norm_mean, dtype=np.float64)
    known = np.asarray(known, dtype=bool)
    shape = (y.size, x.size)
    if field.shape != (*shape, 3) or norm.shape != shape or known.shape != shape:
        raise ConversionError(
            f"field_arrows needs field [H, W, 3], norm and known [H, W] for H, W = {shape}; "
            f"got {field.shape}, {norm.shape}, {known.shape}"
        )
    markers = [_delete_all(frame_id, stamp_ns, ARROW_MARKER_NS)]
    ok = known & np.isfinite(field).all(axis=-1) & np.isfinite(norm)
    if max_arrows < 1:
        raise ConversionError(f"max_arrows must be at least 1; got {max_arrows}")
    if not ok.any():
        return MarkerArray(markers=markers)
    k = arrow_stride(shape, max_arrows)
    spacing = k * float(resolution_m)
    rows, cols = np.arange(k // 2, shape[0], k), np.arange(k // 2, shape[1], k)
    jj, ii = np.meshgrid(rows, cols, indexing="ij")
    jj, ii = jj[ok[jj, ii]], ii[ok[jj, ii]]
    horizontal = field[jj, ii, :2]
    magnitude = np.hypot(horizontal[:, 0], horizontal[:, 1])
    longest = float(magnitude.max())
    scale = spacing / longest if longest > 0.0 else 0.0
    lo, hi = float(norm[ok].min()), float(norm[ok].max())
    colors = viridis((norm[jj, ii] - lo) / (hi - lo if hi > lo else 1.0))
    header = message_header(frame_id, stamp_ns)
    for n, (j, i) in enumerate(zip(jj, ii, strict=True)):
        marker = Marker()
        marker.header = header
        marker.ns = ARROW_MARKER_NS
        marker.id = n
        marker.type = Marker.ARROW
        marker.action = Marker.ADD
        marker.pose.orientation.w = 1.0
        start = Point(x=float(x[i]), y=float(y[j]), z=float(z_m))
        dx, dy = scale * horizontal[n]
        marker.points = [start, Point(x=start.x + float(dx), y=start.y + float(dy), z=start.z)]
        marker.scale.x = ARROW_SHAFT_CELLS * spacing
        marker.scale.y = ARROW_HEAD_CELLS * spacing
        marker.scale.z = ARROW_HEAD_LENGTH_CELLS * spacing
        r, g, b, a = (float(c) for c in colors[n])
        marker.color = ColorRGBA(r=r, g=g, b=b, a=a)
        markers.append(marker)
    return MarkerArray(markers=markers)
