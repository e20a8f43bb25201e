"""Where and when a map's readings were taken, and the error the passes' offsets leave in it.

A magnetometer's error has a part that stays the same along a pass over a place (a heading's
calibration residue, a pose offset: ``pass_noise_variance``, σ²_pass). The streaming models
count it once per cell of a window, as if each cell drew its own: a map of a place one pass
walked then averages that pass's offset over its cells and windows and reports a fraction of
it, while the map's error there is the whole offset. Where the error stays the same for
metres (the office floor of ``io/building``: for a whole pass) that leaves the intervals
on the path too narrow (95 % intervals holding 0.79 of the truth there), and no window can
see it: each shows one pass.

What a map can see is how many passes went over a place. This record keeps, per
``CELL_M`` cell, the time span of each pass over it (readings less than ``PASS_GAP_S``
apart are one pass, as ``mapping/pass_noise.py`` measures σ²_pass), counts the distinct
passes k within ``PLACE_RADIUS_M`` of each cell, and a map's latent variance at x gains what
k independent offsets leave in a mean the data set:

    σ²_pass · c(2R / L) · ρ(x)² / k(x),   ρ = 1 − var / prior (clipped to [0, 1]),

where c(a) = 2 (a − 1 + e^{−a}) / a² is the mean correlation, over a stretch of 2R of path,
of an error of correlation length L along it (``pass_noise_length_m``, measured beside
σ²_pass: 1 for an offset per pass, 0.43 for the Aalto runs' 0.18 m). Places no pass came
within R of gain nothing: there the prior dominates.

A map of the field vector measures σ²_pass as its components' mean, and the same of the
readings' norm, σ²_along, the error along the field. An error that only stretches or shrinks
the reading along B (a gain, a scale's calibration residue) has σ²_along = 3 σ²_pass, one the
sensor's turning axes spread evenly has σ²_along = σ²_pass. Its component covariance is then
taken as ``a I + b u uᵀ`` (u the field's direction): the trace 3 σ²_pass, the variance along u
σ²_along, so ``b = 3 (σ²_along − σ²_pass) / 2`` (clipped to [0, 3 σ²_pass]) and
``a = σ²_pass − b / 3``; the field's covariance gains ``(a I + b u uᵀ) · c ρ² / k`` and its
norm's variance ``(a + b) · c ρ² / k``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

# Readings at a place this far apart in time are of different passes [s] (the robot left and
# came back): ``mapping.pass_noise.PASS_GAP_S``, which measures σ²_pass on the same split.
PASS_GAP_S = 20.0
# The record's cells [m]: a robot's passes seldom lie closer than this.
CELL_M = 0.1
# A place: the passes within this of a cell are the ones its map mean averages [m]. About
# half the lengthscale maps fit (0.45–1 m on the Aalto runs and the floors); on the
# validation floor the intervals moved by 0.003 between 0.3 and 0.8 m.
PLACE_RADIUS_M = 0.3
# Cells are keyed as one int64: (ix + _BIAS) << _SHIFT | (iy + _BIAS), |ix|, |iy| < _BIAS
# (a 100 km square at 10 cm).
_SHIFT = 21
_BIAS = 1 << 20
_REACH = round(PLACE_RADIUS_M / CELL_M)
# Key offsets of the cells within the place radius (centre to centre).
_STENCIL = np.array(
    [(dx << _SHIFT) + dy
     for dx in range(-_REACH, _REACH + 1) for dy in range(-_REACH, _REACH + 1)
     if dx * dx + dy * dy <= _REACH * _REACH],
    dtype=np.int64,
)  # fmt: skip


# The variances measured beside σ²_pass that the record keeps once measured (NaN until then;
# saved only where measured), each with the words its refusal names it by.
_MEASURED_VARIANCES = {
    "along_variance": "variance along the field",
    "white_variance": "white noise",
}


def shared_share(length_m: float) -> float:
    """c(2R / L): the share of the pass error a place's mean keeps (1 for an unknown length)."""
    if not math.isfinite(length_m) or length_m <= 0.0:
        return 1.0
    a = 2.0 * PLACE_RADIUS_M / length_m
    return 2.0 * (a + math.expm1(-a)) / (a * a)  # expm1: no cancellation for a long L


