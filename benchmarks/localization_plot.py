"""The picture of ``localization.py`` for one place and map kind: the map's ‖B‖ (grey where it
knows nothing), the true path, one seed's estimate and its 95 % position ellipses, one panel
per start (known; kidnapped, with the carry drawn as a dotted line)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from gp_mapper.mapping.localization import FieldLookup
from gp_mapper.mapping.localization.particles import CHI2_2D_95

# An ellipse every this many metres walked (at 0.2 m a batch: every 25th update).
ELLIPSE_EVERY_M = 5.0
# Ellipses wider than this (a lost or global filter) are left out: they hide the map.
ELLIPSE_MAX_M = 8.0


def ellipse_axes(covariance: np.ndarray) -> tuple[float, float, float]:
    """Width, height [m] and angle [°] of the 95 % ellipse of a 2 x 2 position covariance."""
    values, vectors = np.linalg.eigh(covariance)
    values = np.maximum(values, 0.0)
    width, height = 2.0 * np.sqrt(CHI2_2D_95 * values[::-1])
    angle = math.degrees(math.atan2(vectors[1, 1], vectors[0, 1]))
    return float(width), float(height), angle


def ellipse_updates(estimate: np.ndarray, every_m: float = ELLIPSE_EVERY_M) -> np.ndarray:
    """The updates that get an ellipse: one each ``every_m`` of the estimate's path."""
    path = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(estimate, axis=0), axis=1))])
    marks = np.searchsorted(path, np.arange(0.0, path[-1] + every_m, every_m))
    return np.unique(marks.clip(0, len(path) - 1))


def plot_place(path: Path, lookup: FieldLookup, panels: dict[str, Any], title: str) -> None:
    """Write the picture to ``path``. ``panels``: start name -> ``localization.Trace``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Ellipse

    grid = lookup.grid
    H, W = grid.shape
    x0, y0 = grid.origin_m
    extent = (x0, x0 + W * grid.resolution_m, y0, y0 + H * grid.resolution_m)
    field = np.ma.masked_array(lookup.mean_grid, mask=~lookup.known)
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("0.85")
    aspect = (extent[3] - extent[2]) / max(extent[1] - extent[0], 1e-9)
    width = 7.0 * len(panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 7.0 * aspect + 1.2), squeeze=False)
    for ax, (start, trace) in zip(axes[0], panels.items(), strict=True):
        image = ax.imshow(field, origin="lower", extent=extent, cmap=cmap, interpolation="nearest")
        k = trace.kidnap
        parts = [slice(0, k), slice(k, None)] if k is not None else [slice(None)]
        for i, part in enumerate(parts):
            ax.plot(*trace.xy[part].T, color="black", lw=1.2, label="truth" if i == 0 else None)
        if k is not None:
            ax.plot(*np.stack([trace.xy[k - 1], trace.xy[k]]).T, ls=":", color="white", lw=1.5,
                    label="carried")  # fmt: skip
            ax.plot(*trace.xy[k - 1], "wx", ms=9, mew=2)
            ax.plot(*trace.xy[k], "wo", ms=7, mfc="none", mew=2)
        ax.plot(*trace.estimate.T, color="tab:red", lw=0.9, label="estimate")
        drawn = 0
        for u in ellipse_updates(trace.estimate):
            w, h, angle = ellipse_axes(trace.covariance[u])
            if w > ELLIPSE_MAX_M:
                continue
            ax.add_patch(Ellipse(trace.estimate[u], w, h, angle=angle, fill=False,
                                 color="tab:orange", lw=0.9,
                                 label="95 % ellipse" if drawn == 0 else None))  # fmt: skip
            drawn += 1
        ax.plot(*trace.xy[0], "k^", ms=8, label="start")
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        ax.set_aspect("equal")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.set_title(f"{start} start")
        ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
        fig.colorbar(image, ax=ax, shrink=0.8, label="‖B‖ [µT] (grey: unknown)")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
