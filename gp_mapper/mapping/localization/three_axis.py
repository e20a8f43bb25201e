"""The three-axis likelihood of a batch of readings, with the sensor's offset integrated out.

A map of the field vector predicts, at a particle's place, the map-frame field as a Gaussian
``N(m, C)`` (its latent mean and 3 x 3 covariance). A reading ``y`` in the sensor's axes is
that field turned into the sensor's axes plus the sensor's own offset ``b`` (hard iron, and
what a sensor other than the map's reads differently: a constant vector in the sensor's axes)
and noise. Turned into the odom frame by the odometry's yaw and the sensor's attitude
(``R = R_z(yaw) · attitude``, roll and pitch from TF), a batch's mean reading is

    z̄ = R_z(−δ) m + Ā b + ε,    Ā = mean of the readings' R,

where ``δ`` is the particle's heading less the odometry's (the map -> odom rotation the
particle stands for). With ``b ~ N(μ_b, Σ_b)`` per particle the likelihood is Gaussian in
closed form and ``b``'s posterior a Kalman update (a Rao-Blackwellised particle filter:
Doucet, de Freitas, Murphy & Russell 2000; the offset as a state of a magnetic filter as in
Solin et al. 2016's discussion of sensor biases). Tempering (``weight`` < 1: a batch counts
as part of an observation, ``localizer`` module docstring) raises the likelihood to a power,
which for a Gaussian in ``b`` is the same Gaussian with its noise divided by the weight; the
weights then differ from ``weight · log N`` only by ``(1 − weight)/2 · log|R|``, kept so that
without an offset the tempered three-axis likelihood is exactly ``weight · log N``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class BatchObservation(NamedTuple):
    """A batch's readings, in the odom frame.

    Attributes:
        mean_ut: [3] the mean reading turned into the odom frame (µT).
        axes: [3, 3] the mean rotation from the sensor's axes into the odom frame (``Ā``).
        count: readings in the batch.
    """

    mean_ut: np.ndarray
    axes: np.ndarray
    count: int


def rotation_z(yaw: np.ndarray) -> np.ndarray:
    """[n, 3, 3] rotations about z by ``yaw`` [n] (rad)."""
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.zeros((yaw.shape[0], 3, 3))
    out[:, 0, 0], out[:, 0, 1] = c, -s
    out[:, 1, 0], out[:, 1, 1] = s, c
    out[:, 2, 2] = 1.0
    return out


def batch_observation(
    fields_ut: np.ndarray, yaws: np.ndarray, attitudes: np.ndarray
) -> BatchObservation:
    """The batch's mean reading and axes in the odom frame (module docstring).

    Args:
        fields_ut: [n, 3] readings in the sensor's axes.
        yaws: [n] the odometry's yaw at each reading.
        attitudes: [n, 3, 3] rotations from the sensor's axes into the base's levelled axes.
    """
    rotations = rotation_z(yaws) @ attitudes
    odom = np.einsum("nij,nj->ni", rotations, fields_ut)
    return BatchObservation(odom.mean(axis=0), rotations.mean(axis=0), int(fields_ut.shape[0]))


def _cholesky_solve(chol: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``S⁻¹ rhs`` for lower Cholesky factors ``chol`` [P, 3, 3] and ``rhs`` [P, 3, k], by
    forward and back substitution (three rows: no inverse formed)."""
    y = np.empty_like(rhs)
    for i in range(3):
        y[:, i] = (rhs[:, i] - np.einsum("pj,pjk->pk", chol[:, i, :i], y[:, :i])) / chol[
            :, i, i, None
        ]
    x = np.empty_like(rhs)
    for i in (2, 1, 0):
        x[:, i] = (y[:, i] - np.einsum("pj,pjk->pk", chol[:, i + 1 :, i], x[:, i + 1 :])) / chol[
            :, i, i, None
        ]
    return x


def _cholesky(matrices: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of [P, 3, 3] covariances, with a jitter ladder for any that is
    not numerically positive definite (1e-9 ... 1e-3 of its mean diagonal)."""
    try:
        return np.linalg.cholesky(matrices)
    except np.linalg.LinAlgError:
        pass
    scale = np.trace(matrices, axis1=1, axis2=2)[:, None, None] / 3.0
    for jitter in (1e-9, 1e-7, 1e-5, 1e-3):
        try:
            return np.linalg.cholesky(matrices + jitter * scale * np.eye(3))
        except np.linalg.LinAlgError:
            continue
    raise np.linalg.LinAlgError("a particle's predictive covariance is not positive definite")


def three_axis_update(
    observation: BatchObservation,
    heading_offset: np.ndarray,
    field_mean: np.ndarray,
    field_covariance: np.ndarray,
    noise_ut2: float,
    weight: float,
    offset_mean: np.ndarray | None = None,
    offset_covariance: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Each particle's log-likelihood of the batch, and its offset's posterior.

    Args:
        observation: the batch (`batch_observation`).
        heading_offset: [P] each particle's heading less the odometry's (δ).
        field_mean, field_covariance: [P, 3], [P, 3, 3] the map at each particle (map frame).
        noise_ut2: the noise variance of the batch's mean reading, per component (µT²).
        weight: the tempering weight in (0, 1].
        offset_mean, offset_covariance: [P, 3], [P, 3, 3] the sensor offset's Gaussian per
            particle; None: no offset.

    Returns:
        log-likelihood [P] (up to a constant shared by the particles), and the offset's
        posterior mean and covariance (None without an offset).
    """
    turn = rotation_z(-heading_offset)
    predicted = np.einsum("pij,pj->pi", turn, field_mean)
    noise = turn @ field_covariance @ turn.transpose(0, 2, 1) + noise_ut2 * np.eye(3)
    residual = observation.mean_ut - predicted
    if offset_mean is None or offset_covariance is None:
        chol = _cholesky(noise)
        quad = _cholesky_solve(chol, residual[..., None])[..., 0]
        log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        return weight * -0.5 * (np.einsum("pi,pi->p", residual, quad) + log_det), None, None
    axes = observation.axes
    residual = residual - offset_mean @ axes.T
    axes_cov = np.einsum("ij,pjk->pik", axes, offset_covariance)  # Ā Σ_b
    total = noise / weight + axes_cov @ axes.T
    chol = _cholesky(total)
    solved = _cholesky_solve(chol, np.concatenate([residual[..., None], axes_cov], axis=2))
    quad = np.einsum("pi,pi->p", residual, solved[..., 0])
    log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    log_likelihood = -0.5 * (quad + log_det)
    if weight < 1.0:
        noise_chol = _cholesky(noise)
        noise_log_det = 2.0 * np.log(np.diagonal(noise_chol, axis1=1, axis2=2)).sum(axis=1)
        log_likelihood += 0.5 * (1.0 - weight) * noise_log_det
    gain_t = solved[..., 1:]  # S⁻¹ Ā Σ_b = Kᵀ
    mean = offset_mean + np.einsum("pji,pj->pi", gain_t, residual)
    covariance = offset_covariance - np.einsum("pji,pjk->pik", gain_t, axes_cov)
    covariance = 0.5 * (covariance + covariance.transpose(0, 2, 1))
    return log_likelihood, mean, covariance
