"""Pure conversions between ROS messages and gp_mapper records and arrays.

Nothing here touches a node, a clock or a thread: every function maps its arguments to a
new message or record, so each is tested on in-memory messages.

Conventions (``nav_msgs/msg/OccupancyGrid``): ``data`` is row-major starting at cell (0, 0);
cell (1, 0) is next in +x and cell (0, 1) is at index ``width``. An array ``a[H, W]`` with
``a[j, i]`` the cell at column ``i`` (x) and row ``j`` (y) therefore maps to ``a.ravel()``
(C order). ``info.origin`` is the pose of the outer corner of cell (0, 0). The scaling of a
continuous layer into occupancy-style values is gp_mapper.mapping.occupancy's.
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PoseStamped, PoseWithCovarianceStamped
from geometry_msgs.msg import Pose as PoseMsg
from nav_msgs.msg import OccupancyGrid, Odometry
from sensor_msgs.msg import MagneticField, PointCloud2, PointField
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from gp_mapper.mapping.occupancy import OCCUPANCY_UNKNOWN
from gp_mapper.mapping.records import FieldReading, Pose
from gp_mapper.ros.cell_marker import viridis
from gp_mapper.ros.errors import ConversionError

NS_PER_S = 1_000_000_000  # builtin_interfaces/Time: sec + nanosec, nanosec < 1e9

# nav_msgs/OccupancyGrid: occupancy probabilities run 0..100, -1 is unknown.
OCCUPANCY_LIMIT = 100

# PointCloud2 layout of ~/field: five little-endian float32 per point, in this order.
FIELD_CLOUD_FIELDS: tuple[str, ...] = ("x", "y", "z", "mean", "variance")
FIELD_CLOUD_DTYPE = np.dtype([(name, "<f4") for name in FIELD_CLOUD_FIELDS])
# A vector map's cloud adds its map-frame components and their variances, in this order.
VECTOR_CLOUD_FIELDS: tuple[str, ...] = (
    *FIELD_CLOUD_FIELDS, "bx", "by", "bz", "var_bx", "var_by", "var_bz",
)  # fmt: skip
VECTOR_CLOUD_DTYPE = np.dtype([(name, "<f4") for name in VECTOR_CLOUD_FIELDS])

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

# DiagnosticStatus levels (diagnostic_msgs/msg/DiagnosticStatus.msg), as the byte values
# the generated Python class stores.
DIAGNOSTIC_OK = DiagnosticStatus.OK
DIAGNOSTIC_WARN = DiagnosticStatus.WARN
DIAGNOSTIC_ERROR = DiagnosticStatus.ERROR
DIAGNOSTIC_STALE = DiagnosticStatus.STALE

# PointField datatype -> numpy little-endian dtype, for reading any cloud back.
_POINTFIELD_DTYPES: Mapping[int, str] = {
    PointField.INT8: "i1",
    PointField.UINT8: "u1",
    PointField.INT16: "<i2",
    PointField.UINT16: "<u2",
    PointField.INT32: "<i4",
    PointField.UINT32: "<u4",
    PointField.FLOAT32: "<f4",
    PointField.FLOAT64: "<f8",
}


# --------------------------------------------------------------------------------------
# Stamps


def stamp_to_ns(stamp: Time) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def ns_to_stamp(stamp_ns: int) -> Time:
    """Integer nanoseconds -> ``builtin_interfaces/Time`` (floor division for negatives)."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return Time(sec=sec, nanosec=nanosec)


def _header(frame_id: str, stamp_ns: int) -> Header:
    return Header(stamp=ns_to_stamp(stamp_ns), frame_id=frame_id)


# --------------------------------------------------------------------------------------
# Inputs


