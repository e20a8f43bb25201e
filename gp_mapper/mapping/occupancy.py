"""Occupancy-style scaling of a continuous layer for `nav_msgs/OccupancyGrid`, as grid_map does.

Known cells map linearly into 1..98, the range RViz's "costmap" colour scheme draws as a
blue-to-red gradient (99 and 100 have special colours there, 0 is transparent); unknown cells
are -1. The scale (lo, hi) is returned so that the values can be recovered.
"""

from __future__ import annotations

import numpy as np

OCCUPANCY_MIN = 1  # lowest value of the gradient in RViz's costmap palette
OCCUPANCY_MAX = 98  # highest value of the gradient in RViz's costmap palette
OCCUPANCY_UNKNOWN = -1  # nav_msgs/OccupancyGrid: unknown
_LEVELS = OCCUPANCY_MAX - OCCUPANCY_MIN


def unknown_mask(variance: np.ndarray, prior_variance: np.ndarray, ratio: float) -> np.ndarray:
    """Cells the map knows nothing about: variance above `ratio` times the prior variance.

    Args:
        variance: [H, W] posterior variance (µT²).
        prior_variance: [H, W] variance with no data (µT²).
        ratio: Threshold, in [0, 1].

    Returns:
        [H, W] bool, True where unknown (or where either input is not finite).
    """
    variance = np.asarray(variance, dtype=np.float64)
    prior_variance = np.asarray(prior_variance, dtype=np.float64)
    finite = np.isfinite(variance) & np.isfinite(prior_variance)
    with np.errstate(invalid="ignore"):
        return ~finite | (variance > ratio * prior_variance)


# An arrow of the horizontal field is drawn where its sd, sqrt(var_bx + var_by), is at most this
# share of its length: its direction is then known to within about 27 degrees (atan 0.5) at one
# sd. Far from the path the posterior's mean still points somewhere with an sd of 15-25 µT
# (Aalto run 3), which the variance-ratio rule alone draws.
ARROW_SD_SHARE = 0.5


def direction_unknown(field_mean: np.ndarray, field_variance: np.ndarray) -> np.ndarray:
    """Cells whose horizontal field direction the map does not know (no arrow there).

    Args:
        field_mean: [H, W, 3] mean field (µT).
        field_variance: [H, W, 3] variance of each component (µT²).

    Returns:
        [H, W] bool, True where sqrt(var_bx + var_by) > ARROW_SD_SHARE · |(bx, by)| (or where
        an input is not finite).
    """
    mean = np.asarray(field_mean, dtype=np.float64)[..., :2]
    variance = np.asarray(field_variance, dtype=np.float64)[..., :2]
    finite = np.isfinite(mean).all(axis=-1) & np.isfinite(variance).all(axis=-1)
    with np.errstate(invalid="ignore"):
        sd = np.sqrt(variance.sum(axis=-1))
        return ~finite | (sd > ARROW_SD_SHARE * np.hypot(mean[..., 0], mean[..., 1]))


def scale_to_occupancy(
    values: np.ndarray,
    unknown: np.ndarray,
    lo: float | None = None,
    hi: float | None = None,
) -> tuple[np.ndarray, float, float]:
    """Scale a float layer into 1..98, with -1 for unknown cells.

    Args:
        values: [H, W] the layer (any unit); NaN or inf cells count as unknown.
        unknown: [H, W] bool, True where the cell is unknown.
        lo: Value mapped to 1; default the smallest known value.
        hi: Value mapped to 98; default the largest known value. Values outside [lo, hi] clip.

    Returns:
        (occupancy [H, W] int8, lo, hi). A value v maps to 1 + round(97 (v - lo) / (hi - lo));
        `occupancy_to_values` inverts it to within (hi - lo) / 194. If hi <= lo every known
        cell is 1. If no cell is known, lo and hi are NaN (unless given).
    """
    values = np.asarray(values, dtype=np.float64)
    unknown = np.asarray(unknown, dtype=bool)
    if unknown.shape != values.shape:
        raise ValueError(f"unknown {unknown.shape} must match values {values.shape}")
    known = ~unknown & np.isfinite(values)
    if lo is None:
        lo = float(values[known].min()) if known.any() else float("nan")
    if hi is None:
        hi = float(values[known].max()) if known.any() else float("nan")
    out = np.full(values.shape, OCCUPANCY_UNKNOWN, dtype=np.int8)
    if known.any():
        span = hi - lo
        if span > 0.0:
            fraction = np.clip((values[known] - lo) / span, 0.0, 1.0)
            out[known] = (OCCUPANCY_MIN + np.rint(fraction * _LEVELS)).astype(np.int8)
        else:
            out[known] = OCCUPANCY_MIN
    return out, float(lo), float(hi)


def occupancy_to_values(occupancy: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Invert `scale_to_occupancy`: [H, W] int8 -> [H, W] float64, NaN where unknown (-1)."""
    occupancy = np.asarray(occupancy)
    values = lo + (occupancy.astype(np.float64) - OCCUPANCY_MIN) / _LEVELS * (hi - lo)
    return np.where(occupancy == OCCUPANCY_UNKNOWN, np.nan, values)
