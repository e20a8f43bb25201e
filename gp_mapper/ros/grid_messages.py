"""Map layers as ``nav_msgs/OccupancyGrid`` and back.

Conventions: ``data`` is row-major starting at cell (0, 0); cell (1, 0) is next in +x and cell
(0, 1) is at index ``width``. An array ``a[H, W]`` with ``a[j, i]`` the cell at column ``i`` (x)
and row ``j`` (y) therefore maps to ``a.ravel()`` (C order). ``info.origin`` is the pose of the
outer corner of cell (0, 0). The scaling of a continuous layer into occupancy-style values is
gp_mapper.mapping.occupancy's.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

import array
from collections.abc import Sequence

import numpy as np
from nav_msgs.msg import OccupancyGrid

from gp_mapper.mapping.occupancy import OCCUPANCY_UNKNOWN
from gp_mapper.ros.errors import ConversionError
from gp_mapper.ros.stamps import message_header, ns_to_stamp

# nav_msgs/OccupancyGrid: occupancy probabilities run 0..100, -1 is unknown.
OCCUPANCY_LIMIT = 100


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
    msg.header = message_header(frame_id, stamp_ns)
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
