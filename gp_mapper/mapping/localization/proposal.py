"""Where a batch of readings could have been taken: poses drawn where the map agrees with it.

Sensor resetting (Lenser & Veloso 2000), the dual proposal of Mixture-MCL (Thrun, Fox, Burgard
& Dellaert 2001): a global start or the recovery's new particles, drawn uniformly over a
floor, rarely land where the readings fit, so the cloud is lost before it is weighed. Here
every known cell of the map is weighed at once on what the batch says without a heading, and
poses are drawn in proportion:

- a ‖B‖ map: the batch's mean ‖B‖ (less the filter's offset of ‖B‖, if it has one) against
  the cell's latent mean, with its latent variance and the noise of a batch mean; the heading
  uniform.
- a map of the field vector: the batch's mean reading in the odom frame, less the filter's
  sensor-offset estimate turned into that frame, keeps its vertical component and its
  horizontal magnitude under any turn about z; each against the cell's. The heading is then
  the turn of the reading's horizontal direction onto the map's (``three_axis``: the reading
  is ``R_z(−δ) m``, δ the particle's heading less the odometry's), spread by the noise across
  that direction.

Tempered as the filter's likelihood (``weight``), a point uniform within the drawn cell. The
log-density of each draw (up to a constant) comes back too, so a start drawn here can be
weighed by the batch's full likelihood over it (importance sampling).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .field_lookup import FieldLookup
from .motion import wrap_angle

# A horizontal field this weak [µT] gives no heading: its draws take a uniform one.
MIN_HORIZONTAL_UT = 1e-6


class BatchEvidence(NamedTuple):
    """What a batch says for a proposal.

    Attributes:
        norm_ut: the batch's mean ‖B‖, less the filter's offset estimate of ‖B‖ (µT).
        reading_ut: [3] the mean reading in the odom frame less the sensor offset's estimate
            turned into it (µT); None when the filter weighs ‖B‖.
        noise: variance of the batch mean's noise, the offset estimate's uncertainty included
            (µT², per component).
        weight: the filter's tempering of the batch (1: a whole observation).
        odometry_yaw: the odometry's yaw at the batch's middle reading (rad).
    """

    norm_ut: float
    reading_ut: np.ndarray | None
    noise: float
    weight: float
    odometry_yaw: float


def draw_poses(
    lookup: FieldLookup, evidence: BatchEvidence, rng: np.random.Generator, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` poses [count, 3] drawn where the map agrees with the batch, and the
    log-density of each [count] up to a constant (module docstring)."""
    centres, norm_mean, norm_var, field = lookup.known_cell_layers()
    if evidence.reading_ut is None or field is None:
        log_p = _norm_log_likelihood(evidence, norm_mean, norm_var)
        heading = None
    else:
        log_p, heading = _vector_log_likelihood(evidence, field)
    log_p = evidence.weight * log_p
    p = np.exp(log_p - log_p.max())
    cells = rng.choice(log_p.size, size=count, p=p / p.sum())
    res = lookup.grid.resolution_m
    xy = centres[cells] + (rng.uniform(size=(count, 2)) - 0.5) * res
    log_q = log_p[cells]
    if heading is None:
        yaw = rng.uniform(-math.pi, math.pi, count)
    else:
        delta, sd = heading[0][cells], heading[1][cells]
        flat = ~np.isfinite(sd)  # no horizontal field: any heading
        noise = rng.standard_normal(count)
        yaw = evidence.odometry_yaw + delta + np.where(flat, 0.0, sd * noise)
        yaw = np.where(flat, rng.uniform(-math.pi, math.pi, count), yaw)
        safe = np.where(flat, 1.0, sd)
        log_q = log_q + np.where(flat, -math.log(2.0 * math.pi),
                                 -0.5 * noise**2 - np.log(safe))  # fmt: skip
    return np.column_stack([xy, wrap_angle(yaw)]), log_q


def _norm_log_likelihood(
    evidence: BatchEvidence, mean: np.ndarray, variance: np.ndarray
) -> np.ndarray:
    total = variance + evidence.noise
    return -0.5 * ((evidence.norm_ut - mean) ** 2 / total + np.log(total))


def _vector_log_likelihood(
    evidence: BatchEvidence, field: np.ndarray
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Log-likelihood [K] of the reading's heading-free parts at each cell ([K, 9]: mean, then
    the covariance's upper entries xx, xy, xz, yy, yz, zz), and the heading offset δ [K] with
    its sd [K] (inf where the map's horizontal field is too weak to give one)."""
    c = evidence.reading_ut
    assert c is not None
    m = field[:, :3]
    cxx, cxy, cyy, czz = field[:, 3], field[:, 4], field[:, 6], field[:, 8]
    noise = evidence.noise
    var_z = czz + noise
    horizontal = np.hypot(m[:, 0], m[:, 1])
    flat = horizontal < MIN_HORIZONTAL_UT
    safe = np.where(flat, 1.0, horizontal)
    ux, uy = np.where(flat, 1.0, m[:, 0] / safe), np.where(flat, 0.0, m[:, 1] / safe)
    # The map's variance along its horizontal direction, and across it.
    var_along = ux * ux * cxx + 2.0 * ux * uy * cxy + uy * uy * cyy + noise
    var_across = uy * uy * cxx - 2.0 * ux * uy * cxy + ux * ux * cyy + noise
    r_z = c[2] - m[:, 2]
    r_h = math.hypot(c[0], c[1]) - horizontal
    log_l = -0.5 * (r_z**2 / var_z + np.log(var_z) + r_h**2 / var_along + np.log(var_along))
    delta = np.arctan2(m[:, 1], m[:, 0]) - math.atan2(c[1], c[0])
    # A tempered likelihood is as wide as its noise over the weight.
    sd = np.sqrt(var_across / max(evidence.weight, 1e-12)) / safe
    return log_l, (delta, np.where(flat, np.inf, sd))
