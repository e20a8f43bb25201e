"""A weighted particle set over planar poses: weighing, resampling, KLD size, estimate.

As AMCL (Fox 2003, "Adapting the sample size in particle filters through KLD-sampling"):
the set is resampled only when its effective size falls below a share of its size, and the
new size is the KLD bound for the histogram bins the particles occupy, so a converged filter
runs on few particles and a lost one on many.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm

from .motion import wrap_angle

# The 95 % quantile of χ² with 2 degrees of freedom: the 95 % ellipse of a planar position.
CHI2_2D_95 = 5.991


class PoseEstimate(NamedTuple):
    """The filter's pose: weighted mean and covariance of the particles.

    Attributes:
        mean: (x, y, yaw) [m, m, rad]; yaw is the circular mean.
        covariance: [3, 3] over (x, y, yaw) (yaw deviations wrapped about the mean).
        effective_size: 1 / Σ w² of the normalised weights.
        particles: the set's size.
    """

    mean: np.ndarray
    covariance: np.ndarray
    effective_size: float
    particles: int

    def covers(self, xy: np.ndarray) -> bool:
        """Whether the point ``xy`` (x, y) lies inside the estimate's 95 % position ellipse."""
        offset = np.asarray(xy, dtype=np.float64)[:2] - self.mean[:2]
        covariance = self.covariance[:2, :2] + 1e-12 * np.eye(2)  # one particle: a point
        return float(offset @ np.linalg.solve(covariance, offset)) <= CHI2_2D_95

    @property
    def position_sd_m(self) -> float:
        """The sd along the position covariance's major axis [m]."""
        return float(math.sqrt(max(np.linalg.eigvalsh(self.covariance[:2, :2]).max(), 0.0)))


class ParticleSet:
    """Particles ``poses`` [P, 3] (x, y, yaw) with log weights [P] (normalised).

    ``states`` holds what each particle carries besides its pose (arrays [P, ...], e.g. the
    Gaussian of a sensor offset a Rao-Blackwellised filter keeps per particle); resampling
    copies them with the poses.
    """

    def __init__(self, poses: np.ndarray, states: dict[str, np.ndarray] | None = None) -> None:
        poses = np.asarray(poses, dtype=np.float64)
        if poses.ndim != 2 or poses.shape[1] != 3 or poses.shape[0] < 1:
            raise ValueError(f"poses must be [P, 3] with P >= 1; got {poses.shape}")
        self.poses = poses.copy()
        self.poses[:, 2] = wrap_angle(self.poses[:, 2])
        self.log_weights = np.full(poses.shape[0], -math.log(poses.shape[0]))
        self.states: dict[str, np.ndarray] = {}
        for name, value in (states or {}).items():
            value = np.array(value, dtype=np.float64)
            if value.shape[:1] != (poses.shape[0],):
                raise ValueError(f"state {name!r} needs one row per particle; got {value.shape}")
            self.states[name] = value

    @property
    def size(self) -> int:
        return int(self.poses.shape[0])

    @property
    def weights(self) -> np.ndarray:
        return np.exp(self.log_weights)

    def weigh(self, log_likelihood: np.ndarray) -> float:
        """Multiply the weights by ``exp(log_likelihood)`` [P] and normalise; returns the
        log of the mean likelihood (how well the set explained the observation)."""
        total = self.log_weights + log_likelihood
        evidence = float(logsumexp(total))
        if not math.isfinite(evidence):
            raise ValueError("every particle got zero likelihood")
        self.log_weights = total - evidence
        return evidence

    def effective_size(self) -> float:
        return float(1.0 / np.exp(logsumexp(2.0 * self.log_weights)))

    def resample(self, size: int, rng: np.random.Generator) -> None:
        """Systematic resampling (one uniform draw: the lowest variance of the usual
        schemes) to ``size`` particles of equal weight."""
        cumulative = np.cumsum(self.weights)
        cumulative[-1] = 1.0
        positions = (rng.uniform() + np.arange(size)) / size
        index = np.minimum(np.searchsorted(cumulative, positions, side="right"), self.size - 1)
        self.poses = self.poses[index]
        self.states = {name: value[index] for name, value in self.states.items()}
        self.log_weights = np.full(size, -math.log(size))

    def estimate(self) -> PoseEstimate:
        w = self.weights
        x, y = w @ self.poses[:, 0], w @ self.poses[:, 1]
        yaw = math.atan2(w @ np.sin(self.poses[:, 2]), w @ np.cos(self.poses[:, 2]))
        mean = np.array([x, y, yaw])
        d = self.poses - mean
        d[:, 2] = wrap_angle(d[:, 2])
        covariance = (d * w[:, None]).T @ d
        return PoseEstimate(mean, covariance, self.effective_size(), self.size)


def kld_size(
    poses: np.ndarray,
    *,
    bin_m: float,
    bin_rad: float,
    error: float,
    quantile: float,
    minimum: int,
    maximum: int,
) -> int:
    """Fox's KLD bound: particles enough that, with probability ``quantile``, the KL
    divergence between the set and the true posterior stays below ``error``, for a posterior
    over the ``k`` histogram bins (``bin_m`` × ``bin_m`` × ``bin_rad``) the set occupies:
    ``n = (k − 1) / 2ε · (1 − 2/9(k−1) + √(2/9(k−1)) z)³``, within [minimum, maximum]."""
    keys = np.column_stack([
        np.floor(poses[:, 0] / bin_m), np.floor(poses[:, 1] / bin_m),
        np.floor(poses[:, 2] / bin_rad),
    ]).astype(np.int64)  # fmt: skip
    k = int(np.unique(keys, axis=0).shape[0])
    if k <= 1:
        return minimum
    z = float(norm.ppf(quantile))
    a = 2.0 / (9.0 * (k - 1))
    n = (k - 1) / (2.0 * error) * (1.0 - a + math.sqrt(a) * z) ** 3
    return int(min(max(math.ceil(n), minimum), maximum))
