"""The between-pass noise, measured from the data (``vips.pass_noise_variance: auto``).

A magnetometer's reading error has a part that stays nearly the same along a pass over a place
(a heading-dependent calibration residue, a pose offset): within one window it looks like
field, so a fit cannot tell it from the field, but two passes over the same place disagree by
it. With ``y = f(x) + b_pass + ε``, half the mean squared difference of two readings at
distance d is ``γ_f(d) + σ²_pass + σ²`` for readings of different passes and ``γ_f(d) + σ²``
for readings of one pass (``γ_f`` the field's semivariogram). Over the few centimetres of a
pair a smooth field's semivariogram is quadratic, ``γ_f(d) ≈ c d²``: ``σ² + c d²`` fitted by
least squares to the one-pass pairs and read at the two-pass pairs' distances is subtracted
from the two-pass pairs' mean, σ²_pass with the field's change taken out at whatever distances
each kind's pairs lie: a nugget difference of two empirical variograms, needing no model of
the field beyond its smoothness. The fit's σ² at zero distance is the sensor's own white
noise (``PassNoise.white``). (A difference taken bin by bin of distance instead was led by
the few one-pass pairs at a centimetre or two, a robot turning on the spot or at a dead end,
whose readings are often of two passes; the one-pass pairs are mostly consecutive readings,
a step apart. The two-pass pairs do not set c: they come in clusters that share two passes'
offsets.)

How far along a pass that error stays the same is measured too (``length``): for two
between-pass pairs of the same two passes, half the mean squared difference of their
differences grows with the distance between the two places along the path from the white
noise's level (one offset per pass: it cancels) to the differences' whole variance (an error
independent from place to place). ``length`` is where it has gone half way
(``benchmarks/pass_error.py`` prints the whole curve): ~0.2 m on the Aalto runs, over 2 m on
the office floor of ``benchmarks/building.py``, whose offsets are one per pass.

Readings of one pass are those under ``PASS_GAP_S`` apart; of different passes, those
``PASS_GAP_S`` or more apart (the robot left the place and came back). 20 s: on the validation
floors of ``benchmarks/building.py`` (seeds 1 and 2, the simulator's pass labels) 5-6 % of the
pairs 10 s apart are of one pass (a room walked round and left by the way it came), none of
those 20 s apart; the estimate is the same at 30 s, and lower at 60 s and more, where pairs of
two passes count as one. Where the model fits a
heading curve (``gam_stream`` with ``heading``), between-pass pairs count only when their
headings agree within ``SAME_HEADING_RAD``: the heading-dependent part, which the curve
explains, then cancels in the difference and is not counted twice.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy.spatial import cKDTree

if TYPE_CHECKING:
    from gp_mapper.engine import EngineSpec
    from gp_mapper.engine.model import Model
    from gp_mapper.mapping.config import MapperConfig
    from gp_mapper.mapping.inputs import CollectedSamples

# Readings this close are at "the same place" [m]: the field changes little over it, and what it
# changes is fitted (c d²). A robot's repeated passes seldom lie closer than a few cm.
PAIR_RADIUS_M = 0.05
# Readings this far apart in time are of different passes [s]: the robot left and came back
# (module docstring).
PASS_GAP_S = 20.0
# Pairs of each kind this many or more make an estimate; fewer leave the value at 0 (no
# between-pass error measured: white noise alone, as in the papers).
MIN_BETWEEN_PAIRS = 200
# Two readings' headings agree within this [rad] (only with a heading curve in the model).
SAME_HEADING_RAD = math.radians(20.0)
# The readings kept for the estimate; past it, half are dropped, in runs of KEPT_RUN
# consecutive readings so that the within-pass pairs at a few cm survive the thinning (a
# deterministic one: the same stream keeps the same readings, however it is windowed).
MAX_READINGS = 40_000
KEPT_RUN = 16
# The length: between-pass pairs of "the same two passes" have both readings within this of
# the other pair's [s]; bins of the along-path distance between the two places [m] (the
# first, the nugget: the white noise's share); at most this many reference pairs, evenly
# spaced in time, each against every pair of the same two passes; at least this many pairs
# of pairs in a bin for it to count.
SAME_PASS_S = 15.0
LENGTH_BINS_M = (0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
LENGTH_REFERENCES = 1000
MIN_LENGTH_PAIRS = 30


class PassNoise(NamedTuple):
    """An estimate of the between-pass noise variance.

    Attributes:
        variance: σ²_pass [µT²] (0 until ``between_pairs`` reaches ``MIN_BETWEEN_PAIRS``).
        between_pairs: pairs of readings of different passes at the same place.
        within_pairs: pairs of one pass at the same place.
        between: half the mean squared difference of the between-pass pairs [µT²].
        within: the same fitted for pairs of one pass at the between pairs' distances [µT²]
            (the white noise and the field's change).
        length: how far along the path the between-pass error stays the same [m] (module
            docstring); the largest distance measured where it had not gone half way (a
            lower bound), NaN where too few pairs of pairs measured it.
        along: for readings of the field vector (three components), σ²_pass of their norm:
            the between-pass error along the field, which ``variance`` (the components'
            mean) spreads over three axes; NaN otherwise or where not measured.
        white: the one-pass level at zero distance (the fit's intercept): the sensor's own
            white noise per component [µT²], without the field's change between readings;
            NaN where not measured.
    """

    variance: float
    between_pairs: int
    within_pairs: int
    between: float
    within: float
    length: float = math.nan
    along: float = math.nan
    white: float = math.nan

    def as_dict(self) -> dict[str, float | int]:
        return {
            "pass_noise_variance": self.variance,
            "pass_noise_between_pairs": self.between_pairs,
            "pass_noise_within_pairs": self.within_pairs,
            "pass_noise_between": self.between,
            "pass_noise_within": self.within,
            "pass_noise_length_m": self.length,
            "pass_noise_along_variance": self.along,
            "pass_noise_white_variance": self.white,
        }


NOT_MEASURED = PassNoise(0.0, 0, 0, math.nan, math.nan)


def between_pass_variogram(
    xy: np.ndarray, values: np.ndarray, t: np.ndarray, i: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """γ(s) / var(δ) of the between-pass differences δ and the pairs of pairs behind each, in
    the along-path distance bins ``LENGTH_BINS_M`` (module docstring), from the between-pass
    pairs (i, j) of readings ``xy`` [N, D], ``values`` [N, C] and stamps ``t`` [N]. 1: the two
    places' errors are independent; the white noise's share at the nugget."""
    bins = len(LENGTH_BINS_M) - 1
    sums, counts = np.zeros(bins), np.zeros(bins, dtype=np.int64)
    swap = t[i] > t[j]  # i the earlier reading of each pair
    i, j = np.where(swap, j, i), np.where(swap, i, j)
    order = np.lexsort((j, i, t[i]))
    i, j = i[order], j[order]
    delta = values[i] - values[j]
    variance = float(np.mean(delta**2)) if len(i) else 0.0  # of a difference: 2 (σ²_pass + σ²)
    if not variance > 0.0:
        return np.full(bins, np.nan), counts
    ti, tj = t[i], t[j]
    references = np.unique(np.linspace(0, len(i) - 1, min(len(i), LENGTH_REFERENCES)).astype(int))
    for a in references:
        lo, hi = np.searchsorted(ti, [ti[a], ti[a] + SAME_PASS_S], side="right")
        other = np.arange(lo, hi)
        other = other[(np.abs(tj[other] - tj[a]) < SAME_PASS_S) & (i[other] != i[a])]
        s = np.linalg.norm(xy[i[other]] - xy[i[a]], axis=1)
        b = np.searchsorted(LENGTH_BINS_M, s, side="right") - 1
        inside = b < bins
        half_sq = 0.5 * np.mean((delta[other] - delta[a]) ** 2, axis=1)
        np.add.at(sums, b[inside], half_sq[inside])
        np.add.at(counts, b[inside], 1)
    ratio = np.where(counts > 0, sums / np.maximum(counts, 1) / variance, np.nan)
    return ratio, counts


def between_pass_length(ratio: np.ndarray, counts: np.ndarray) -> float:
    """How far along the path the between-pass error stays the same [m]: where
    :func:`between_pass_variogram`'s ratio has gone half way from its nugget to 1."""
    if counts[0] < MIN_LENGTH_PAIRS:
        return math.nan
    nugget = ratio[0]
    if nugget >= 1.0:
        return 0.0  # no shared part at all
    centres = 0.5 * (np.array(LENGTH_BINS_M[:-1]) + np.array(LENGTH_BINS_M[1:]))
    # The shared part's correlation: 1 at the nugget, 0 at the whole variance.
    shared = np.clip(1.0 - (ratio - nugget) / (1.0 - nugget), 0.0, 1.0)
    last, last_shared = centres[0], 1.0
    for k in range(1, len(centres)):
        if counts[k] < MIN_LENGTH_PAIRS:
            continue
        if shared[k] < 0.5:  # half way between the last measured bin and this one
            step = (last_shared - 0.5) / (last_shared - shared[k])
            return float(last + step * (centres[k] - last))
        last, last_shared = centres[k], shared[k]
    return float(last)


def same_place_pairs(
    xy: np.ndarray, t: np.ndarray, radius_m: float, gap_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i, j) of readings within ``radius_m`` of each other [m], and which of them are of
    two passes (``gap_s`` or more apart [s]); the others are of one pass."""
    pairs = cKDTree(xy).query_pairs(radius_m, output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    return i, j, np.abs(t[i] - t[j]) >= gap_s


def nugget_difference(
    half_sq: np.ndarray, distance: np.ndarray, between: np.ndarray
) -> tuple[float, float, float]:
    """The between-pass pairs' mean half squared difference, the one-pass level at their
    distances, and that level at zero distance (the white noise): ``w + c d²`` (module
    docstring) fitted by least squares to the one-pass pairs' ``half_sq`` [P] at
    ``distance`` [P] [m]; ``between`` [P] marks pairs of two passes. The one-pass pairs
    alone set the curve: many and independent, where two passes' pairs share those passes'
    offsets. A fitted c below 0 (no field change resolved) is refitted without it."""
    within = ~between
    columns = np.column_stack([np.ones(int(within.sum())), distance[within] ** 2])
    w, c = np.linalg.lstsq(columns, half_sq[within], rcond=None)[0]
    if c < 0.0:
        w, c = float(np.mean(half_sq[within])), 0.0
    mean_between = float(np.mean(half_sq[between]))
    at_between = float(w + c * np.mean(distance[between] ** 2))
    return mean_between, at_between, max(float(w), 0.0)


def between_pass_noise(
    xy_m: np.ndarray,
    y: np.ndarray,
    t_s: np.ndarray,
    yaw_rad: np.ndarray | None = None,
    *,
    radius_m: float = PAIR_RADIUS_M,
    gap_s: float = PASS_GAP_S,
    min_pairs: int = MIN_BETWEEN_PAIRS,
) -> PassNoise:
    """σ²_pass from readings at ``xy_m`` [N, D] (the map's inputs, 2 or 3), targets
    ``y`` [N] or [N, C] (C components: the mean of theirs), stamps ``t_s`` [N] and, with a
    heading curve in the model, headings ``yaw_rad`` [N]. Needs ``min_pairs`` pairs of each
    kind (:func:`nugget_difference`)."""
    xy = np.asarray(xy_m, dtype=float)
    values = np.asarray(y, dtype=float).reshape(len(xy), -1)
    t = np.asarray(t_s, dtype=float)
    if len(xy) < 2:
        return NOT_MEASURED
    i, j, between = same_place_pairs(xy, t, radius_m, gap_s)
    if not len(i):
        return NOT_MEASURED
    within = ~between
    if yaw_rad is not None:
        turn = np.angle(np.exp(1j * (np.asarray(yaw_rad)[i] - np.asarray(yaw_rad)[j])))
        between &= np.abs(turn) <= SAME_HEADING_RAD
    count, count_within = int(between.sum()), int(within.sum())
    if count < min_pairs or count_within < min_pairs:
        return PassNoise(0.0, count, count_within, math.nan, math.nan)
    used = between | within  # pairs of two passes at other headings are left out
    distance = np.linalg.norm(xy[i[used]] - xy[j[used]], axis=1)

    def difference(v: np.ndarray) -> tuple[float, float, float]:
        half_sq = 0.5 * np.mean((v[i[used]] - v[j[used]]) ** 2, axis=1)
        return nugget_difference(half_sq, distance, between[used])

    mean_between, mean_within, white = difference(values)
    along = math.nan
    if values.shape[1] == 3:  # the field vector: its norm's share, the error along the field
        norm_between, norm_within, _ = difference(np.linalg.norm(values, axis=1)[:, None])
        along = max(norm_between - norm_within, 0.0)
    return PassNoise(
        max(mean_between - mean_within, 0.0),
        count,
        count_within,
        mean_between,
        mean_within,
        between_pass_length(*between_pass_variogram(xy, values, t, i[between], j[between])),
        along,
        white,
    )


class PassNoiseEstimator:
    """The readings of a stream kept for :func:`between_pass_noise`, and its latest estimate.

    Readings are added window by window. The stream's reading ``i`` is kept while
    ``i % (stride · KEPT_RUN) < KEPT_RUN``; past ``max_readings`` the stride doubles (every
    second run of ``KEPT_RUN`` goes), so memory is bounded, the same stream always keeps the same
    readings, and the short within-pass pairs the estimate compares against stay.

    Args:
        with_heading: the model fits a heading curve: pass pairs must share a heading.
        max_readings: the most readings held.
    """

    def __init__(self, with_heading: bool = False, max_readings: int = MAX_READINGS) -> None:
        self.with_heading = with_heading
        self.max_readings = max_readings
        self._parts: list[np.ndarray] = []  # rows: index, t, yaw, the position (D), targets
        self._dims = 0
        self._held = 0
        self._seen = 0
        self._stride = 1
        self.latest = NOT_MEASURED

    def add(
        self, xy_m: np.ndarray, y: np.ndarray, t_s: np.ndarray, yaw_rad: np.ndarray | None
    ) -> None:
        """Keep this window's readings that the thinning keeps: positions ``xy_m`` [N, D],
        targets ``y`` [N] or [N, C], stamps ``t_s`` [N], headings ``yaw_rad`` [N]."""
        n = len(xy_m)
        self._dims = np.shape(xy_m)[1]
        index = np.arange(self._seen, self._seen + n)
        self._seen += n
        yaw = np.zeros(n) if yaw_rad is None else np.asarray(yaw_rad, dtype=float)
        rows = np.column_stack([
            index, np.asarray(t_s, dtype=float), yaw, np.asarray(xy_m, dtype=float),
            np.asarray(y, dtype=float).reshape(n, -1),
        ])[self._kept(index)]  # fmt: skip
        self._parts.append(rows)
        self._held += len(rows)
        while self._held > self.max_readings:
            self._stride *= 2
            data = np.concatenate(self._parts)
            data = data[self._kept(data[:, 0].astype(np.int64))]
            self._parts, self._held = [data], len(data)

    def _kept(self, index: np.ndarray) -> np.ndarray:
        return index % (self._stride * KEPT_RUN) < KEPT_RUN

    def estimate(self) -> PassNoise:
        """Measure σ²_pass on the readings held; kept as ``latest``."""
        if not self._parts:
            return self.latest
        data = np.concatenate(self._parts)
        self._parts = [data]
        yaw = data[:, 2] if self.with_heading else None
        position, targets = data[:, 3 : 3 + self._dims], data[:, 3 + self._dims :]
        self.latest = between_pass_noise(position, targets, data[:, 1], yaw)
        return self.latest

    def clear(self) -> None:
        """Forget every reading (a reset map)."""
        self._parts, self._held, self._seen, self._stride, self._dims = [], 0, 0, 1, 0
        self.latest = NOT_MEASURED


def measured_pass_noise(
    samples: CollectedSamples, config: MapperConfig, spec: EngineSpec, model: Model
) -> PassNoise | None:
    """With ``vips.pass_noise_variance: auto`` (``spec``'s), σ²_pass measured on a whole log (an
    offline fit: model inputs with their auxiliary columns, in stamp order) and,
    where measured and the model adds one (a streaming model's), set on ``model``; None
    otherwise."""
    if not spec.pass_noise_auto:
        return None
    dims = config.input_dims
    yaw = samples.X[:, dims] if "yaw" in model.auxiliary_inputs else None
    estimate = between_pass_noise(samples.X[:, :dims], samples.y, samples.stamps_ns / 1e9, yaw)
    if estimate.between_pairs >= MIN_BETWEEN_PAIRS and model.kind == "streaming":
        model.set_pass_noise_variance(estimate.variance)
    return estimate
