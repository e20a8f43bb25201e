"""The pass record: passes counted near each place without labels, the variance their offsets
leave, the same counts however the stream is windowed, and a state that round-trips."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gp_mapper.engine.core.pass_record import (
    PASS_GAP_S,
    PLACE_RADIUS_M,
    PassRecord,
    shared_share,
)
from gp_mapper.mapping.pass_noise import PASS_GAP_S as MEASURED_PASS_GAP_S


def line(x0: float, x1: float, y: float, t0: float, speed: float = 1.0, hz: float = 50.0):
    """Readings along y = const from x0 to x1 at ``speed`` m/s, from t0 (s)."""
    n = int(abs(x1 - x0) / speed * hz) + 1
    x = np.linspace(x0, x1, n)
    return np.column_stack([x, np.full(n, y)]), t0 + np.arange(n) / hz


def record(*passes, windows: int = 1) -> PassRecord:
    xy = np.concatenate([p[0] for p in passes])
    t = np.concatenate([p[1] for p in passes])
    out = PassRecord()
    for rows in np.array_split(np.arange(t.size), windows):
        out.add(xy[rows], t[rows])
    return out


def test_the_gap_is_the_one_the_pass_noise_is_measured_with() -> None:
    assert PASS_GAP_S == MEASURED_PASS_GAP_S


def test_passes_are_counted_by_their_time_apart_not_by_cells_or_readings() -> None:
    out_and_back = record(line(0.0, 10.0, 1.0, 0.0), line(10.0, 0.0, 1.05, 60.0))
    counts = out_and_back.counts(1.0)
    # Both passes within the radius of the line; one pass crosses ~7 cells of the place.
    assert counts.passes_at(np.array([[5.0, 1.02], [0.5, 1.0]])).tolist() == [2, 2]
    assert counts.passes_at(np.array([[5.0, 1.0 + 2.0 * PLACE_RADIUS_M]])).tolist() == [0]
    # A robot that stops at a place for a minute reading all along is one pass there.
    lingering = record((np.tile([[3.0, 3.0]], (3000, 1)), np.arange(3000) / 50.0))
    assert lingering.counts(1.0).passes_at(np.array([[3.0, 3.0]])).tolist() == [1]
    # Two visits less than PASS_GAP_S apart are one pass; more, two.
    back_soon = record(line(0.0, 2.0, 0.0, 0.0), line(2.0, 0.0, 0.0, 2.0 + 0.5 * PASS_GAP_S))
    back_late = record(line(0.0, 2.0, 0.0, 0.0), line(2.0, 0.0, 0.0, 2.0 + 2.0 * PASS_GAP_S))
    assert back_soon.counts(1.0).passes_at(np.array([[1.0, 0.0]])).tolist() == [1]
    assert back_late.counts(1.0).passes_at(np.array([[1.0, 0.0]])).tolist() == [2]


def test_the_counts_do_not_depend_on_how_the_stream_was_windowed() -> None:
    passes = [line(0.0, 8.0, 0.5 * i, 40.0 * i) for i in range(4)]
    passes += [line(8.0, 0.0, 0.7, 200.0), line(0.0, 8.0, 1.1, 260.0)]
    whole, windowed = record(*passes), record(*passes, windows=37)
    a, b = whole.counts(1.0), windowed.counts(1.0)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts)
    assert np.array_equal(whole.keys, windowed.keys)
    assert a.counts.max() >= 3


def test_the_variance_is_the_offsets_that_k_passes_leave_where_the_data_set_the_mean() -> None:
    rec = record(line(0.0, 10.0, 0.0, 0.0), line(10.0, 0.0, 0.0, 30.0), line(0.0, 10.0, 5.0, 60.0))
    counts = rec.counts(2.0)
    assert counts.scale == pytest.approx(2.0)  # no length measured: the whole pass shares it
    xy = np.array([[5.0, 0.0], [5.0, 5.0], [5.0, 2.5]])
    latent, prior = np.array([0.1, 0.1, 3.0]), np.array([4.0, 4.0, 4.0])
    rho = 1.0 - latent / prior
    expected = [2.0 * rho[0] ** 2 / 2, 2.0 * rho[1] ** 2 / 1, 0.0]
    assert counts.variance(xy, latent, prior) == pytest.approx(expected)
    assert not rec.counts(0.0).variance(xy, latent, prior).any()


def test_an_error_shorter_than_a_place_is_shared_less() -> None:
    assert shared_share(math.nan) == 1.0
    assert shared_share(1e6) == pytest.approx(1.0, abs=1e-5)
    shares = [shared_share(length) for length in (5.0, 2.4, 0.6, 0.18, 0.05)]
    assert shares == sorted(shares, reverse=True)
    assert 0.4 < shared_share(0.18) < 0.5  # the Aalto runs' measured length
    rec = PassRecord()
    rec.add(*line(0.0, 1.0, 0.0, 0.0), length_m=0.18)
    assert rec.counts(1.0).scale == pytest.approx(shared_share(0.18))


def test_the_record_round_trips_and_refuses_a_broken_state() -> None:
    rec = record(line(0.0, 6.0, 0.0, 0.0), line(6.0, 0.0, 0.1, 30.0), windows=5)
    assert "passes.white_variance" not in rec.state_dict()  # only once measured
    rec.add(*line(0.0, 1.0, 3.0, 90.0), length_m=2.5, white_variance=0.3)
    again = PassRecord.from_state(rec.state_dict())
    a, b = rec.counts(1.0), again.counts(1.0)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts)
    assert again.length_m == 2.5 and len(again) == len(rec)
    assert again.white_variance == 0.3 and b.white == 0.3
    assert len(PassRecord.from_state({})) == 0  # a map saved before the record
    state = rec.state_dict()
    with pytest.raises(ValueError, match="length"):
        PassRecord.from_state({**state, "passes.first_s": state["passes.first_s"][:-1]})
    with pytest.raises(ValueError, match="sorted"):
        PassRecord.from_state({**state, "passes.keys": state["passes.keys"][::-1].copy()})
    with pytest.raises(ValueError, match="white noise is negative"):
        PassRecord.from_state({**state, "passes.white_variance": np.array(-0.1)})
    with pytest.raises(ValueError, match="non-finite"):
        broken = state["passes.last_s"].copy()
        broken[0] = np.inf
        PassRecord.from_state({**state, "passes.last_s": broken})


def test_a_field_vectors_pass_error_is_split_along_the_field_by_its_norms_share() -> None:
    rec = record(line(0.0, 4.0, 0.0, 0.0), line(4.0, 0.0, 0.0, 30.0))
    isotropic = rec.counts(0.3)
    assert isotropic.field_terms() == (0.3, 0.0) and isotropic.along_share() == 0.0
    assert isotropic.norm_scale == 0.3  # a scalar map's term unchanged
    rec.add(*line(0.0, 1.0, 2.0, 90.0), along_variance=0.9)  # all of it along the field
    along = rec.counts(0.3)
    a, b = along.field_terms()
    assert a == pytest.approx(0.0, abs=1e-15) and b == pytest.approx(0.9)
    assert along.along_share() == pytest.approx(1.0) and along.norm_scale == pytest.approx(0.9)
    rec.add(*line(0.0, 1.0, 4.0, 120.0), along_variance=0.5)  # part of it
    a, b = rec.counts(0.3).field_terms()
    assert b == pytest.approx(1.5 * (0.5 - 0.3)) and a + b / 3 == pytest.approx(0.3)
    assert a + b == pytest.approx(0.5)  # the norm's: its measured variance
    rec.add(*line(0.0, 1.0, 6.0, 150.0), along_variance=5.0)  # more than the trace holds
    assert rec.counts(0.3).field_terms() == pytest.approx((0.0, 0.9))
    rec.add(*line(0.0, 1.0, 8.0, 180.0), along_variance=0.1)  # less than isotropic
    assert rec.counts(0.3).field_terms() == (0.3, 0.0)
    # Saved with the record; a record saved before it reads as not measured.
    rec.add(*line(0.0, 1.0, 9.0, 210.0), along_variance=0.6)
    assert PassRecord.from_state(rec.state_dict()).along_variance == 0.6
    state = {k: v for k, v in rec.state_dict().items() if k != "passes.along_variance"}
    assert math.isnan(PassRecord.from_state(state).along_variance)
    assert "passes.along_variance" not in record(line(0.0, 1.0, 0.0, 0.0)).state_dict()
    with pytest.raises(ValueError, match="along the field"):
        PassRecord.from_state({**rec.state_dict(), "passes.along_variance": np.array(-1.0)})