def field_reading_from_msg(msg: MagneticField) -> FieldReading:
    """``sensor_msgs/MagneticField`` -> FieldReading, unchanged: tesla, sensor frame.

    NaN, infinite or all-zero vectors pass through; the pipeline counts and drops them.

    Args:
        msg: the magnetometer message (``magnetic_field`` in T, ``header.frame_id`` the
            sensor frame).

    Returns:
        FieldReading(stamp_ns, field_t [3] float64 in T, frame_id).
    """
    v = msg.magnetic_field
    field_t = np.array([v.x, v.y, v.z], dtype=np.float64)
    return FieldReading(stamp_to_ns(msg.header.stamp), field_t, msg.header.frame_id)


def _pose_record(stamp: Time, pose: PoseMsg) -> Pose:
    p, q = pose.position, pose.orientation
    return Pose(
        stamp_to_ns(stamp),
        np.array([p.x, p.y, p.z], dtype=np.float64),
        np.array([q.x, q.y, q.z, q.w], dtype=np.float64),
    )


def pose_from_pose_stamped(msg: PoseStamped) -> Pose:
    """``geometry_msgs/PoseStamped`` -> Pose (position [3] m, orientation xyzw [4])."""
    return _pose_record(msg.header.stamp, msg.pose)


def pose_from_pose_with_covariance(msg: PoseWithCovarianceStamped) -> Pose:
    """``geometry_msgs/PoseWithCovarianceStamped`` -> Pose; the covariance is not used."""
    return _pose_record(msg.header.stamp, msg.pose.pose)


def pose_from_odometry(msg: Odometry) -> Pose:
    """``nav_msgs/Odometry`` -> Pose of ``child_frame_id`` in ``header.frame_id``."""
    return _pose_record(msg.header.stamp, msg.pose.pose)


class PoseInput(NamedTuple):
    """A pose message type the node can subscribe to, and its conversion."""

    msg_type: type
    convert: Callable[[Any], Pose]  # takes a msg_type message


# Values of the node parameter ``pose_type``.
POSE_INPUTS: Mapping[str, PoseInput] = {
    "pose_stamped": PoseInput(PoseStamped, pose_from_pose_stamped),
    "pose_with_covariance": PoseInput(PoseWithCovarianceStamped, pose_from_pose_with_covariance),
    "odometry": PoseInput(Odometry, pose_from_odometry),
}


# --------------------------------------------------------------------------------------
# Grids


def occupancy_grid(
    data: np.ndarray,
    origin_m: Sequence[float],
    resolution_m: float,
    frame_id: str,
    stamp_ns: int,
    z_m: float = 0.0,
) -> OccupancyGrid:
    """An int8 occupancy-style layer -> ``nav_msgs/OccupancyGrid``.

    Args:
        data: [H, W] integers in -1..100; ``data[j, i]`` is the cell at column i (x) and
            row j (y).
        origin_m: (x, y) of the outer corner of cell (0, 0) in ``frame_id`` [m].
        resolution_m: cell size [m/cell].
        frame_id: frame of the grid (the map frame).
        stamp_ns: header stamp and ``info.map_load_time`` [ns].
        z_m: height of the grid plane [m].

    Returns:
        The grid message, identity orientation, ``data`` in C order.

    Raises:
        ConversionError: data is not 2-D or holds values outside -1..100.
    """
    arr = np.asarray(data)
    if arr.ndim != 2:
        raise ConversionError(f"occupancy data must be [H, W]; got shape {arr.shape}")
    if arr.size and (arr.min() < OCCUPANCY_UNKNOWN or arr.max() > OCCUPANCY_LIMIT):
        raise ConversionError(f"occupancy data must lie in -1..100; got {arr.min()}..{arr.max()}")
    if not resolution_m > 0.0:
        raise ConversionError(f"resolution must be > 0 m; got {resolution_m}")
    height, width = arr.shape
    msg = OccupancyGrid()
    msg.header = _header(frame_id, stamp_ns)
    msg.info.map_load_time = ns_to_stamp(stamp_ns)
    msg.info.resolution = float(resolution_m)
    msg.info.width = int(width)
    msg.info.height = int(height)
    msg.info.origin.position.x = float(origin_m[0])
    msg.info.origin.position.y = float(origin_m[1])
    msg.info.origin.position.z = float(z_m)
    msg.info.origin.orientation.w = 1.0
    # array('b') straight from the buffer: the generated setter then skips its per-element
    # checks, which cost seconds for a large grid given as a list of Python ints.
    msg.data = array.array("b", np.ascontiguousarray(arr, dtype=np.int8).tobytes())
    return msg


