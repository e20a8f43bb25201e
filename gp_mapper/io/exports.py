"""Map products as files: a PNG figure, a Nav2 map_server map (YAML + PGM), and an ``.npz``.

Each product has a function over plain arrays (cell centres x [W] and y [H] in metres, grids
[H, W] with row 0 at the smallest y, as ``GridSpec`` lays them out) and a thin wrapper taking a
:class:`~gp_mapper.mapping.snapshot.MapSnapshot`. Every file is written atomically.
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from gp_mapper.engine.registry import model_entry
from gp_mapper.mapping.atomic import atomic_write_bytes, atomic_write_text
from gp_mapper.mapping.occupancy import OCCUPANCY_MIN, direction_unknown, scale_to_occupancy

from .errors import ExportError

if TYPE_CHECKING:
    from gp_mapper.mapping.snapshot import MapSnapshot

__all__ = [
    "NAV2_FREE_THRESH",
    "NAV2_OCCUPIED_THRESH",
    "Nav2MapFiles",
    "write_grids_npz",
    "write_grids_npz_arrays",
    "write_nav2_map",
    "write_nav2_map_arrays",
    "write_png",
    "write_png_arrays",
]

_LOG = logging.getLogger(__name__)

# map_server "scale" mode maps occ = 1 - shade linearly from [free_thresh, occupied_thresh] onto
# [0, 100] (nav2_map_server map_io.cpp, loadMapFromFile). With 0 and 1 the whole range is
# linear and nothing saturates, so the loaded grid reproduces the levels 1..98 exactly.
NAV2_FREE_THRESH = 0.0
NAV2_OCCUPIED_THRESH = 1.0
PGM_MAXVAL = 255  # 8-bit grey, the depth map_saver writes
# Relative tolerance for "the cell centres are evenly spaced at one resolution".
SPACING_RTOL = 1e-6
# Significant digits of the numbers in the map YAML: sub-nanometre at 1 km, and it hides the
# float noise of cell centres computed as origin + (i + 0.5) * resolution.
YAML_DIGITS = 12
PNG_DPI = 120
# One panel (map and colour bar), inches: two side by side make the 12 x 5 figure of a scalar
# map.
PNG_PANEL_IN = (6.0, 5.0)
# Quiver arrows along the longer side of a vector map's |B| panel: dense enough to show the
# field's turns, sparse enough that each arrow reads on a 6-inch panel.
PNG_QUIVER_ARROWS = 25


class Nav2MapFiles(NamedTuple):
    """What :func:`write_nav2_map_arrays` wrote.

    Attributes:
        yaml_path: the map_server YAML.
        pgm_path: the image it names.
        lo_ut: mean value shown as the lightest grey (occupancy 1), µT.
        hi_ut: mean value shown as black (occupancy 98), µT.
    """

    yaml_path: Path
    pgm_path: Path
    lo_ut: float
    hi_ut: float


# --- PNG


def write_png_arrays(
    path: str | os.PathLike[str],
    x_m: np.ndarray,
    y_m: np.ndarray,
    mean_ut: np.ndarray,
    variance_ut2: np.ndarray,
    *,
    inducing_m: np.ndarray | None = None,
    trajectory_m: np.ndarray | None = None,
    num_samples: int | None = None,
    unknown: np.ndarray | None = None,
    title: str = "Magnetic field map",
    resolution_m: float | None = None,
    support_label: str = "inducing points",
    layers: dict[str, np.ndarray] | None = None,
    field_mean_ut: np.ndarray | None = None,
    field_variance_ut2: np.ndarray | None = None,
    caption: str = "",
    nuisance: dict[str, Any] | None = None,
) -> Path:
    """Draw the mean and standard deviation side by side and save a PNG.

    A vector map (``field_mean_ut`` given) is drawn in four columns: |B| with a quiver of the
    horizontal field on a coarse grid where its direction is known, then Bx, By, Bz; their
    standard deviations below.

    Args:
        path: the PNG to write.
        x_m: [W] cell-centre x, metres, increasing and evenly spaced.
        y_m: [H] cell-centre y, metres, increasing and evenly spaced.
        mean_ut: [H, W] posterior mean, µT (row 0 at y_m[0]); |B| for a vector map.
        variance_ut2: [H, W] posterior variance, µT².
        inducing_m: [M, D] inducing inputs (their x, y are drawn), metres; None: none drawn.
        trajectory_m: [K, 2] path of the samples, metres; None: not drawn.
        num_samples: samples the map was trained on, for the title.
        unknown: [H, W] bool, cells to leave blank in the mean panels; None: show all.
        title: the figure's title, to which M and the sample count are appended.
        resolution_m: cell size, metres; None: read from the centre spacing.
        support_label: what the drawn points are (the posterior's support): "inducing
            points" for the streaming model, "kept points" for ACGP, ...
        layers: a model's extra [H, W] layers by name, drawn as more panels (a name ending in
            "variance" is drawn as its standard deviation).
        field_mean_ut: [H, W, 3] map-frame field components of a vector map, µT; None for a
            map of one scalar.
        field_variance_ut2: [H, W, 3] their variances, µT²; given exactly with
            ``field_mean_ut``.
        caption: a line under the title ("" for none): what an additive map removed.
        nuisance: an additive map's report (``nuisance_caption``'s input); with the heading
            curve's coefficients, the curve removed from the map is drawn as one more panel.

    Returns:
        The path written.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib takes ~0.3 s to import

    x, y, res = _check_axes(x_m, y_m, resolution_m)
    mean = _check_grid(mean_ut, x.size, y.size, "mean_ut")
    std = _std(_check_grid(variance_ut2, x.size, y.size, "variance_ut2"))
    extent = (x[0] - res / 2, x[-1] + res / 2, y[0] - res / 2, y[-1] + res / 2)
    mask = None if unknown is None else np.asarray(unknown, bool)
    inducing = _points(inducing_m, "inducing_m")
    trajectory = _points(trajectory_m, "trajectory_m")
    field = _check_field(field_mean_ut, field_variance_ut2, x.size, y.size)

    panels: list[_Panel] = []
    if field is None:
        columns = 2
        panels += [_Panel(_masked(mean, mask), "mean"), _Panel(std, "standard deviation")]
    else:
        columns = len(_COMPONENTS) + 1
        field_mean, field_std = field[0], _std(field[1])
        # Arrows only where the horizontal direction is known, not just the cell.
        arrows_off = direction_unknown(field_mean, field[1])
        panels.append(
            _Panel(
                _masked(mean, mask), "|B| mean", quiver=field_mean,
                quiver_mask=arrows_off if mask is None else mask | arrows_off,
            )
        )  # fmt: skip
        panels += [
            _Panel(_masked(field_mean[..., k], mask), f"{name} mean")
            for k, name in enumerate(_COMPONENTS)
        ]
        panels.append(_Panel(std, "|B| standard deviation"))
        panels += [
            _Panel(field_std[..., k], f"{name} standard deviation")
            for k, name in enumerate(_COMPONENTS)
        ]
    for name, values in (layers or {}).items():
        values = _check_grid(values, x.size, y.size, name)
        if name.endswith("variance"):
            values, name = _std(values), name.removesuffix("variance") + "standard deviation"
        panels.append(_Panel(values, name.replace("_", " ")))

    curve = heading_curve(nuisance or {})
    width, height = PNG_PANEL_IN
    rows = -(-(len(panels) + (curve is not None)) // columns)
    figure = Figure(figsize=(width * columns, height * rows), dpi=PNG_DPI, layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    # The path and the support are drawn where they explain the map: on the uncertainty
    # panels, so the mean stays readable; small marks for a large map.
    overlaid = [p.name for p in panels if "deviation" in p.name] or [p.name for p in panels]
    mark = 8.0 * min(1.0, 400.0 / max(inducing.shape[0], 1))
    for ax, panel in zip(axes, panels, strict=False):
        cmap = "magma" if "deviation" in panel.name else "viridis"
        image = ax.imshow(
            panel.values, origin="lower", extent=extent, cmap=cmap, interpolation="nearest"
        )
        figure.colorbar(image, ax=ax, label=f"{panel.name} [µT]")
        if trajectory.shape[0] and panel.name in overlaid:
            ax.plot(
                trajectory[:, 0],
                trajectory[:, 1],
                color="white",
                lw=0.6,
                alpha=0.7,
                label="trajectory",
            )
        if inducing.shape[0] and panel.name in overlaid:
            ax.scatter(
                inducing[:, 0],
                inducing[:, 1],
                s=mark,
                c="red",
                marker="x",
                lw=0.8,
                label=support_label,
            )
        if panel.quiver is not None:
            _quiver(ax, x, y, panel.quiver, panel.quiver_mask)
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        ax.set_aspect("equal")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.set_title(panel.name)
    if curve is not None:
        _draw_heading_curve(axes[len(panels)], *curve)
    if trajectory.shape[0] or inducing.shape[0]:
        legend_ax = axes[[p.name for p in panels].index(overlaid[0])]
        legend_ax.legend(loc="upper right", fontsize="small", facecolor="0.4", framealpha=0.7)
    samples = "?" if num_samples is None else f"{num_samples}"
    heading = f"{title}: M = {inducing.shape[0]} {support_label}, N = {samples} samples"
    figure.suptitle(heading + (f"\n{caption}" if caption else ""))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return atomic_write_bytes(path, buffer.getvalue())


# The components of a vector map, in the order of its last axis (map frame).
_COMPONENTS = ("Bx", "By", "Bz")


class _Panel(NamedTuple):
    values: np.ndarray  # [H, W], masked where blank
    name: str
    quiver: np.ndarray | None = None  # [H, W, 3] field drawn as arrows over the panel
    quiver_mask: np.ndarray | None = None  # [H, W] cells without an arrow


def _std(variance: np.ndarray) -> np.ndarray:
    return np.sqrt(np.clip(variance, 0.0, None))


def _masked(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return values if mask is None else np.ma.masked_array(values, mask=mask)


def _quiver(
    ax: Any, x: np.ndarray, y: np.ndarray, field: np.ndarray, mask: np.ndarray | None
) -> None:
    """The horizontal field (Bx, By) as arrows on every k-th cell, at most
    ``PNG_QUIVER_ARROWS`` along the longer side; none on masked cells (blank, or of an unknown
    direction: ``mapping.occupancy.direction_unknown``)."""
    k = max(1, -(-max(x.size, y.size) // PNG_QUIVER_ARROWS))
    rows, cols = slice(k // 2, None, k), slice(k // 2, None, k)
    u, v = field[rows, cols, 0], field[rows, cols, 1]
    if mask is not None:
        u, v = (
            np.ma.masked_array(u, mask=mask[rows, cols]),
            np.ma.masked_array(v, mask=mask[rows, cols]),
        )
    xx, yy = np.meshgrid(x[cols], y[rows])
    ax.quiver(xx, yy, u, v, color="white", pivot="mid", alpha=0.9, label="horizontal field")


def support_label(model: str) -> str:
    """What the support of the model's posterior is, for the PNG's legend and title."""
    try:
        return model_entry(model).support_label
    except ValueError:  # a map of a model this version does not know
        return "support points"


def write_png(
    path: str | os.PathLike[str], snapshot: MapSnapshot, *, unknown_ratio: float | None = None
) -> Path:
    """PNG of a snapshot (see :func:`write_png_arrays`).

    Args:
        path: the PNG to write.
        snapshot: the map.
        unknown_ratio: blank the mean where variance > ratio x prior variance; None: show all.
    """
    x, y = snapshot.grid.cell_centres()
    unknown = None if unknown_ratio is None else snapshot.unknown(unknown_ratio)
    return write_png_arrays(
        path,
        x,
        y,
        snapshot.mean,
        snapshot.variance,
        inducing_m=snapshot.inducing_m,
        trajectory_m=snapshot.trajectory_m,
        num_samples=snapshot.num_samples,
        unknown=unknown,
        resolution_m=snapshot.grid.resolution_m,
        title=f"Magnetic field map ({snapshot.model})",
        support_label=support_label(snapshot.model),
        layers=snapshot.layers,
        field_mean_ut=snapshot.field_mean,
        field_variance_ut2=snapshot.field_variance,
        caption=nuisance_caption(snapshot.report),
        nuisance=snapshot.report,
    )


def heading_curve(report: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The heading correction an additive map removed, from its report: headings [deg] every
    degree, the curve B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ there [µT], and the largest sd
    of the curve [µT] (the report keeps that, not the sd at every heading); None without one."""
    keys = [f"heading_{c}" for c in "BCDE"]
    offline = report.get("heading_curve")  # the batch model's: coefficients and sd per input
    if all(isinstance(report.get(k), int | float) for k in keys):
        b, c, d, e = (float(report[k]) for k in keys)
        sd = report.get("heading_sd_max")
    elif isinstance(offline, dict) and len(offline.get("coefficients_BCDE", ())) == 4:
        b, c, d, e = (float(v) for v in offline["coefficients_BCDE"])
        sd = max((float(v) for v in offline.get("sd", ())), default=0.0)
    else:
        return None
    degrees = np.arange(0.0, 361.0)
    psi = np.deg2rad(degrees)
    curve = b * np.sin(psi) + c * np.cos(psi) + d * np.sin(2 * psi) + e * np.cos(2 * psi)
    return degrees, curve, float(sd) if isinstance(sd, int | float) else 0.0


def _draw_heading_curve(ax: Any, degrees: np.ndarray, curve: np.ndarray, sd: float) -> None:
    ax.set_visible(True)
    ax.plot(degrees, curve, color="C0", label="heading correction")
    if sd > 0.0:
        ax.fill_between(
            degrees, curve - 2 * sd, curve + 2 * sd, color="C0", alpha=0.25,
            label="± 2 sd (the largest)",
        )  # fmt: skip
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.set_xlim(0.0, 360.0)
    ax.set_xticks(np.arange(0, 361, 90))
    ax.set_xlabel("heading ψ [deg]")
    ax.set_ylabel("removed from |B| [µT]")
    ax.set_title("heading correction")
    ax.legend(loc="upper right", fontsize="small")


def nuisance_caption(report: dict[str, Any]) -> str:
    """One line of what an additive map (gam_stream) removed, from its last update's report:
    the heading curve's coefficients, the drift and the current run's offset [µT]; "" for
    another model."""

    def number(key: str) -> bool:
        # The batch model's report holds curves under some of these names, not numbers.
        return isinstance(report.get(key), int | float) and not isinstance(report[key], bool)

    parts = []
    if all(number(f"heading_{c}") for c in "BCDE"):
        coefficients = ", ".join(f"{c} {report[f'heading_{c}']:+.2f}" for c in "BCDE")
        parts.append(f"heading B sin ψ + C cos ψ + D sin 2ψ + E cos 2ψ: {coefficients}")
    if number("drift") and number("drift_sd"):
        parts.append(f"drift {report['drift']:+.2f} ± {report['drift_sd']:.2f}")
    if number("run_offset") and number("run_offset_sd") and number("run"):
        parts.append(
            f"run {int(report['run'])} offset {report['run_offset']:+.2f} ± "
            f"{report['run_offset_sd']:.2f}"
        )
    return ("map layer (offset + map); removed [µT]: " + "; ".join(parts)) if parts else ""


# --- Nav2 map_server


def write_nav2_map_arrays(
    yaml_path: str | os.PathLike[str],
    x_m: np.ndarray,
    y_m: np.ndarray,
    mean_ut: np.ndarray,
    *,
    lo_ut: float | None = None,
    hi_ut: float | None = None,
    resolution_m: float | None = None,
) -> Nav2MapFiles:
    """Write the mean as a Nav2 map_server map: a binary PGM and its YAML (mode: scale).

    The mean is scaled linearly onto occupancy 1..98 (lo -> 1, light; hi -> 98, dark) exactly
    as the node scales its ``~/mean`` OccupancyGrid
    (:func:`gp_mapper.mapping.occupancy.scale_to_occupancy`), and each level v is stored as grey
    ``255 (100 - v) / 100``; map_server in scale mode with
    free_thresh 0 and occupied_thresh 1 loads exactly v back. The PGM's first row is the grid's
    LAST row (largest y), as map_server expects; ``origin`` is the outer corner of the cell with
    the smallest x and y. A PGM has no alpha channel, so no cell can be marked unknown.

    Args:
        yaml_path: the YAML to write; the PGM goes beside it with the suffix ``.pgm``.
        x_m: [W] cell-centre x, metres, increasing and evenly spaced.
        y_m: [H] cell-centre y, metres, same spacing.
        mean_ut: [H, W] mean, µT, row 0 at y_m[0].
        lo_ut: value shown as occupancy 1; None: the smallest finite mean.
        hi_ut: value shown as occupancy 98; None: the largest finite mean.
        resolution_m: cell size, metres; None: read from the centre spacing.

    Returns:
        The two paths and the value range used.
    """
    x, y, res = _check_axes(x_m, y_m, resolution_m)
    mean = _check_grid(mean_ut, x.size, y.size, "mean_ut")
    bad = ~np.isfinite(mean)
    if bad.all() and (lo_ut is None or hi_ut is None):
        raise ExportError("mean_ut has no finite value; pass lo_ut and hi_ut")
    if bad.any():
        _LOG.warning("%d non-finite mean cells written as the lowest level", int(bad.sum()))
    # The node's ~/mean OccupancyGrid scaling; a PGM cannot say "unknown", so a non-finite
    # cell takes the lowest level.
    levels, lo, hi = scale_to_occupancy(mean, bad, lo_ut, hi_ut)
    levels = np.where(levels < OCCUPANCY_MIN, OCCUPANCY_MIN, levels).astype(np.int64)
    grey = np.rint(PGM_MAXVAL * (100 - levels) / 100.0).astype(np.uint8)
    image = grey[::-1]  # map_server reads the first image row as the largest y
    height, width = image.shape
    pgm = f"P5\n{width} {height}\n{PGM_MAXVAL}\n".encode("ascii") + image.tobytes()

    yaml_target = Path(yaml_path)
    pgm_target = yaml_target.with_suffix(".pgm")
    origin_x, origin_y = _tidy(x[0] - res / 2), _tidy(y[0] - res / 2)
    text = (
        f"# gp_mapper mean magnetic field: occupancy 1 = {lo!r} µT, 98 = {hi!r} µT (linear)\n"
        f"image: {pgm_target.name}\n"
        "mode: scale\n"
        f"resolution: {_tidy(res)!r}\n"
        f"origin: [{origin_x!r}, {origin_y!r}, 0.0]\n"
        "negate: 0\n"
        f"occupied_thresh: {NAV2_OCCUPIED_THRESH!r}\n"
        f"free_thresh: {NAV2_FREE_THRESH!r}\n"
    )
    atomic_write_bytes(pgm_target, pgm)  # the image first: the YAML must never name a missing file
    atomic_write_text(yaml_target, text)
    return Nav2MapFiles(yaml_target, pgm_target, lo, hi)


def write_nav2_map(yaml_path: str | os.PathLike[str], snapshot: MapSnapshot) -> Nav2MapFiles:
    """Nav2 map of a snapshot's mean (see :func:`write_nav2_map_arrays`)."""
    x, y = snapshot.grid.cell_centres()
    return write_nav2_map_arrays(
        yaml_path, x, y, snapshot.mean, resolution_m=snapshot.grid.resolution_m
    )


# --- npz


def write_grids_npz_arrays(
    path: str | os.PathLike[str],
    x_m: np.ndarray,
    y_m: np.ndarray,
    mean_ut: np.ndarray,
    variance_ut2: np.ndarray,
    *,
    resolution_m: float | None = None,
    layers: dict[str, np.ndarray] | None = None,
) -> Path:
    """Save the grids as ``.npz`` (no pickles): x [W], y [H] cell centres (m), mean [H, W] (µT),
    variance [H, W] (µT²), and a model's extra layers [H, W] under their own names (e.g.
    SOLVE-GP's coarse and detail means). Read back with ``np.load(path, allow_pickle=False)``.

    ``resolution_m`` (m) is only needed to check a 1 x 1 grid; it is not stored.
    """
    x, y, _ = _check_axes(x_m, y_m, resolution_m)
    mean = _check_grid(mean_ut, x.size, y.size, "mean_ut")
    variance = _check_grid(variance_ut2, x.size, y.size, "variance_ut2")
    extra = {name: _check_grid(v, x.size, y.size, name) for name, v in (layers or {}).items()}
    clash = sorted(set(extra) & {"x", "y", "mean", "variance"})
    if clash:
        raise ExportError(f"layer names {clash} clash with the grid's own arrays")
    buffer = io.BytesIO()
    np.savez(buffer, x=x, y=y, mean=mean, variance=variance, **extra)
    return atomic_write_bytes(path, buffer.getvalue())


def write_grids_npz(path: str | os.PathLike[str], snapshot: MapSnapshot) -> Path:
    """``.npz`` of a snapshot's exact values (see :func:`write_grids_npz_arrays`), at full
    resolution where it has them (``full_resolution_cells``); a vector map adds its
    components bx, by, bz (µT) and their variances var_bx, var_by, var_bz (µT²), [H, W] each,
    the names of the node's ``~/field`` cloud."""
    exact = snapshot.exact
    x, y = exact.grid.cell_centres()
    layers = dict(exact.layers)
    if exact.field_mean is not None and exact.field_variance is not None:
        for k, axis in enumerate("xyz"):
            layers[f"b{axis}"] = exact.field_mean[..., k]
            layers[f"var_b{axis}"] = exact.field_variance[..., k]
    return write_grids_npz_arrays(
        path, x, y, exact.mean, exact.variance, resolution_m=exact.grid.resolution_m,
        layers=layers,
    )  # fmt: skip


# --- checks


def _check_axes(
    x_m: np.ndarray, y_m: np.ndarray, resolution_m: float | None = None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Validate cell-centre axes; return them as float64 and the common resolution (m)."""
    x = np.asarray(x_m, dtype=np.float64)
    y = np.asarray(y_m, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.size == 0 or y.size == 0:
        raise ExportError(f"expected cell centres x [W], y [H]; got shapes {x.shape}, {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ExportError("cell centres hold NaN or inf")
    steps = np.concatenate([np.diff(x), np.diff(y)])
    if steps.size == 0 and resolution_m is None:
        raise ExportError("a 1 x 1 grid has no spacing to read; pass resolution_m")
    res = float(steps[0]) if resolution_m is None else float(resolution_m)
    if res <= 0.0 or not np.allclose(steps, res, rtol=SPACING_RTOL, atol=0.0):
        found = f"{float(steps.min())}..{float(steps.max())}" if steps.size else "none"
        raise ExportError(
            f"cell centres must increase by the resolution {res} m on both axes; steps: {found}"
        )
    return x, y, res


def _tidy(value: float) -> float:
    """``value`` rounded to YAML_DIGITS significant digits: 0.1, not 0.09999999999999998."""
    return float(f"{float(value):.{YAML_DIGITS}g}")


def _check_grid(values: np.ndarray, width: int, height: int, name: str) -> np.ndarray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.shape != (height, width):
        raise ExportError(f"{name} must be [H, W] = [{height}, {width}]; got {grid.shape}")
    return grid


def _check_field(
    mean: np.ndarray | None, variance: np.ndarray | None, width: int, height: int
) -> tuple[np.ndarray, np.ndarray] | None:
    if mean is None and variance is None:
        return None
    if mean is None or variance is None:
        raise ExportError("field_mean_ut and field_variance_ut2 come together (or neither)")
    out = []
    for name, values in (("field_mean_ut", mean), ("field_variance_ut2", variance)):
        grid = np.asarray(values, dtype=np.float64)
        if grid.shape != (height, width, 3):
            raise ExportError(
                f"{name} must be [H, W, 3] = [{height}, {width}, 3]; got {grid.shape}"
            )
        out.append(grid)
    return out[0], out[1]


def _points(points: np.ndarray | None, name: str) -> np.ndarray:
    if points is None:
        return np.zeros((0, 2))
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ExportError(f"{name} must be [K, >=2]; got {p.shape}")
    return p[:, :2]
