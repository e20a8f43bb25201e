from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.engine import EngineSpec
from gp_mapper.mapping import MapperConfig, MappingPipeline, MapSnapshot
from gp_mapper.mapping.fit_schedule import LEVEL_WINDOWS, FitSchedule

from .synthetic import feed, lawnmower, stream, true_field

N = 100  # samples per window in the unit tests
STEADY = -0.5  # bound per sample of a window the current θ explains [nats]


def run(schedule: FitSchedule, bounds_per_sample: list[float], updates: int = 0) -> list[str]:
    """Feed windows with these bounds per sample; return each window's decision reason."""
    reasons = []
    for k, per_sample in enumerate(bounds_per_sample):
        decision = schedule.decide(updates + k)
        reasons.append(decision.reason)
        schedule.record(decision.fit, per_sample * N, N)
    return reasons


def test_the_first_windows_fit_then_every_nth() -> None:
    reasons = run(FitSchedule(first=3, every=4, bound_drop=0.0), [STEADY] * 11)
    assert reasons == ["first"] * 3 + [""] * 3 + ["schedule"] + [""] * 3 + ["schedule"]


def test_a_steady_stream_fits_only_at_the_start() -> None:
    schedule = FitSchedule(first=2, every=0, bound_drop=0.5)
    rng = np.random.default_rng(5)
    reasons = run(schedule, list(STEADY + 0.1 * rng.standard_normal(50)))
    assert reasons[:2] == ["first", "first"] and not any(reasons[2:])
    assert schedule.fits == 2


def test_a_lasting_drop_of_the_bound_makes_a_window_fit() -> None:
    schedule = FitSchedule(first=1, every=0, bound_drop=0.5)
    k = LEVEL_WINDOWS
    # Fitted; the reference windows; a dip of one window (kept); then a lasting drop: stale
    # once most of the latest windows have dropped, and the next window fits.
    bounds = [STEADY] * (1 + k) + [STEADY - 3.0] + [STEADY] * k + [STEADY - 3.0] * k
    reasons = run(schedule, bounds)
    assert reasons[: 2 + 2 * k] == ["first"] + [""] * (1 + 2 * k)
    stale = reasons.index("stale")
    assert stale == 2 + 2 * k + k // 2 + 1  # a majority of the latest have dropped
    # After the fit the reference is taken again from the next windows: no second fit.
    assert run(schedule, [STEADY - 3.0] * 3 * k, updates=len(bounds)) == [""] * 3 * k
    assert schedule.reference == pytest.approx(STEADY - 3.0)


def test_the_bound_moving_from_place_to_place_does_not_call_stale() -> None:
    # Windows that explore pay for new inducing points, windows that revisit do not: the
    # bound per sample of a right θ spreads by ~0.36 nats (sd) between windows.
    rng = np.random.default_rng(3)
    schedule = FitSchedule(first=1, every=0, bound_drop=0.5)
    reasons = run(schedule, list(STEADY + 0.36 * rng.standard_normal(200)))
    assert reasons.count("stale") <= 2


def test_zero_drop_never_calls_stale_and_a_loaded_map_does_not_start_over() -> None:
    schedule = FitSchedule(first=5, every=0, bound_drop=0.0)
    assert run(schedule, [STEADY, STEADY - 100.0, STEADY], updates=40) == ["", "", ""]
    assert schedule.decide(0).reason == "first"  # a fresh map fits its first window
    with pytest.raises(ValueError, match="fit schedule"):
        FitSchedule(first=-1, every=0, bound_drop=0.0)
    with pytest.raises(ValueError, match="fit schedule"):
        FitSchedule(first=0, every=0, bound_drop=float("nan"))


# --- through the pipeline and the real engine ------------------------------------------------

# Lanes 0.75 m apart over 8 m x 10 m at 3 m/s, 50 Hz. Past y = SWITCH_Y_M the sensor gets
# noisier (a new sensor, a vibrating mount): θ fitted on the quiet part is stale there.
PATH = lawnmower(8.0, 10.0, 0.75, 0.06)
SWITCH_Y_M = 6.4
QUIET_NOISE_UT, LOUD_NOISE_UT = 0.3, 1.5