def occupancy_to_array(msg: OccupancyGrid) -> np.ndarray:
    """``nav_msgs/OccupancyGrid`` -> int8 [H, W] with ``a[j, i]`` = cell (i, j)."""
    data = np.array(msg.data, dtype=np.int8)
    return data.reshape(int(msg.info.height), int(msg.info.width))


# --------------------------------------------------------------------------------------
# Exact values as a point cloud


def field_cloud(
    x_m: np.ndarray,
    y_m: np.ndarray,
    mean: np.ndarray,
    variance: np.ndarray,
    frame_id: str,
    stamp_ns: int,
    z_m: float = 0.0,
    *,
    field_mean: np.ndarray | None = None,
    field_variance: np.ndarray | None = None,
) -> PointCloud2:
    """Mean and variance at cell centres -> an organised ``sensor_msgs/PointCloud2``.

    Fields x, y, z, mean, variance, each little-endian float32; point ``j * W + i`` is
    cell (i, j), the same order as the OccupancyGrid data. With the components of a vector
    map, also bx, by, bz, var_bx, var_by, var_bz (``VECTOR_CLOUD_FIELDS``).

    Args:
        x_m: [H, W] or [W] cell-centre x [m].
        y_m: [H, W] or [H] cell-centre y [m].
        mean: [H, W] posterior mean [µT] (|B| for a vector map).
        variance: [H, W] posterior variance [µT²].
        frame_id: frame of the cloud (the map frame).
        stamp_ns: header stamp [ns].
        z_m: height of every point [m].
        field_mean: [H, W, 3] map-frame components of a vector map [µT], or None.
        field_variance: [H, W, 3] their variances [µT²]; given exactly with field_mean.

    Returns:
        The cloud: height H, width W, point_step 20 (44 with components), ``is_dense``
        False if any value is not finite.

    Raises:
        ConversionError: the shapes do not agree.
    """
    mean = np.asarray(mean)
    variance = np.asarray(variance)
    if mean.ndim != 2 or variance.shape != mean.shape:
        raise ConversionError(
            f"mean and variance must both be [H, W]; got {mean.shape}, {variance.shape}"
        )
    if (field_mean is None) != (field_variance is None):
        raise ConversionError("field_mean and field_variance come together (or neither)")
    vector = field_mean is not None
    if vector:
        field_mean, field_variance = np.asarray(field_mean), np.asarray(field_variance)
        if field_mean.shape != (*mean.shape, 3) or field_variance.shape != field_mean.shape:
            raise ConversionError(
                f"field_mean and field_variance must be [H, W, 3] = {(*mean.shape, 3)}; got "
                f"{field_mean.shape}, {field_variance.shape}"
            )
    height, width = mean.shape
    x = np.asarray(x_m, dtype=np.float64)
    y = np.asarray(y_m, dtype=np.float64)
    if x.shape == (width,) and y.shape == (height,):
        x, y = np.meshgrid(x, y)  # xy indexing: [H, W]
    if x.shape != mean.shape or y.shape != mean.shape:
        raise ConversionError(
            f"cell centres must be [H, W] or ([W], [H]) for a {mean.shape} grid; "
            f"got x {np.shape(x_m)}, y {np.shape(y_m)}"
        )
    dtype, names = (
        (VECTOR_CLOUD_DTYPE, VECTOR_CLOUD_FIELDS)
        if vector
        else (FIELD_CLOUD_DTYPE, FIELD_CLOUD_FIELDS)
    )
    points = np.empty((height, width), dtype=dtype)
    points["x"] = x
    points["y"] = y
    points["z"] = z_m
    points["mean"] = mean
    points["variance"] = variance
    values = [mean, variance]
    if vector:
        for k, axis in enumerate("xyz"):
            points[f"b{axis}"] = field_mean[..., k]
            points[f"var_b{axis}"] = field_variance[..., k]
        values += [field_mean, field_variance]

    msg = PointCloud2()
    msg.header = _header(frame_id, stamp_ns)
    msg.height = int(height)
    msg.width = int(width)
    msg.fields = [
        PointField(name=name, offset=dtype.fields[name][1], datatype=PointField.FLOAT32, count=1)
        for name in names
    ]
    msg.is_bigendian = False
    msg.point_step = dtype.itemsize
    msg.row_step = msg.point_step * int(width)
    msg.data = array.array("B", points.tobytes())
    msg.is_dense = all(bool(np.all(np.isfinite(v))) for v in values)
    return msg


