"""The between-pass noise measured from the readings (``pass_noise_variance: auto``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.mapping import FieldReading, MapperConfig, MappingPipeline, Pose
from gp_mapper.mapping.inputs import collect_samples
from gp_mapper.mapping.map_file import read_model
from gp_mapper.mapping.pass_noise import (
    MIN_BETWEEN_PAIRS,
    PassNoiseEstimator,
    between_pass_noise,
    nugget_difference,
)
from gp_mapper.mapping.tiled_fit import fit_tiled
from test.mapping.synthetic import NS_PER_S, feed, true_field

RATE_HZ = 50.0
SPEED_M_S = 0.5


def passes(
    count: int, offset_sd: float, noise_sd: float = 0.1, seed: int = 0, length_m: float = 4.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``count`` passes back and forth along one corridor, each a little off the centre line
    and with its own offset of the reading: positions [N, 2], |B| [N], stamps [s], headings
    [rad], and each reading's pass."""
    rng = np.random.default_rng(seed)
    step = SPEED_M_S / RATE_HZ
    xs, ys, ts, yaws, which = [], [], [], [], []
    t0 = 0.0
    for p in range(count):
        x = np.arange(0.0, length_m, step)
        forward = p % 2 == 0
        x = x if forward else x[::-1]
        xs.append(x)
        ys.append(np.full_like(x, 1.0 + 0.02 * rng.standard_normal()))
        ts.append(t0 + np.arange(len(x)) / RATE_HZ)
        yaws.append(np.full_like(x, 0.0 if forward else np.pi))
        which.append(np.full(len(x), p))
        t0 = ts[-1][-1] + 25.0  # away and back: the next pass is PASS_GAP_S or more later
    xy = np.column_stack([np.concatenate(xs), np.concatenate(ys)])
    pass_of = np.concatenate(which)
    offsets = offset_sd * rng.standard_normal(count)
    y = true_field(xy) + offsets[pass_of] + noise_sd * rng.standard_normal(len(xy))
    return xy, y, np.concatenate(ts), np.concatenate(yaws), pass_of


def test_it_measures_the_offsets_variance_and_not_the_white_noise() -> None:
    xy, y, t, _, _ = passes(60, offset_sd=1.0)
    estimate = between_pass_noise(xy, y, t)
    assert estimate.between_pairs >= MIN_BETWEEN_PAIRS
    # 60 offsets of sd 1: their sample variance is 1 within ~0.2.
    assert estimate.variance == pytest.approx(1.0, abs=0.3)
    # Within a pass the readings differ by the white noise (σ² 0.01) and the field alone; at
    # zero distance by the white noise alone.
    assert estimate.within < 0.05
    assert estimate.white == pytest.approx(0.01, rel=0.2)


def test_the_nugget_difference_takes_the_field_change_out_at_any_distances() -> None:
    # One-pass pairs only a step or two apart, two-pass pairs anywhere within the radius: the
    # field's change c d² differs between them, and the fit takes it out.
    rng = np.random.default_rng(5)
    within_d = rng.choice([0.025, 0.05], 20_000)
    between_d = rng.uniform(0.0, 0.05, 2_000)
    distance = np.concatenate([within_d, between_d])
    between = np.arange(len(distance)) >= len(within_d)
    white, pass_var, c = 0.3, 0.7, 400.0
    half_sq = white + pass_var * between + c * distance**2
    mean_between, within, white_fitted = nugget_difference(half_sq, distance, between)
    assert mean_between - within == pytest.approx(pass_var, abs=1e-9)
    assert white_fitted == pytest.approx(white, abs=1e-9)  # the level at zero distance
    assert within == pytest.approx(white + c * np.mean(between_d**2), abs=1e-9)
    # 1 % more one-pass pairs close together and 4 µT² off (a turn): moved by under 0.1 µT²
    # (taken bin by bin, the closest bin's one-pass level would be theirs alone: ~0).
    distance = np.concatenate([distance, np.full(200, 0.005)])
    half_sq, between = (
        np.concatenate([half_sq, np.full(200, 4.0)]),
        np.append(between, [False] * 200),
    )
    mean_between, within, _ = nugget_difference(half_sq, distance, between)
    assert mean_between - within == pytest.approx(pass_var, abs=0.1)


