"""A bounded record of where the samples were taken, for drawing the path on the map."""

from __future__ import annotations

import numpy as np

# Points kept before the record is decimated; ~80 kB as float64 (x, y).
TRAJECTORY_CAP = 5000

# Initial spacing (m) between recorded points: finer than any sensible grid resolution.
TRAJECTORY_SPACING_M = 0.02


class Trajectory:
    """The (x, y) path, thinned by distance and kept under a cap.

    When the cap is reached every other point is dropped and the spacing doubles, so a long
    session keeps the whole path at a coarser spacing instead of only its end.

    Args:
        cap: Points kept at most.
        spacing_m: Initial minimum distance (m) between consecutive recorded points.
    """

    def __init__(self, cap: int = TRAJECTORY_CAP, spacing_m: float = TRAJECTORY_SPACING_M) -> None:
        if cap < 2:
            raise ValueError(f"cap must be at least 2 points; got {cap}")
        self._cap = cap
        self._initial_spacing = float(spacing_m)
        self._spacing = float(spacing_m)
        self._points: list[tuple[float, float]] = []

    def __len__(self) -> int:
        return len(self._points)

    @property
    def spacing_m(self) -> float:
        """Current minimum spacing (m)."""
        return self._spacing

    def add(self, x: float, y: float) -> None:
        """Record a point if it is at least the spacing from the last recorded one."""
        if self._points:
            lx, ly = self._points[-1]
            if (x - lx) ** 2 + (y - ly) ** 2 < self._spacing**2:
                return
        self._points.append((float(x), float(y)))
        if len(self._points) >= self._cap:
            self._points = self._points[::2]
            self._spacing *= 2.0

    def as_array(self) -> np.ndarray:
        """[K, 2] (x, y) (m)."""
        return np.asarray(self._points, dtype=np.float64).reshape(-1, 2)

    def load(self, points: np.ndarray) -> None:
        """Replace the record with saved points [K, 2] (thinned to the cap if needed)."""
        points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        self._points = [(float(x), float(y)) for x, y in points]
        self._spacing = self._initial_spacing
        while len(self._points) >= self._cap:
            self._points = self._points[::2]
            self._spacing *= 2.0

    def clear(self) -> None:
        """Forget the path."""
        self._points.clear()
        self._spacing = self._initial_spacing
