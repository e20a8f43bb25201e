"""The three-axis likelihood: its closed form against the dense Gaussian algebra, the sensor
offset learnt online, and a sensor's attitude from TF."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from scipy.stats import multivariate_normal

from gp_mapper.mapping.localization import Localizer, LocalizerConfig
from gp_mapper.mapping.localization.three_axis import (
    BatchObservation,
    batch_observation,
    rotation_z,
    three_axis_update,
)

from .test_localization import NS, errors, vector_lookup, walk  # noqa: F401


def random_spd(rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
    a = rng.normal(size=(count, 3, 3))
    return scale * (a @ a.transpose(0, 2, 1) + 0.5 * np.eye(3))


@pytest.fixture
def case():
    rng = np.random.default_rng(4)
    P = 6
    axes = Rotation.random(random_state=1).as_matrix()
    observation = BatchObservation(rng.normal(size=3) * 20.0, axes, 12)
    return dict(
        observation=observation,
        delta=rng.uniform(-math.pi, math.pi, P),
        mean=rng.normal(size=(P, 3)) * 20.0,
        cov=random_spd(rng, P, 0.3),
        noise=0.4,
        offset_mean=rng.normal(size=(P, 3)) * 3.0,
        offset_cov=random_spd(rng, P, 2.0),
    )


def test_the_offset_is_integrated_out_and_updated_as_the_dense_gaussian_algebra_says(case):
    c = case
    log_lik, _, mean, cov = three_axis_update(
        c["observation"], c["delta"], c["mean"], c["cov"], c["noise"], 1.0, c["offset_mean"],
        c["offset_cov"],
    )  # fmt: skip
    A = c["observation"].axes
    z = c["observation"].mean_ut
    for p in range(c["delta"].size):
        turn = rotation_z(-c["delta"][p : p + 1])[0]
        R = turn @ c["cov"][p] @ turn.T + c["noise"] * np.eye(3)
        predicted = turn @ c["mean"][p] + A @ c["offset_mean"][p]
        S = R + A @ c["offset_cov"][p] @ A.T
        # The same constant for every particle: compare differences to particle 0.
        dense = multivariate_normal(predicted, S).logpdf(z)
        if p == 0:
            dense0, ours0 = dense, log_lik[0]
        assert log_lik[p] - ours0 == pytest.approx(dense - dense0, abs=1e-9)
        gain = c["offset_cov"][p] @ A.T @ np.linalg.inv(S)
        np.testing.assert_allclose(mean[p], c["offset_mean"][p] + gain @ (z - predicted),
                                   atol=1e-9)  # fmt: skip
        np.testing.assert_allclose(cov[p], c["offset_cov"][p] - gain @ A @ c["offset_cov"][p],
                                   atol=1e-9)  # fmt: skip


def test_an_offset_along_the_field_joins_the_state_as_the_dense_algebra_says(case):
    """State [b, c]: the reading is R_z(−δ)(m + c m̂) + Ā b + ε, m̂ the map's mean direction;
    integrated out and updated jointly, tempered (w = 0.6) as the offset alone is."""
    c = case
    rng = np.random.default_rng(7)
    P, w = c["delta"].size, 0.6
    state_mean = np.column_stack([c["offset_mean"], rng.normal(size=P)])
    a = rng.normal(size=(P, 4, 4))
    state_cov = a @ a.transpose(0, 2, 1) + 0.5 * np.eye(4)
    log_lik, _, mean, cov = three_axis_update(
        c["observation"], c["delta"], c["mean"], c["cov"], c["noise"], w, state_mean, state_cov
    )
    A, z = c["observation"].axes, c["observation"].mean_ut
    reference = []
    for p in range(P):
        turn = rotation_z(-c["delta"][p : p + 1])[0]
        R = turn @ c["cov"][p] @ turn.T + c["noise"] * np.eye(3)
        direction = turn @ c["mean"][p] / np.linalg.norm(c["mean"][p])
        H = np.column_stack([A, direction])
        predicted = turn @ c["mean"][p] + H @ state_mean[p]
        S = R / w + H @ state_cov[p] @ H.T
        reference.append(multivariate_normal(predicted, S).logpdf(z)
                         + 0.5 * (1 - w) * np.linalg.slogdet(R)[1])  # fmt: skip
        gain = state_cov[p] @ H.T @ np.linalg.inv(S)
        np.testing.assert_allclose(mean[p], state_mean[p] + gain @ (z - predicted), atol=1e-9)
        np.testing.assert_allclose(cov[p], state_cov[p] - gain @ H @ state_cov[p], atol=1e-9)
    reference = np.array(reference)
    np.testing.assert_allclose(log_lik - log_lik[0], reference - reference[0], atol=1e-9)


def test_a_pass_error_along_the_field_widens_the_noise_along_the_predicted_field(case):
    c = case
    log_lik, _, mean, cov = three_axis_update(
        c["observation"], c["delta"], c["mean"], c["cov"], c["noise"], 1.0, c["offset_mean"],
        c["offset_cov"], along_ut2=0.9,
    )  # fmt: skip
    A = c["observation"].axes
    z = c["observation"].mean_ut
    for p in range(c["delta"].size):
        turn = rotation_z(-c["delta"][p : p + 1])[0]
        m = turn @ c["mean"][p]
        u = m / np.linalg.norm(m)
        R = turn @ c["cov"][p] @ turn.T + c["noise"] * np.eye(3) + 0.9 * np.outer(u, u)
        S = R + A @ c["offset_cov"][p] @ A.T
        dense = multivariate_normal(m + A @ c["offset_mean"][p], S).logpdf(z)
        if p == 0:
            dense0, ours0 = dense, log_lik[0]
        assert log_lik[p] - ours0 == pytest.approx(dense - dense0, abs=1e-9)
        gain = c["offset_cov"][p] @ A.T @ np.linalg.inv(S)
        residual = z - m - A @ c["offset_mean"][p]
        np.testing.assert_allclose(mean[p], c["offset_mean"][p] + gain @ residual, atol=1e-9)
        np.testing.assert_allclose(cov[p], c["offset_cov"][p] - gain @ A @ c["offset_cov"][p],
                                   atol=1e-9)  # fmt: skip
    # Zero: the isotropic likelihood, bit for bit.
    plain = three_axis_update(c["observation"], c["delta"], c["mean"], c["cov"], c["noise"], 1.0)
    zero = three_axis_update(c["observation"], c["delta"], c["mean"], c["cov"], c["noise"], 1.0,
                             along_ut2=0.0)  # fmt: skip
    np.testing.assert_array_equal(plain[0], zero[0])


def test_tempered_without_an_offset_is_the_weight_times_the_log_likelihood(case):
    c = case
    full, _, _, _ = three_axis_update(c["observation"], c["delta"], c["mean"], c["cov"], c["noise"],
                                   1.0)  # fmt: skip
    tempered, _, _, _ = three_axis_update(c["observation"], c["delta"], c["mean"], c["cov"],
                                       c["noise"], 0.3)  # fmt: skip
    np.testing.assert_allclose(tempered, 0.3 * full, rtol=1e-12)


def test_tempering_with_an_offset_is_the_tempered_likelihood_integrated_over_it(case):
    """∫ N(z; Ab + c, R)^w N(b; μ, Σ) db, by quadrature-free algebra: the same Gaussian in b with
    R / w, times |R|^((1−w)/2) up to a constant shared by the particles."""
    c = case
    w = 0.4
    log_lik, _, _, _ = three_axis_update(c["observation"], c["delta"], c["mean"], c["cov"],
                                      c["noise"], w, c["offset_mean"], c["offset_cov"])  # fmt: skip
    A, z = c["observation"].axes, c["observation"].mean_ut
    reference = []
    for p in range(c["delta"].size):
        turn = rotation_z(-c["delta"][p : p + 1])[0]
        R = turn @ c["cov"][p] @ turn.T + c["noise"] * np.eye(3)
        predicted = turn @ c["mean"][p] + A @ c["offset_mean"][p]
        S = R / w + A @ c["offset_cov"][p] @ A.T
        value = (
            multivariate_normal(predicted, S).logpdf(z) + 0.5 * (1 - w) * np.linalg.slogdet(R)[1]
        )
        reference.append(value)
    reference = np.array(reference)
    np.testing.assert_allclose(log_lik - log_lik[0], reference - reference[0], atol=1e-9)
    # The identity itself, brute force in one dimension of b (the others at their mean).
    p = 0
    turn = rotation_z(-c["delta"][:1])[0]
    R = turn @ c["cov"][p] @ turn.T + c["noise"] * np.eye(3)
    mu, var = c["offset_mean"][p], 4.0
    grid = np.linspace(mu[0] - 12, mu[0] + 12, 20001)
    b = np.tile(mu, (grid.size, 1))
    b[:, 0] = grid
    pred = turn @ c["mean"][p] + b @ A.T
    integrand = w * multivariate_normal(np.zeros(3), R).logpdf(z - pred)
    integrand += -0.5 * (grid - mu[0]) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
    brute = np.log(np.trapezoid(np.exp(integrand), grid))
    cov1 = np.zeros((1, 3, 3))
    cov1[0, 0, 0] = var
    one, _, _, _ = three_axis_update(c["observation"], c["delta"][:1], c["mean"][:1], c["cov"][:1],
                                  c["noise"], w, mu[None], cov1 + 1e-14 * np.eye(3))  # fmt: skip
    constant = 1.5 * (1 - w) * math.log(2 * math.pi) - 1.5 * math.log(w)
    assert one[0] - 1.5 * math.log(2 * math.pi) + constant == pytest.approx(brute, abs=1e-6)


def test_a_batch_is_turned_into_the_odom_frame_by_yaw_and_attitude():
    rng = np.random.default_rng(2)
    field_odom = np.array([15.0, -5.0, 40.0])
    yaws = rng.uniform(-3, 3, 8)
    attitudes = Rotation.random(8, random_state=3).as_matrix()
    to_odom = rotation_z(yaws) @ attitudes
    readings = np.einsum("nji,nj->ni", to_odom, np.tile(field_odom, (8, 1)))  # R⁻¹ v
    observation = batch_observation(readings, yaws, attitudes)
    np.testing.assert_allclose(observation.mean_ut, field_odom, atol=1e-12)
    np.testing.assert_allclose(observation.axes, to_odom.mean(axis=0))
    assert observation.count == 8


# ---------------------------------------------------------------- the filter


HARD_IRON = np.array([6.0, -4.0, 3.0])


def track(localizer: Localizer, walk, readings, attitudes=None, stop=None):  # noqa: F811
    run, _, odom = walk
    for i in range(stop or run.time_s.size):
        stamp = round(run.time_s[i] * NS)
        localizer.add_odometry(stamp, odom[i])
        localizer.add_field(stamp, readings[i], None if attitudes is None else attitudes[i])


def test_a_sensor_offset_is_learnt_online_and_the_filter_tracks_through_it(walk):  # noqa: F811
    run, truth, _ = walk
    readings = run.mag_ut + HARD_IRON
    result = {}
    for sd in (0.0, 8.0):
        config = LocalizerConfig(seed=3, hard_iron_sd_ut=sd, hard_iron_walk_ut=0.0)
        localizer = Localizer(vector_lookup(), config)
        localizer.initialize_pose(truth[0])
        track(localizer, walk, readings)
        err, _ = errors(localizer, run, truth, since_s=40.0)
        result[sd] = (float(np.sqrt(np.mean(err**2))), localizer.steps[-1])
    rmse, last = result[8.0]
    assert rmse < 0.5, result
    assert result[0.0][0] > 2.0 * rmse, {k: v[0] for k, v in result.items()}
    assert last.hard_iron_ut is not None and last.hard_iron_sd_ut is not None
    np.testing.assert_allclose(last.hard_iron_ut, HARD_IRON, atol=1.5)
    assert (last.hard_iron_sd_ut < 1.5).all() and result[0.0][1].hard_iron_ut is None


def test_a_tilted_mounting_given_as_attitude_tracks_as_a_level_one(walk):  # noqa: F811
    """The sensor turned 90° about z and tilted 20° about x in the base: its readings in its
    own axes, with that attitude, are the level readings."""
    run, truth, _ = walk
    mounting = Rotation.from_euler("zx", [90.0, 20.0], degrees=True).as_matrix()
    readings = run.mag_ut @ mounting  # Mᵀ v: the level reading in the sensor's axes
    attitudes = np.broadcast_to(mounting, (run.time_s.size, 3, 3))
    out = {}
    for name, (r, a) in {"level": (run.mag_ut, None), "tilted": (readings, attitudes),
                         "ignored": (readings, None)}.items():  # fmt: skip
        localizer = Localizer(vector_lookup(), LocalizerConfig(seed=4, hard_iron_sd_ut=0.0))
        localizer.initialize_pose(truth[0])
        track(localizer, walk, r, a)
        out[name] = localizer
    level = np.array([s.estimate.mean for s in out["level"].steps])
    tilted = np.array([s.estimate.mean for s in out["tilted"].steps])
    np.testing.assert_allclose(tilted, level, atol=1e-6)
    ignored, _ = errors(out["ignored"], run, truth)
    assert np.sqrt(np.mean(ignored**2)) > 1.0


def test_a_reading_whose_attitude_is_no_rotation_is_counted_not_weighed(walk):  # noqa: F811
    localizer = Localizer(vector_lookup(), LocalizerConfig(seed=0))
    localizer.initialize_pose(np.zeros(3))
    localizer.add_field(1, np.array([1.0, 2.0, 3.0]), 2.0 * np.eye(3))
    assert localizer.drops["attitude_not_a_rotation"] == 1


def test_likelihood_norm_reads_a_vector_map_by_its_norm_and_vector_needs_one(walk):  # noqa: F811
    from .test_localization import world_lookup

    localizer = Localizer(vector_lookup(), LocalizerConfig(likelihood="norm"))
    assert not localizer.uses_field_vector
    assert Localizer(vector_lookup(), LocalizerConfig()).uses_field_vector
    with pytest.raises(ValueError, match="field vector"):
        Localizer(world_lookup(), LocalizerConfig(likelihood="vector"))
    with pytest.raises(ValueError, match="likelihood must be one of"):
        LocalizerConfig(likelihood="both")


def test_an_offset_along_the_field_learnt_per_pass_keeps_the_filter_closer(walk):  # noqa: F811
    """Readings stretched along the field by a new 2 µT offset every 15 s (a pass's
    calibration residue): the sensor offset turns with the heading and cannot follow it; the
    offset along the field, estimated with it, does (measured: 0.107 m against 0.063 m)."""
    run, truth, odom = walk
    norm = np.linalg.norm(run.mag_ut, axis=1, keepdims=True)
    passes = (run.time_s // 15.0).astype(int)
    offsets = np.random.default_rng(0).normal(0.0, 2.0, passes.max() + 1)[passes]
    stretched = run._replace(mag_ut=run.mag_ut * (norm + offsets[:, None]) / norm)
    rmse = {}
    for sd in (0.0, 2.0):
        err = []
        for seed in (0, 2):
            config = LocalizerConfig(seed=seed, field_offset_sd_ut=sd, field_offset_walk_ut=0.3)
            localizer = Localizer(vector_lookup(), config)
            localizer.initialize_pose(truth[0])
            for i in range(run.time_s.size):
                stamp = round(run.time_s[i] * NS)
                localizer.add_odometry(stamp, odom[i])
                localizer.add_field(stamp, stretched.mag_ut[i])
            assert localizer.particles.states["offset_mean"].shape[1] == (4 if sd else 3)
            e, _ = errors(localizer, stretched, truth, since_s=10.0)
            err.append(np.sqrt(np.mean(e**2)))
        rmse[sd] = float(np.mean(err))
    assert rmse[2.0] < 0.8 * rmse[0.0], rmse
