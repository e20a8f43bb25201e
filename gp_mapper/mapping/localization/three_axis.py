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


def _cholesky(matrices: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors [P, 3, 3] of [P, 3, 3] covariances, entry by entry (the closed
    form of three rows: LAPACK's per-matrix call costs more than the arithmetic here), with a
    jitter ladder (1e-9 ... 1e-3 of the mean diagonal) for any not numerically positive
    definite."""
    out = _cholesky_closed_form(matrices)
    bad = ~np.isfinite(out).all(axis=(1, 2))
    if bad.any():
        scale = np.trace(matrices[bad], axis1=1, axis2=2)[:, None, None] / 3.0
        for jitter in (1e-9, 1e-7, 1e-5, 1e-3):
            retry = _cholesky_closed_form(matrices[bad] + jitter * scale * np.eye(3))
            if np.isfinite(retry).all():
                out[bad] = retry
                break
        else:
            raise np.linalg.LinAlgError(
                "a particle's predictive covariance is not positive definite"
            )
    return out


def _cholesky_closed_form(S: np.ndarray) -> np.ndarray:
    """Lower factors of [P, 3, 3] (NaN or inf in a row whose matrix is not positive definite)."""
    L = np.zeros_like(S)
    with np.errstate(invalid="ignore", divide="ignore"):
        L[:, 0, 0] = np.sqrt(S[:, 0, 0])
        L[:, 1, 0] = S[:, 1, 0] / L[:, 0, 0]
        L[:, 2, 0] = S[:, 2, 0] / L[:, 0, 0]
        L[:, 1, 1] = np.sqrt(S[:, 1, 1] - L[:, 1, 0] ** 2)
        L[:, 2, 1] = (S[:, 2, 1] - L[:, 2, 0] * L[:, 1, 0]) / L[:, 1, 1]
        L[:, 2, 2] = np.sqrt(S[:, 2, 2] - L[:, 2, 0] ** 2 - L[:, 2, 1] ** 2)
    return L


def _cholesky_solve(L: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``S⁻¹ rhs`` for lower Cholesky factors ``L`` [P, 3, 3] of S and ``rhs`` [P, 3, k], by
    forward and back substitution entry by entry (no inverse formed)."""
    d0, d1, d2 = (L[:, i, i, None] for i in range(3))
    y0 = rhs[:, 0] / d0
    y1 = (rhs[:, 1] - L[:, 1, 0, None] * y0) / d1
    y2 = (rhs[:, 2] - L[:, 2, 0, None] * y0 - L[:, 2, 1, None] * y1) / d2
    x2 = y2 / d2
    x1 = (y1 - L[:, 2, 1, None] * x2) / d1
    x0 = (y0 - L[:, 1, 0, None] * x1 - L[:, 2, 0, None] * x2) / d0
    return np.stack([x0, x1, x2], axis=1)


def _log_det(L: np.ndarray) -> np.ndarray:
    return 2.0 * (np.log(L[:, 0, 0]) + np.log(L[:, 1, 1]) + np.log(L[:, 2, 2]))


def _turned(
    heading_offset: np.ndarray, mean: np.ndarray, cov: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``R_z(−δ) m`` [P, 3] and ``R_z(−δ) C R_z(−δ)ᵀ`` [P, 3, 3], entry by entry."""
    c, s = np.cos(heading_offset), np.sin(heading_offset)
    turned = np.empty_like(mean)
    turned[:, 0] = c * mean[:, 0] + s * mean[:, 1]
    turned[:, 1] = -s * mean[:, 0] + c * mean[:, 1]
    turned[:, 2] = mean[:, 2]
    a, b, d = cov[:, 0, 0], 0.5 * (cov[:, 0, 1] + cov[:, 1, 0]), cov[:, 1, 1]
    e, f = 0.5 * (cov[:, 0, 2] + cov[:, 2, 0]), 0.5 * (cov[:, 1, 2] + cov[:, 2, 1])
    out = np.empty_like(cov)
    cc, ss, cs = c * c, s * s, c * s
    out[:, 0, 0] = cc * a + 2.0 * cs * b + ss * d
    out[:, 1, 1] = ss * a - 2.0 * cs * b + cc * d
    out[:, 0, 1] = out[:, 1, 0] = -cs * a + (cc - ss) * b + cs * d
    out[:, 0, 2] = out[:, 2, 0] = c * e + s * f
    out[:, 1, 2] = out[:, 2, 1] = -s * e + c * f
    out[:, 2, 2] = cov[:, 2, 2]
    return turned, out


def three_axis_update(
    observation: BatchObservation,
    heading_offset: np.ndarray,
    field_mean: np.ndarray,
    field_covariance: np.ndarray,
    noise_ut2: float,
    weight: float,
    offset_mean: np.ndarray | None = None,
    offset_covariance: np.ndarray | None = None,
    along_ut2: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Each particle's log-likelihood of the batch, and its offset's posterior.

    Args:
        observation: the batch (`batch_observation`).
        heading_offset: [P] each particle's heading less the odometry's (δ).
        field_mean, field_covariance: [P, 3], [P, 3, 3] the map at each particle (map frame).
        noise_ut2: the noise variance of the batch's mean reading, per component (µT²).
        weight: the tempering weight in (0, 1].
        offset_mean, offset_covariance: [P, 3], [P, 3, 3] the sensor offset's Gaussian per
            particle; None: no offset. [P, 4], [P, 4, 4]: the offset and, fourth, an offset
            along the field (µT; a pass's calibration residue or a gain error stretches the
            reading along the field it reads: ``z̄ = R_z(−δ)(m + c m̂) + Ā b + ε``, with m̂ the
            map's mean direction at the particle), jointly Gaussian.
        along_ut2: noise variance along the predicted field's direction on top of
            ``noise_ut2`` (a pass error that stretches the reading along the field: µT²).

    Returns:
        log-likelihood [P] (up to a constant shared by the particles), the surprise [P] (the
        tempered quadratic form less its expectation, ``−½ (rᵀ S⁻¹ r − 3 w)``: the
        likelihood without its normalising determinant, zero on average where the predictive
        is right), and the offset's posterior mean and covariance (None without an offset).
    """
    predicted, noise = _turned(heading_offset, field_mean, field_covariance)
    noise[:, 0, 0] += noise_ut2
    noise[:, 1, 1] += noise_ut2
    noise[:, 2, 2] += noise_ut2
    if along_ut2 > 0.0:
        u = _direction(predicted)
        noise += along_ut2 * u[:, :, None] * u[:, None, :]
    residual = observation.mean_ut - predicted
    if offset_mean is None or offset_covariance is None:
        chol = _cholesky(noise)
        quad = (residual * _cholesky_solve(chol, residual[..., None])[..., 0]).sum(axis=1)
        surprise = -0.5 * weight * (quad - 3.0)
        return weight * -0.5 * (quad + _log_det(chol)), surprise, None, None
    P, k = offset_mean.shape
    if k == 4:
        # The state [b, c]: H = [Ā | R_z(−δ) m̂] differs per particle.
        direction = _direction(predicted)
        H = np.concatenate(
            [np.broadcast_to(observation.axes, (P, 3, 3)), direction[:, :, None]], axis=2
        )
        residual = residual - np.einsum("pij,pj->pi", H, offset_mean)
        cross = np.einsum("pij,pjk->pik", H, offset_covariance)  # H Σ [P, 3, 4]
        total = noise / weight + np.einsum("pik,pjk->pij", cross, H)
    else:
        axes = observation.axes
        residual = residual - offset_mean @ axes.T
        # Ā Σ_b and Ā Σ_b Āᵀ as one product each over the particles' flattened covariances.
        flat = offset_covariance.reshape(P, 9)
        cross = (flat @ np.kron(axes, np.eye(3)).T).reshape(P, 3, 3)
        total = noise / weight + (flat @ np.kron(axes, axes).T).reshape(P, 3, 3)
    chol = _cholesky(total)
    solved = _cholesky_solve(chol, np.concatenate([residual[..., None], cross], axis=2))
    quad = (residual * solved[..., 0]).sum(axis=1)
    log_likelihood = -0.5 * (quad + _log_det(chol))
    surprise = -0.5 * (quad - 3.0 * weight)
    if weight < 1.0:
        log_likelihood += 0.5 * (1.0 - weight) * _log_det(_cholesky(noise))
    gain_t = solved[..., 1:]  # S⁻¹ H Σ = Kᵀ
    mean = offset_mean + (gain_t * residual[:, :, None]).sum(axis=1)
    covariance = offset_covariance - (gain_t[:, :, :, None] * cross[:, :, None, :]).sum(axis=1)
    covariance = 0.5 * (covariance + covariance.transpose(0, 2, 1))
    return log_likelihood, surprise, mean, covariance


def _direction(vectors: np.ndarray) -> np.ndarray:
    """[P, 3] unit vectors along ``vectors`` [P, 3] (zero stays zero)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