def test_a_few_close_pairs_of_a_turn_do_not_lead_it() -> None:
    # The robot turns on the spot away from the corridor, its reading's offset switching at the
    # turn (two passes under the gap): a few hundred one-pass pairs a few mm apart whose
    # readings differ by 4 µT, against ~10⁵ of consecutive readings a step apart.
    xy, y, t, _, _ = passes(60, offset_sd=1.0)
    rng = np.random.default_rng(3)
    spot = np.column_stack([2.0 + 0.002 * rng.standard_normal(30), np.full(30, 3.0)])
    turn = true_field(spot) + np.where(np.arange(30) < 15, 2.0, -2.0)
    t_turn = t[-1] + 30.0 + np.arange(30) / RATE_HZ
    with_turn = between_pass_noise(
        np.vstack([xy, spot]), np.concatenate([y, turn]), np.concatenate([t, t_turn])
    )
    assert with_turn.variance == pytest.approx(between_pass_noise(xy, y, t).variance, abs=0.05)


def test_for_the_field_vector_it_measures_the_share_along_the_field() -> None:
    xy, _, t, _, pass_of = passes(60, offset_sd=0.0)
    rng = np.random.default_rng(7)
    field = np.column_stack([15.0 + xy[:, 0], 5.0 - xy[:, 1], np.full(len(xy), 40.0)])
    direction = field / np.linalg.norm(field, axis=1, keepdims=True)
    white = 0.1 * rng.standard_normal(field.shape)
    # Each pass stretches the reading along the field by its own offset (sd 1 µT): the
    # components' mean sees a third of it, the norm all of it.
    stretch = rng.standard_normal(60)[pass_of]
    along = between_pass_noise(xy, field + stretch[:, None] * direction + white, t)
    assert along.along == pytest.approx(1.0, abs=0.3)
    assert along.along == pytest.approx(3.0 * along.variance, rel=0.1)
    # An offset of each pass in any direction: the norm sees a component's share.
    offset = rng.standard_normal((60, 3))[pass_of]
    isotropic = between_pass_noise(xy, field + offset + white, t)
    assert isotropic.along == pytest.approx(isotropic.variance, rel=0.35)
    assert isotropic.variance == pytest.approx(1.0, abs=0.3)
    assert np.isnan(between_pass_noise(xy, field[:, 2], t).along)  # one scalar: none


def test_it_measures_how_far_along_a_pass_the_error_stays_the_same() -> None:
    # One offset per pass: shared over the whole 4 m corridor (a lower bound: the bins end).
    xy, y, t, _, pass_of = passes(60, offset_sd=1.0)
    shared = between_pass_noise(xy, y, t)
    assert shared.length >= 1.6
    # An error of each pass's own on every 10 cm of the corridor: independent beyond that.
    rng = np.random.default_rng(4)
    segment = np.floor(xy[:, 0] / 0.1).astype(int)
    per_segment = rng.standard_normal((pass_of.max() + 1, segment.max() + 1))
    changing = between_pass_noise(xy, y - (y - true_field(xy)) + per_segment[pass_of, segment], t)
    # (Within-pass pairs across a segment's edge see part of it: less than its variance of 1.)
    assert 0.5 < changing.variance < 1.3
    assert 0.05 < changing.length < 0.3
    assert changing.as_dict()["pass_noise_length_m"] == changing.length


def test_without_offsets_the_field_change_between_pairs_is_taken_out() -> None:
    # sin(x) cos(y) changes by up to 0.5 µT over the 5 cm radius: more than the noise.
    xy, y, t, _, _ = passes(20, offset_sd=0.0, noise_sd=0.05)
    estimate = between_pass_noise(xy, y, t)
    assert estimate.between_pairs >= MIN_BETWEEN_PAIRS
    assert estimate.variance < 0.02


def test_too_few_pairs_measure_nothing() -> None:
    xy, y, t, _, _ = passes(1, offset_sd=1.0)  # one pass: no pair of two passes
    estimate = between_pass_noise(xy, y, t)
    assert estimate.variance == 0.0 and estimate.between_pairs == 0