def cloud_to_array(msg: PointCloud2) -> np.ndarray:
    """``sensor_msgs/PointCloud2`` -> numpy structured array [height, width].

    Reads any little-endian cloud with scalar fields (count 1), honouring offsets,
    ``point_step`` and ``row_step`` padding.

    Raises:
        ConversionError: big-endian data, an unknown datatype, a field count other than
            1, or a data length that does not match the header.
    """
    if msg.is_bigendian:
        raise ConversionError("big-endian PointCloud2 is not supported")
    names, formats, offsets = [], [], []
    for field in msg.fields:
        if field.datatype not in _POINTFIELD_DTYPES:
            raise ConversionError(f"field {field.name!r}: unknown datatype {field.datatype}")
        if field.count != 1:
            raise ConversionError(f"field {field.name!r}: count {field.count} is not 1")
        names.append(field.name)
        formats.append(_POINTFIELD_DTYPES[field.datatype])
        offsets.append(field.offset)
    dtype = np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": msg.point_step}
    )
    raw = msg.data.tobytes() if isinstance(msg.data, array.array) else bytes(msg.data)
    height, width = int(msg.height), int(msg.width)
    if len(raw) != height * msg.row_step or msg.row_step < width * msg.point_step:
        raise ConversionError(
            f"PointCloud2 data has {len(raw)} bytes; header says {height} rows of "
            f"row_step {msg.row_step} with {width} points of {msg.point_step} bytes"
        )
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, msg.row_step)
    packed = np.ascontiguousarray(rows[:, : width * msg.point_step])
    return packed.view(dtype).reshape(height, width).copy()


# --------------------------------------------------------------------------------------
# Markers


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
    marker.header = _header(frame_id, stamp_ns)
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
    marker.header = _header(frame_id, stamp_ns)
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
    header = _header(frame_id, stamp_ns)
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


# --------------------------------------------------------------------------------------
# Diagnostics


def _value_text(value: object) -> str:
    # repr of a float is the shortest text that parses back to the same double, so a
    # reader recovers the occupancy scale lo/hi exactly.
    if isinstance(value, float):
        return repr(value)
    return str(value)


def diagnostic_array(
    stamp_ns: int,
    name: str,
    hardware_id: str,
    level: bytes,
    message: str,
    values: Mapping[str, object],
) -> DiagnosticArray:
    """One DiagnosticStatus in a DiagnosticArray, values as key/value text.

    Args:
        stamp_ns: header stamp [ns].
        name: status name, e.g. ``"gp_mapper: engine"``.
        hardware_id: the compute device, e.g. ``"cpu"`` or ``"cuda:0"``.
        level: one of DIAGNOSTIC_OK, DIAGNOSTIC_WARN, DIAGNOSTIC_ERROR, DIAGNOSTIC_STALE.
        message: one-line summary.
        values: key -> value; floats are written with ``repr`` (round-trip exact).
    """
    status = DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=str(k), value=_value_text(v)) for k, v in values.items()],
    )
    return DiagnosticArray(header=_header("", stamp_ns), status=[status])


def diagnostic_values(msg: DiagnosticArray, name: str) -> dict[str, str] | None:
    """The key/value pairs of the status called ``name`` in ``msg``, or None."""
    for status in msg.status:
        if status.name == name:
            return {kv.key: kv.value for kv in status.values}
    return None