def cell_keys(xy: np.ndarray) -> np.ndarray:
    """The record's cell key of each point xy [N, 2] (m)."""
    ij = np.floor(np.asarray(xy, dtype=np.float64)[:, :2] / CELL_M)
    ij = np.clip(ij, -_BIAS + _REACH + 1, _BIAS - _REACH - 1).astype(np.int64) + _BIAS
    return (ij[:, 0] << _SHIFT) | ij[:, 1]


class PassCounts(NamedTuple):
    """What a posterior reads: the passes near each cell, and the term's scale.

    Attributes:
        keys: [C] sorted cell keys (``cell_keys``) with at least one pass within the radius.
        counts: [C] distinct passes within ``PLACE_RADIUS_M`` of each.
        scale: σ²_pass · c(2R / L) [µT²]; the term is ``scale · ρ² / k``.
        along: σ²_along · c(2R / L) for a map of the field vector (0: not measured).
        white: the sensor's white noise per component measured beside σ²_pass [µT²]
            (``mapping.pass_noise.PassNoise.white``; NaN: not measured).
    """

    keys: np.ndarray
    counts: np.ndarray
    scale: float
    along: float = 0.0
    white: float = math.nan

    def field_terms(self) -> tuple[float, float]:
        """(a, b) of the field's pass covariance ``a I + b u uᵀ`` (module docstring), each
        with c(2R / L); (scale, 0), an isotropic error, where σ²_along is not measured."""
        if self.along <= 0.0:
            return self.scale, 0.0
        b = min(max(1.5 * (self.along - self.scale), 0.0), 3.0 * self.scale)
        return self.scale - b / 3.0, b

    def along_share(self) -> float:
        """The share of the pass error that lies along the field, b / (3 · scale) in [0, 1]
        (0: isotropic, or not measured)."""
        _, b = self.field_terms()
        return b / (3.0 * self.scale) if self.scale > 0.0 else 0.0

    @property
    def norm_scale(self) -> float:
        """The scale of ‖B‖'s term: ``scale``, or a + b for a map of the field vector."""
        a, b = self.field_terms()
        return a + b

    def passes_at(self, xy: np.ndarray) -> np.ndarray:
        """k at points xy [S, 2] (0 where no pass came within the radius)."""
        keys = cell_keys(xy)
        out = np.zeros(keys.size, dtype=np.int64)
        if not self.keys.size:
            return out
        at = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        hit = self.keys[at] == keys
        out[hit] = self.counts[at[hit]]
        return out

    def variance(self, xy: np.ndarray, latent: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """The term at xy [S, 2] for a map of latent and prior variance [S] (µT²): ‖B‖'s
        (``norm_scale``)."""
        return self.norm_scale * self.shares(xy, latent, prior)

    def shares(self, xy: np.ndarray, latent: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """ρ² / k at xy [S, 2] for a map of latent and prior variance [S] (0 where no pass
        came near, or with no pass error)."""
        k = self.passes_at(xy)
        out = np.zeros(k.size)
        if self.scale <= 0.0 or not k.any():
            return out
        seen = k > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.clip(1.0 - latent[seen] / prior[seen], 0.0, 1.0)
        out[seen] = np.nan_to_num(rho) ** 2 / k[seen]
        return out


NO_PASSES = PassCounts(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)


class PassRecord:
    """The passes over each cell of a map: one entry (cell, first, last stamp) per pass.

    Entries are kept sorted by cell, then time; the counts of the cells within the radius of
    a cell a window touched are recounted when the window is recorded.
    """

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.first_s = np.zeros(0)
        self.last_s = np.zeros(0)
        self.length_m = math.nan
        self.along_variance = math.nan
        self.white_variance = math.nan
        self._count_keys = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.keys.size)

    def add(
        self,
        xy: np.ndarray,
        t_s: np.ndarray,
        length_m: float = math.nan,
        along_variance: float = math.nan,
        white_variance: float = math.nan,
    ) -> None:
        """Record readings at xy [N, 2] (m) taken at t_s [N] (s), the error's measured
        correlation length along the path, for a map of the field vector σ²_along (the
        module docstring) and the sensor's white noise measured beside them (NaN: not
        measured)."""
        if math.isfinite(length_m) and length_m > 0.0:
            self.length_m = float(length_m)
        measured = {"along_variance": along_variance, "white_variance": white_variance}
        for name, value in measured.items():
            if math.isfinite(value) and value >= 0.0:
                setattr(self, name, float(value))
        t_s = np.asarray(t_s, dtype=np.float64).reshape(-1)
        if not t_s.size:
            return
        keys = cell_keys(xy)
        # The readings' spans per cell and pass: a new span where the cell changes or the
        # stamps lie PASS_GAP_S or more apart (a long batch may pass a place twice).
        order = np.lexsort((t_s, keys))
        keys, t_s = keys[order], t_s[order]
        starts = np.ones(keys.size, dtype=bool)
        starts[1:] = (keys[1:] != keys[:-1]) | (np.diff(t_s) >= PASS_GAP_S)
        begin = np.flatnonzero(starts)
        end = np.append(begin[1:], keys.size) - 1
        cells, first, last = keys[begin], t_s[begin], t_s[end]
        # Each cell's first span may continue the record's latest entry of that cell.
        leading = np.ones(cells.size, dtype=bool)
        leading[1:] = cells[1:] != cells[:-1]
        # A cell's latest entry continues if it ended less than PASS_GAP_S before.
        keys_now, first_now, last_now = self.keys, self.first_s, self.last_s.copy()
        at = np.searchsorted(keys_now, cells, side="right") - 1
        has = leading & (at >= 0)
        has[has] = keys_now[at[has]] == cells[has]
        joins = has.copy()
        joins[has] = first[has] - last_now[at[has]] < PASS_GAP_S
        last_now[at[joins]] = np.maximum(last_now[at[joins]], last[joins])
        new = ~joins
        keys_all = np.concatenate([keys_now, cells[new]])
        first_all = np.concatenate([first_now, first[new]])
        last_all = np.concatenate([last_now, last[new]])
        order = np.lexsort((first_all, keys_all))
        self.keys, self.first_s, self.last_s = keys_all[order], first_all[order], last_all[order]
        touched = np.unique(cells)
        self._recount(np.unique((touched[:, None] + _STENCIL[None, :]).reshape(-1)))

    def counts(self, variance: float) -> PassCounts:
        """An immutable view for a posterior: the counts and σ²_pass · c(2R / L)."""
        share = shared_share(self.length_m) if len(self) else 0.0
        along = self.along_variance if math.isfinite(self.along_variance) else 0.0
        return PassCounts(
            self._count_keys, self._counts, float(variance) * share, along * share,
            self.white_variance,
        )  # fmt: skip

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        out = {
            "passes.keys": self.keys.copy(),
            "passes.first_s": self.first_s.copy(),
            "passes.last_s": self.last_s.copy(),
            # A map file holds finite numbers only: 0 is "not measured".
            "passes.length_m": np.array(self.length_m if math.isfinite(self.length_m) else 0.0),
        }
        for name in _MEASURED_VARIANCES:  # once measured (along: a map of the field vector's)
            if math.isfinite(value := getattr(self, name)):
                out[f"passes.{name}"] = np.array(value)
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> PassRecord:
        """Rebuild from ``state_dict`` output; an empty record where a map has none (saved
        before the record existed).

        Raises:
            ValueError: arrays of different lengths, unsorted or non-finite.
        """
        record = cls()
        if not state or "passes.keys" not in state:
            return record
        keys = np.asarray(state["passes.keys"], dtype=np.int64).reshape(-1)
        first = np.asarray(state["passes.first_s"], dtype=np.float64).reshape(-1)
        last = np.asarray(state["passes.last_s"], dtype=np.float64).reshape(-1)
        if not keys.size == first.size == last.size:
            raise ValueError("the pass record's arrays differ in length")
        if not (np.isfinite(first).all() and np.isfinite(last).all()):
            raise ValueError("the pass record holds a non-finite stamp")
        if keys.size and (np.any(np.diff(keys) < 0) or np.any(last < first)):
            raise ValueError("the pass record is not sorted by cell or has a pass ending first")
        if keys.size and (np.any(keys < 0) or np.any(keys >= 1 << (2 * _SHIFT))):
            raise ValueError("the pass record holds a cell key out of range")
        record.keys, record.first_s, record.last_s = keys, first, last
        length = float(np.asarray(state.get("passes.length_m", 0.0)))
        record.length_m = length if length > 0.0 else math.nan
        for name, words in _MEASURED_VARIANCES.items():
            value = float(np.asarray(state.get(f"passes.{name}", math.nan)))
            if math.isfinite(value) and value < 0.0:
                raise ValueError(f"the pass record's {words} is negative")
            setattr(record, name, value)
        if keys.size:
            record._recount(np.unique((np.unique(keys)[:, None] + _STENCIL).reshape(-1)))
        return record

    # ------------------------------------------------------------------ counting
    def _recount(self, cells: np.ndarray) -> None:
        """Count the distinct passes within the radius of each of ``cells`` (sorted keys) and
        merge them into the count table (fresh arrays: views already handed out stand)."""
        counts = self._passes_near(cells)
        keep = ~np.isin(self._count_keys, cells, assume_unique=True)
        keys = np.concatenate([self._count_keys[keep], cells[counts > 0]])
        values = np.concatenate([self._counts[keep], counts[counts > 0]])
        order = np.argsort(keys, kind="stable")
        self._count_keys, self._counts = keys[order], values[order]

    def _passes_near(self, cells: np.ndarray) -> np.ndarray:
        """Distinct passes over the cells within the radius of each cell: their entries'
        spans merged where they overlap or lie less than PASS_GAP_S apart."""
        query, entry = [], []
        for offset in _STENCIL:
            near = cells + offset
            lo = np.searchsorted(self.keys, near, side="left")
            n = np.searchsorted(self.keys, near, side="right") - lo
            if not n.any():
                continue
            rows = np.repeat(np.arange(cells.size), n)
            starts = np.repeat(lo - np.cumsum(n) + n, n)  # each run's first entry, less its offset
            query.append(rows)
            entry.append(starts + np.arange(rows.size))
        counts = np.zeros(cells.size, dtype=np.int64)
        if not query:
            return counts
        q, e = np.concatenate(query), np.concatenate(entry)
        first, last = self.first_s[e], self.last_s[e]
        order = np.lexsort((first, q))
        q, first, last = q[order], first[order], last[order]
        # A running end of the spans so far, per cell: each cell's spans offset by its index
        # times more than the record's whole time range, so one running maximum serves all.
        t0 = float(self.first_s.min())
        stride = float(self.last_s.max()) - t0 + 2.0 * PASS_GAP_S + 1.0
        end = np.maximum.accumulate(q * stride + (last - t0))
        start = q * stride + (first - t0)
        new = np.ones(q.size, dtype=bool)
        new[1:] = (q[1:] != q[:-1]) | (start[1:] - end[:-1] >= PASS_GAP_S)
        np.add.at(counts, q[new], 1)
        return counts