def test_a_heading_curve_is_not_counted_twice() -> None:
    # A reading error that depends on the heading: +1 µT one way, -1 µT the other.
    xy, y, t, yaw, _ = passes(20, offset_sd=0.0)
    y = y + np.cos(yaw)
    assert between_pass_noise(xy, y, t).variance > 1.0  # opposite passes differ by 2 µT
    assert between_pass_noise(xy, y, t, yaw).variance < 0.05  # the same heading only


def test_the_estimator_is_bounded_and_the_same_however_the_stream_is_windowed() -> None:
    xy, y, t, _, _ = passes(30, offset_sd=1.0)
    results = []
    for window in (400, 1000):
        estimator = PassNoiseEstimator(max_readings=5000)
        for start in range(0, len(y), window):
            rows = slice(start, start + window)
            estimator.add(xy[rows], y[rows], t[rows], None)
        assert estimator._held <= 5000
        results.append(estimator.estimate())
    assert results[0] == results[1]
    assert results[0].variance == pytest.approx(1.0, abs=0.4)


def records(xy: np.ndarray, y: np.ndarray, t: np.ndarray) -> list[Pose | FieldReading]:
    """A pose at each reading's place, the reading half a sample later, the field along z."""
    half = int(NS_PER_S / RATE_HZ / 2)
    level = np.array([0.0, 0.0, 0.0, 1.0])
    out: list[Pose | FieldReading] = []
    for p, value, stamp in zip(xy, y, t, strict=True):
        ns = round(stamp * NS_PER_S)
        out.append(Pose(ns, np.array([p[0], p[1], 0.0]), level))
        out.append(Pose(ns + 2 * half, np.array([p[0], p[1], 0.0]), level))
        out.append(FieldReading(ns + half, np.array([0.0, 0.0, value * 1e-6]), ""))
    return out


# Twelve 3-m passes with offsets of sd 1 µT, mapped (small_map) with every reading kept in
# windows of 200 and each test's own model settings.
SHORT_PASSES: dict = {"count": 12, "offset_sd": 1.0, "length_m": 3.0}


def small_map(**settings: object) -> MapperConfig:
    return MapperConfig().replace(pose_source="topic", batch_size=200, min_spacing=0.0, **settings)


def stream(config: MapperConfig, xy: np.ndarray, y: np.ndarray, t: np.ndarray) -> dict:
    """The readings through a pipeline; its diagnostics."""
    with MappingPipeline(config, background=False) as pipeline:
        feed(pipeline, records(xy, y, t))
        pipeline.flush()
        return pipeline.diagnostics()


@pytest.mark.slow
def test_the_pipeline_measures_it_as_passes_accumulate_and_a_number_still_sets_it() -> None:
    xy, y, t, _, _ = passes(**SHORT_PASSES)
    config = small_map(tile_size=0.0, vips_max_inducing=150, fit_iterations=5, fit_every_windows=2)
    assert config.pass_noise_auto
    auto = stream(config, xy, y, t)
    assert auto["pass_noise_pairs"] >= MIN_BETWEEN_PAIRS
    offline = between_pass_noise(xy, y, t)
    # Measured on the readings up to the last fit: the same order as on the whole stream.
    assert 0.5 * offline.variance < auto["pass_noise_variance"] < 2.0 * offline.variance
    fixed = stream(config.replace(vips_pass_noise_variance=0.25), xy, y, t)
    assert fixed["pass_noise_variance"] == 0.25 and fixed["pass_noise_pairs"] == 0


def test_auto_is_the_node_default_and_other_words_are_refused() -> None:
    assert MapperConfig().engine.get("vips.pass_noise_variance") == "auto"
    assert (
        MapperConfig.from_dict({"vips.pass_noise_variance": 1}).engine.get(
            "vips.pass_noise_variance"
        )
        == 1.0
    )
    with pytest.raises(ValueError, match="'auto' or a number"):
        MapperConfig.from_dict({"vips.pass_noise_variance": "automatic"})
    with pytest.raises(ValueError, match="pass_noise_variance"):
        MapperConfig.from_dict({"vips.pass_noise_variance": -1.0})