def noisy_stream(seed: int = 11) -> tuple[list, np.ndarray]:
    """The stream and the map-frame y of each reading."""
    rng = np.random.default_rng(seed)
    mid = 0.5 * (PATH[1:] + PATH[:-1])
    sigma = np.where(mid[:, 1] < SWITCH_Y_M, QUIET_NOISE_UT, LOUD_NOISE_UT)
    b = true_field(mid) + sigma * rng.standard_normal(len(mid))
    b_map = np.column_stack([b * np.cos(np.pi / 6), b * np.sin(np.pi / 6), np.zeros_like(b)])
    return stream(PATH, field_map_ut=b_map), mid[:, 1]


def test_a_stale_window_triggers_a_fit_and_a_steady_stream_mostly_does_not() -> None:
    config = MapperConfig(
        pose_source="topic",
        batch_size=100,
        resolution=0.5,
        bounds=(0.0, 8.0, 0.0, 10.0),
        engine=EngineSpec(fit_iterations=20, device="cpu"),
        fit_first_windows=2,
        fit_every_windows=0,
        refit_bound_drop=0.5,
        tile_size=0.0,  # the schedule of one model (a tiled map's follows the same rules)
    )
    events, reading_y = noisy_stream()
    rows: list[tuple[int, int, str, float]] = []
    holder: list[MappingPipeline] = []

    def on_snapshot(snapshot: MapSnapshot) -> None:
        d = holder[0].diagnostics()
        rows.append(
            (
                int(snapshot.report["window_end_ns"]),
                int(d["last_update_fitted"]),
                str(d["last_fit_reason"]),
                float(d["bound_per_sample"]),
            )
        )

    with MappingPipeline(config, background=False, on_snapshot=on_snapshot) as pipeline:
        holder.append(pipeline)
        feed(pipeline, events)
        assert pipeline.diagnostics()["fits"] == sum(r[1] for r in rows)
    readings = [e for e in events if hasattr(e, "field_t")]
    switch_ns = readings[int(np.argmax(reading_y >= SWITCH_Y_M))].stamp_ns
    quiet = [r for r in rows if r[0] <= switch_ns]  # the last one ends at the switch
    loud = [r for r in rows if r[0] > switch_ns]
    assert len(quiet) >= 10 and len(loud) >= 4
    # The quiet stream: fitted on its first two windows only.
    assert [r[2] for r in quiet[:2]] == ["first", "first"]
    assert not any(r[1] for r in quiet[2:])
    # The first noisy windows join under the old θ, their bound per sample falls, and θ is
    # re-fitted as soon as most of the latest LEVEL_WINDOWS windows have fallen.
    assert loud[0][3] < quiet[-1][3] - config.refit_bound_drop
    assert [r[2] for r in loud[: LEVEL_WINDOWS // 2 + 2]][-1] == "stale"
    # Re-fitted, θ explains the noisy part: it is not re-fitted window after window.
    assert sum(r[1] for r in loud) <= 2


def test_a_map_at_its_cap_is_not_refitted_for_a_falling_bound() -> None:
    """At the cap the bound falls wherever the data leave the inducing points, whatever θ is."""
    config = MapperConfig(
        pose_source="topic",
        batch_size=100,
        resolution=0.5,
        bounds=(0.0, 8.0, 0.0, 10.0),
        engine=EngineSpec(fit_iterations=20, device="cpu", vips_max_inducing=4),
        fit_first_windows=2,
        fit_every_windows=0,
        refit_bound_drop=0.5,
        tile_size=0.0,  # the schedule of one model (a tiled map's follows the same rules)
    )
    events, _ = noisy_stream()
    reasons: list[str] = []
    holder: list[MappingPipeline] = []

    def on_snapshot(snapshot: MapSnapshot) -> None:
        reasons.append(str(holder[0].diagnostics()["last_fit_reason"]))

    with MappingPipeline(config, background=False, on_snapshot=on_snapshot) as pipeline:
        holder.append(pipeline)
        feed(pipeline, events)
        assert pipeline.latest().support_m.shape[0] == 4
    assert reasons[:2] == ["first", "first"] and len(reasons) >= 14
    assert "stale" not in reasons
