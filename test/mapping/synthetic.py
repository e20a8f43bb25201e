"""Synthetic streams for the mapping tests: a known field sampled along a lawnmower path."""

from __future__ import annotations

import itertools

import numpy as np

from gp_mapper.mapping import FieldReading, Pose, rotate

NS_PER_S = 1_000_000_000
FIELD_MEAN_UT = 48.0  # the Aalto rooms' mean |B| (Solin et al. 2018's invensense data)
FIELD_SWING_UT = 10.0


def true_field(xy: np.ndarray) -> np.ndarray:
    """|B| (µT) of the synthetic field at [N, 2] points: 48 + 10 sin(x) cos(y)."""
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    return FIELD_MEAN_UT + FIELD_SWING_UT * np.sin(xy[:, 0]) * np.cos(xy[:, 1])


def dipole_field(
    points_m: np.ndarray, positions_m: np.ndarray, moments: np.ndarray, background_ut: np.ndarray
) -> np.ndarray:
    """A uniform field plus point dipoles: curl-free, as the ambient field is.

    B(p) = background + sum_k (3 (m_k . u) u - m_k) / |r|^3, r = p - position_k, u = r / |r|
    (the dipole field with mu0 / 4 pi folded into the moments).

    Args:
        points_m: [N, 2] (x, y) at z = 0, or [N, 3] (m).
        positions_m: [P, 3] dipole positions (m), away from the points.
        moments: [P, 3] moments (µT m³).
        background_ut: [3] the uniform part (µT).

    Returns:
        [N, 3] field (µT), map frame.
    """
    p = np.asarray(points_m, dtype=np.float64)
    if p.shape[1] == 2:
        p = np.column_stack([p, np.zeros(len(p))])
    total = np.tile(np.asarray(background_ut, dtype=np.float64), (len(p), 1))
    for position, moment in zip(positions_m, moments, strict=True):
        r = p - position
        dist = np.linalg.norm(r, axis=1, keepdims=True)
        u = r / dist
        total += (3.0 * (u @ moment)[:, None] * u - moment) / dist**3
    return total


def lawnmower(width_m: float, height_m: float, lane_m: float, step_m: float) -> np.ndarray:
    """A continuous boustrophedon path over [0, width] x [0, height], points `step_m` apart.

    Returns:
        [K, 2] (x, y) (m).
    """
    corners = []
    lanes = np.arange(0.0, height_m + 1e-9, lane_m)
    for k, y in enumerate(lanes):
        xs = (0.0, width_m) if k % 2 == 0 else (width_m, 0.0)
        corners += [(xs[0], y), (xs[1], y)]
    corners = np.asarray(corners)
    points = [corners[0]]
    for a, b in itertools.pairwise(corners):
        n = max(1, round(float(np.linalg.norm(b - a)) / step_m))
        t = np.arange(1, n + 1)[:, None] / n
        points.extend(a + t * (b - a))
    return np.asarray(points)


def yaw_quaternion(yaw: float) -> np.ndarray:
    """[4] (x, y, z, w) for a rotation of `yaw` rad about +z."""
    return np.array([0.0, 0.0, np.sin(yaw / 2.0), np.cos(yaw / 2.0)])


def stream(
    path_m: np.ndarray,
    *,
    period_ns: int = 20_000_000,
    field_map_ut: np.ndarray | None = None,
    frame_id: str = "imu_link",
    t0_ns: int = 1_700_000_000 * NS_PER_S,
    sensor_offset_ut: np.ndarray | None = None,
) -> list[Pose | FieldReading]:
    """Poses along a path and one reading half-way between consecutive poses, in stamp order.

    The sensor faces along the path (yaw = heading), so sensor-frame vectors differ from
    map-frame ones. The map-frame field is (|B|, 0, 0) rotated by 30 degrees about z unless
    `field_map_ut` [K, 3] gives one vector per pose interval. `sensor_offset_ut` [3] is added
    to every sensor-frame reading (the magnetometer's own offset, hard iron).
    """
    path_m = np.asarray(path_m, dtype=np.float64)
    heading = np.arctan2(np.gradient(path_m[:, 1]), np.gradient(path_m[:, 0]))
    events: list[Pose | FieldReading] = []
    for k, (xy, yaw) in enumerate(zip(path_m, heading, strict=True)):
        stamp = t0_ns + k * period_ns
        events.append(Pose(stamp, np.array([xy[0], xy[1], 0.0]), yaw_quaternion(yaw)))
        if k + 1 == len(path_m):
            break
        mid = 0.5 * (xy + path_m[k + 1])
        if field_map_ut is None:
            b = true_field(mid)[0]
            b_map = np.array([b * np.cos(np.pi / 6), b * np.sin(np.pi / 6), 0.0])
        else:
            b_map = field_map_ut[k]
        # Sensor-frame reading: the inverse of the interpolated orientation applied to b_map.
        yaw_mid = _mid_angle(yaw, heading[k + 1])
        q_inv = yaw_quaternion(-yaw_mid)
        b_sensor = rotate(q_inv, b_map)
        if sensor_offset_ut is not None:
            b_sensor = b_sensor + sensor_offset_ut
        events.append(FieldReading(stamp + period_ns // 2, b_sensor * 1e-6, frame_id))
    return events


def _mid_angle(a: float, b: float) -> float:
    return a + 0.5 * np.arctan2(np.sin(b - a), np.cos(b - a))


def feed(pipeline, events) -> None:
    """Hand events to a pipeline (or a Pairer-like object) in order."""
    for event in events:
        if isinstance(event, Pose):
            pipeline.add_pose(event)
        else:
            pipeline.add_field(event)
