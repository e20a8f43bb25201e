"""The map's cells as one RViz CUBE_LIST marker, sized by the grid's (coarsened) resolution.

A PointCloud2 carries no point size: RViz draws ``~/field`` with the size set in its
display, so once the grid coarsens (``max_cells``) the cloud falls apart into dots. A
``visualization_msgs/Marker`` CUBE_LIST carries its cube size (``scale``) in the message, so
``~/field_cells`` always tiles the grid, whatever the resolution.

The marker is written straight to CDR with numpy: building 40 000 ``Point`` and
``ColorRGBA`` objects and serialising them through rclpy takes ~0.35 s on the executor
thread; this takes a few milliseconds. The publisher sends the bytes as they are (rclpy
publishes serialized messages unchanged); ``rclpy.serialization.deserialize_message``
reads them back, which is how the tests check the layout.
"""

from __future__ import annotations

import struct

import numpy as np
from visualization_msgs.msg import Marker

CELL_MARKER_NS = "field_cells"
CELL_MARKER_ID = 0
# Cube height [m]: thin enough to read as a tile, thick enough not to z-fight the grid.
CELL_THICKNESS_M = 0.01
# CDR little-endian encapsulation header (PLAIN_CDR, options 0): what rmw writes first.
CDR_LE_HEADER = b"\x00\x01\x00\x00"
# Anchors of matplotlib's viridis colormap at 0, 0.25, 0.5, 0.75, 1 (sRGB in 0..1): the
# cells read as a perceptually uniform scale from low (purple) to high (yellow) field.
VIRIDIS_ANCHORS = np.array(
    [
        [0.267, 0.005, 0.329],
        [0.229, 0.322, 0.546],
        [0.128, 0.567, 0.551],
        [0.369, 0.789, 0.383],
        [0.993, 0.906, 0.144],
    ]
)


def viridis(values: np.ndarray) -> np.ndarray:
    """Values in [0, 1] -> RGBA [N, 4] float32 (opaque), by interpolating VIRIDIS_ANCHORS."""
    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
    stops = np.linspace(0.0, 1.0, len(VIRIDIS_ANCHORS))
    rgb = np.stack([np.interp(v, stops, VIRIDIS_ANCHORS[:, k]) for k in range(3)], axis=-1)
    return np.concatenate([rgb, np.ones((len(v), 1))], axis=1).astype(np.float32)


class _CdrWriter:
    """Little-endian CDR: each primitive aligned to its size from the start of the data."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0

    def _align(self, n: int) -> None:
        pad = (-self._size) % n
        if pad:
            self._raw(b"\x00" * pad)

    def _raw(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)

    def put(self, fmt: str, *values: float | int, align: int) -> None:
        self._align(align)
        self._raw(struct.pack("<" + fmt, *values))

    def string(self, text: str) -> None:
        data = text.encode() + b"\x00"
        self.put("I", len(data), align=4)
        self._raw(data)

    def array(self, values: np.ndarray, align: int) -> None:
        """A sequence: its length, then (if any) the packed elements aligned to ``align``."""
        self.put("I", len(values), align=4)
        if len(values):
            self._align(align)
            self._raw(np.ascontiguousarray(values).tobytes())

    def data(self) -> bytes:
        return CDR_LE_HEADER + b"".join(self._parts)


def _time(w: _CdrWriter, stamp_ns: int) -> None:
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    w.put("iI", sec, nanosec, align=4)


def cell_marker_cdr(
    centres_m: np.ndarray,
    colors: np.ndarray,
    cell_m: float,
    frame_id: str,
    stamp_ns: int,
    action: int = Marker.ADD,
) -> bytes:
    """A serialized ``visualization_msgs/Marker`` CUBE_LIST of square cells.

    Args:
        centres_m: [N, 3] cell centres in ``frame_id`` [m].
        colors: [N, 4] RGBA in 0..1, one per cell.
        cell_m: cube edge in x and y: the grid resolution [m].
        frame_id: the map frame.
        stamp_ns: header stamp [ns].
        action: Marker.ADD, or Marker.DELETE to clear the cells (with N = 0).

    Returns:
        The CDR bytes that ``Publisher.publish`` sends as they are.

    Raises:
        ValueError: the shapes do not agree.
    """
    centres = np.asarray(centres_m, dtype="<f8")
    rgba = np.asarray(colors, dtype="<f4")
    if centres.ndim != 2 or centres.shape[1] != 3 or rgba.shape != (len(centres), 4):
        raise ValueError(
            f"expected centres [N, 3] and colors [N, 4]; got {centres.shape}, {rgba.shape}"
        )
    w = _CdrWriter()
    _time(w, stamp_ns)  # header
    w.string(frame_id)
    w.string(CELL_MARKER_NS)
    w.put("iii", CELL_MARKER_ID, Marker.CUBE_LIST, action, align=4)
    w.put("3d", 0.0, 0.0, 0.0, align=8)  # pose.position
    w.put("4d", 0.0, 0.0, 0.0, 1.0, align=8)  # pose.orientation: identity
    w.put("3d", float(cell_m), float(cell_m), CELL_THICKNESS_M, align=8)  # scale
    w.put("4f", 1.0, 1.0, 1.0, 1.0, align=4)  # color (per-cell colors take precedence)
    w.put("iI", 0, 0, align=4)  # lifetime 0: forever
    w.put("?", False, align=1)  # frame_locked
    w.array(centres, align=8)  # points: geometry_msgs/Point, three float64
    w.array(rgba, align=4)  # colors: std_msgs/ColorRGBA, four float32
    w.string("")  # texture_resource
    _time(w, 0)  # texture: sensor_msgs/CompressedImage (empty)
    w.string("")
    w.string("")
    w.array(np.zeros(0, np.uint8), align=1)
    w.array(np.zeros((0, 2), "<f4"), align=4)  # uv_coordinates
    w.string("")  # text
    w.string("")  # mesh_resource
    w.string("")  # mesh_file.filename
    w.array(np.zeros(0, np.uint8), align=1)  # mesh_file.data
    w.put("?", False, align=1)  # mesh_use_embedded_materials
    return w.data()
