"""The localization benchmark's protocol (benchmarks/localization.py) on synthetic tracks: the
odometry grades, the kidnapped walk's splice, the convergence and off-map bookkeeping, row
names, and the summary keys results_summary.py reads. No shared data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import localization as loc
import results_summary

from gp_mapper.io.odometry import OdometryErrors
from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.localization import FieldLookup, LocalizerConfig
from gp_mapper.mapping.localization.field_lookup import MapNoise
from gp_mapper.mapping.localization.motion import wrap_angle


def loop_track(laps: float = 4.0, rate_hz: float = 10.0) -> loc.Track:
    """A walk at 1 m/s round a 20 x 12 m rectangle (64 m a lap), readings a smooth field."""
    perimeter = 64.0
    s = np.arange(0.0, laps * perimeter, 1.0 / rate_hz)
    u = s % perimeter
    corners = np.array([[0.0, 0.0], [20.0, 0.0], [20.0, 12.0], [0.0, 12.0], [0.0, 0.0]])
    lengths = np.array([20.0, 12.0, 20.0, 12.0])
    edge = np.minimum(np.searchsorted(np.cumsum(lengths), u, side="right"), 3)
    along = u - np.concatenate([[0.0], np.cumsum(lengths)])[edge]
    direction = (corners[edge + 1] - corners[edge]) / lengths[edge, None]
    xy = corners[edge] + along[:, None] * direction + 2.0
    yaw = np.arctan2(direction[:, 1], direction[:, 0])
    mag = np.column_stack([field(xy), np.zeros((xy.shape[0], 2))])
    return loc.track_of(s, xy, yaw, mag)


def field(xy: np.ndarray) -> np.ndarray:
    return 50.0 + 8.0 * np.sin(xy[:, 0] / 1.3) * np.cos(xy[:, 1] / 1.7)


def test_the_grades_are_the_issues() -> None:
    robot = loc.GRADES["robot"]
    assert 0.01 <= robot.scale <= 0.03 and robot.gyro_bias_deg_s <= 0.05
    assert loc.GRADES["pedestrian"] == OdometryErrors()  # the older rows' odometry


def test_the_kidnapped_walk_jumps_and_its_odometry_does_not() -> None:
    track = loop_track()
    kid = loc.kidnapped_track(track, np.ones(track.time_s.size, bool), seed=0)
    assert kid is not None and kid.kidnap == track.time_s.size // 2 + 1
    k = kid.kidnap
    assert np.linalg.norm(kid.xy[k] - kid.xy[k - 1]) >= loc.KIDNAP_MIN_M
    assert np.all(np.diff(kid.time_s) > 0)
    # The truth before the carry is the walk's first half, after it the walk's end.
    assert np.array_equal(kid.xy[:k], track.xy[:k])
    rest = kid.xy.shape[0] - k
    assert np.array_equal(kid.xy[k:], track.xy[-rest:])
    assert np.array_equal(kid.mag_ut[k:], track.mag_ut[-rest:])
    assert loc.walked(kid.xy[k:])[-1] >= loc.KIDNAP_MIN_REST_M - 1e-9
    # The odometry's track does not move over the carry and turns as the truth elsewhere.
    assert np.allclose(kid.odom_xy[k], kid.odom_xy[k - 1])
    assert np.isclose(kid.odom_yaw[k], kid.odom_yaw[k - 1])
    step = np.linalg.norm(np.diff(kid.odom_xy, axis=0), axis=1)
    truth_step = np.linalg.norm(np.diff(kid.xy, axis=0), axis=1)
    assert np.allclose(np.delete(step, k - 1), np.delete(truth_step, k - 1))
    turn = wrap_angle(np.diff(kid.odom_yaw))
    assert np.allclose(np.delete(turn, k - 1), np.delete(wrap_angle(np.diff(kid.yaw)), k - 1))


def test_no_kidnap_where_the_walk_is_too_small() -> None:
    track = loop_track(laps=1.0)  # 64 m: never 120 m left after a place 10 m away
    assert loc.kidnapped_track(track, np.ones(track.time_s.size, bool), seed=0) is None


def test_settled_is_the_suffix_rule_over_the_masked_updates() -> None:
    err = np.array([3.0, 2.0, 0.4, 0.3, 5.0, 0.2, 0.3])
    everything = np.ones(err.size, bool)
    assert loc.settled(err, everything) == 5
    off = everything.copy()
    off[4] = False  # the 5 m miss is off the map: not divergence
    assert loc.settled(err, off) == 2
    assert loc.settled(err, off, 0, 2) is None  # the segment before never settles
    assert loc.settled(np.full(4, 0.9), np.ones(4, bool)) is None  # RMSE above 0.5 m


def test_offmap_stretches_are_reported_apart() -> None:
    n = 40
    dist = np.arange(n) * 0.5
    step_s = np.arange(n) * 0.5
    known = np.ones(n, bool)
    known[10:20] = False  # 4.5 m off the map
    known[30] = False  # a door: shorter than OFFMAP_MIN_M
    err = np.full(n, 0.2)
    err[10:20] = 2.0
    err[20:24] = 1.5  # four updates (2 m) back on the map before the filter has it again
    sd = np.full(n, 0.3)
    sd[10:20] = np.linspace(0.5, 3.0, 10)
    stretches, short = loc.offmap_stretches(err, known, sd, dist, step_s)
    assert short == 1 and len(stretches) == 1
    s = stretches[0]
    assert s["length_m"] == pytest.approx(4.5) and s["sd_max_m"] == pytest.approx(3.0)
    assert s["back_on_map"] and s["reconverge_m"] == pytest.approx(2.0)


def test_row_names_and_the_older_ones() -> None:
    assert loc.map_suffix({}) == "" and loc.map_suffix(loc.MAP_KINDS["vector"]) == "_vector"
    assert loc.map_suffix({**loc.VECTOR_MAP, "a": 1}) == "_vector_a-1"
    # The recipe's settings changed are named: the potential at its defaults is another map.
    plain = {"target": "vector", "model": "potential"}
    assert (
        loc.map_suffix({**loc.VECTOR_MAP, "vips.theta_memory": False})
        == "_vector_vips.theta_memory-False"
    )
    assert loc.map_suffix(plain) == "_vector"  # older runs' three-axis map named so
    name = loc.row_name("building", "pedestrian", "known", "_vector")
    assert name == "building_pedestrian_known_vector"
    assert loc.legacy_name("building", "pedestrian", "known", "_vector") == "building_known_vector"
    assert loc.legacy_name("aalto5", "robot", "known", "") is None
    assert loc.legacy_name("aalto5", "pedestrian", "kidnapped", "") is None


def small_lookup() -> FieldLookup:
    grid = GridSpec((0.0, 0.0), 0.1, (170, 250))  # 25 x 17 m
    cols, rows = np.meshgrid(np.arange(250), np.arange(170))
    xy = np.column_stack([(cols.ravel() + 0.5) * 0.1, (rows.ravel() + 0.5) * 0.1])
    mean = field(xy).reshape(grid.shape)
    variance = np.full(grid.shape, 0.05)
    return FieldLookup(grid, mean, variance, np.full(grid.shape, 50.0), MapNoise(0.1, 0.05), 1.0)


def test_a_kidnapped_seed_end_to_end_gives_the_summary_keys_results_summary_reads() -> None:
    lookup = small_lookup()
    track = loop_track()
    kid = loc.kidnapped_track(track, lookup.is_known(track.xy), seed=0)
    assert kid is not None
    config = LocalizerConfig(min_particles=200, max_particles=1000, **loc.KIDNAP_RECOVERY)
    record, trace = loc.localize_track(lookup, kid, 0, "kidnapped", config, loc.ROBOT_ODOMETRY)
    assert record["carried_m"] >= loc.KIDNAP_MIN_M and record["kidnap_walked_m"] > 0
    assert trace.estimate.shape == (record["updates"], 2) and trace.kidnap == kid.kidnap
    summary = loc.summarise([record])
    for key in ("recovered_seeds", "recovery_m", "offmap_stretches", "never_converged_share"):
        assert key in summary
    # results_summary.py reads the older names of the pedestrian rows: its rows come out.
    known = loc.summarise([{**record, "converged": True, "converge_s": 10.0, "converge_m": 8.0,
                            "rmse_m": 0.2, "ellipse95": 0.95}])  # fmt: skip
    data = {"split": "test", "runs": {"aalto5_known": known, "aalto5_uniform": known},
            "speed": {"particles": [2000], "updates_per_s": [300.0]},
            "env": {"date": "2026-12-01 10:00", "commit": "0000000"}}  # fmt: skip
    rows = list(results_summary.localization_rows(data, Path("x.json")))
    assert [r[1].split(":")[0] for r in rows] == [
        "Aalto run 5, known start", "Aalto run 5, uniform start",
        "truth inside the filter's 95 % ellipse after convergence",
        "filter updates per second, 2000 particles, one core",
    ]  # fmt: skip