@pytest.mark.slow
def test_an_offline_fit_measures_it_on_the_whole_log_for_every_tile() -> None:
    xy, y, t, _, _ = passes(**SHORT_PASSES)
    config = small_map(tile_size=2.0, tile_overlap=0.5, vips_max_inducing=100, fit_iterations=3)
    samples = collect_samples(records(xy, y, t), config)
    model, report = fit_tiled(samples, config)
    measured = report["pass_noise"]
    expected = between_pass_noise(samples.X, samples.y, samples.stamps_ns / NS_PER_S)
    assert measured["pass_noise_variance"] == pytest.approx(expected.variance, rel=1e-12)
    assert measured["pass_noise_between_pairs"] >= MIN_BETWEEN_PAIRS
    assert len(model.tiles) >= 2
    for tile in model.tiles.values():
        assert tile.pass_noise_variance == pytest.approx(expected.variance, rel=1e-12)


def test_the_pipeline_records_the_passes_and_the_saved_map_keeps_them(tmp_path) -> None:
    xy, y, t, _, _ = passes(**SHORT_PASSES)
    config = small_map(vips_max_inducing=150, fit_iterations=5, fit_every_windows=2)
    assert config.tile_layout() is not None  # the node's default: a tiled map
    with MappingPipeline(config, background=False) as pipeline:
        feed(pipeline, records(xy, y, t))
        pipeline.flush()
        pipeline.save(tmp_path / "map.npz")
    model = read_model(tmp_path / "map.npz", device="cpu")
    counts = model.posterior.passes
    middle = np.array([[1.5, 1.0]])
    assert counts.passes_at(middle).tolist() == [SHORT_PASSES["count"]]
    assert counts.scale > 0.0  # σ²_pass measured, so the offsets count
    assert counts.white == pytest.approx(0.01, rel=0.3)  # the sensor's white noise, sd 0.1
    latent = model.posterior.predict(torch.as_tensor(middle))[1]
    assert float(model.posterior.pass_error_variance(torch.as_tensor(middle), latent)) > 0.0


@pytest.mark.slow
def test_a_field_vector_map_measures_its_pass_error_along_the_field(tmp_path) -> None:
    from gp_mapper.mapping.localization import FieldLookup

    xy, _, t, _, pass_of = passes(**{**SHORT_PASSES, "offset_sd": 0.0})
    rng = np.random.default_rng(3)
    field = np.column_stack([
        10.0 + true_field(xy) - true_field(xy).mean(), np.full(len(xy), 5.0), np.full(len(xy), 40.0)
    ])  # fmt: skip
    direction = field / np.linalg.norm(field, axis=1, keepdims=True)
    stretch = rng.standard_normal(pass_of.max() + 1)[pass_of]  # each pass's, along B
    readings = field + stretch[:, None] * direction + 0.1 * rng.standard_normal(field.shape)
    half = int(NS_PER_S / RATE_HZ / 2)
    level = np.array([0.0, 0.0, 0.0, 1.0])
    config = small_map(target="vector", model="potential", vips_max_inducing=150,
                       fit_iterations=5, fit_every_windows=2)  # fmt: skip
    with MappingPipeline(config, background=False) as pipeline:
        for p, value, stamp in zip(xy, readings, t, strict=True):
            ns = round(stamp * NS_PER_S)
            pipeline.add_pose(Pose(ns, np.array([p[0], p[1], 0.0]), level))
            pipeline.add_pose(Pose(ns + 2 * half, np.array([p[0], p[1], 0.0]), level))
            pipeline.add_field(FieldReading(ns + half, value * 1e-6, ""))
        pipeline.flush()
        pipeline.save(tmp_path / "map.npz")
    model = read_model(tmp_path / "map.npz", device="cpu")
    counts = model.posterior.passes
    # The norm's σ²_pass is ~3 times the components' mean: the error lies along the field.
    assert counts.along > 2.0 * counts.scale > 0.0
    assert counts.along_share() > 0.6
    lookup = FieldLookup.from_model(model, (0.0, 3.0, 0.5, 1.5))
    assert lookup.noise.along > 2.0 * lookup.noise.shared
    # The sensor's white noise (0.1 µT per axis) measured beside it: what a batch averages.
    assert counts.white == pytest.approx(0.01, rel=0.3)
    assert lookup.noise.white == pytest.approx(counts.white)
