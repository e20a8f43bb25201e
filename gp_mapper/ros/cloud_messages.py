"""The map's exact values as ``sensor_msgs/PointCloud2`` (``~/field``) and back.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

import array
from collections.abc import Mapping

import numpy as np
from sensor_msgs.msg import PointCloud2, PointField

from gp_mapper.ros.errors import ConversionError
from gp_mapper.ros.stamps import message_header

# PointCloud2 layout of ~/field: five little-endian float32 per point, in this order.
FIELD_CLOUD_FIELDS: tuple[str, ...] = ("x", "y", "z", "mean", "variance")
FIELD_CLOUD_DTYPE = np.dtype([(name, "<f4") for name in FIELD_CLOUD_FIELDS])

# A vector map's cloud adds its map-frame components and their variances, in this order.
VECTOR_CLOUD_FIELDS: tuple[str, ...] = (
    *FIELD_CLOUD_FIELDS, "bx", "by", "bz", "var_bx", "var_by", "var_bz",
)  # fmt: skip
VECTOR_CLOUD_DTYPE = np.dtype([(name, "<f4") for name in VECTOR_CLOUD_FIELDS])

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
    msg.header = message_header(frame_id, stamp_ns)
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
