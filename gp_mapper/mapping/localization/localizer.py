"""Magnetic Monte Carlo localization: odometry and magnetometer readings in, poses out.

The filter of Solin, Särkkä, Kannala & Rahtu (2016, "Terrain navigation in the magnetic
landscape: particle filtering for indoor positioning") on a GP map, with AMCL's motion model,
KLD-adaptive resampling and conventions (Fox 2003; Nav2 ``amcl``). ROS-free: the node and
``gp-mapper localize`` drive the same object, with readings and odometry in stamp order.

An observation is the mean ‖B‖ of the readings taken over ``batch_distance_m`` of travel
(20 cm: 50 readings at 50 Hz and 0.2 m/s), placed at the odometry pose of its middle reading.
Its likelihood at a particle is ``N(z̄; μ(x), σ²_map(x) + σ²/n + σ²_pass)``: the map's own
uncertainty, the white noise averaged over the batch, and the pass error, which one pass's
readings share and so do not average (``field_lookup.MapNoise``). Consecutive batches are not
independent either: the map's error and the pass error are correlated over a lengthscale of
path, so each batch's log-likelihood is weighted by ``batch_distance / ℓ`` (at most 1), one
lengthscale of travel counting as one observation. Without that, a filter on a 20-cm batch
and a 0.5-m lengthscale would trust each stretch two and a half times over and collapse onto
one wrong hypothesis.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .field_lookup import FieldLookup
from .motion import MotionNoise, odometry_step, sample_motion, wrap_angle
from .particles import ParticleSet, PoseEstimate, kld_size
from .settings import PARAMETER_BY_NAME, default

# exp() of a mean log-likelihood below this underflows; the recovery's averages floor it here.
MIN_LOG_EVIDENCE = -700.0
# Readings waiting for odometry that covers their stamp: at most this many seconds of them.
MAX_WAIT_S = 5.0
NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class LocalizerConfig:
    """The filter's settings (Nav2 ``amcl`` names, and its defaults where this filter's use
    does not call for others); defaults and ranges from ``settings.LOCALIZER_PARAMETERS``.

    Attributes:
        min_particles, max_particles: the KLD-adaptive set's bounds (a start uses
            ``max_particles``; the KLD bound brings a converged set down to a few hundred).
        batch_distance_m: travel whose readings make one observation (module docstring).
        alpha1 ... alpha4: the odometry noise (``motion.MotionNoise``). 0.05, not Nav2's
            0.2: a magnetic reading holds far less than a laser scan, so a filter that
            spreads its particles as widely between updates loses them. Chosen on a
            validation run (Aalto run 4 on a map of runs 1-3, 10 odometry seeds, 0.02 /
            0.05 / 0.1: the most seeds converged, and every 95 % ellipse held the truth);
            set them from your odometry's errors.
        kld_error, kld_quantile: AMCL's ``pf_err`` and ``pf_z``.
        kld_bin_m, kld_bin_rad: the KLD histogram's bins (AMCL: 0.5 m, 10°).
        resample_ess: resample when the effective size falls below this share of the set.
        initial_sd_m, initial_sd_rad: spread of a start from a given pose (AMCL's
            ``initial_cov`` 0.25 m², 0.068 rad²).
        converged_sd_m: the estimate is converged when the position sd along its major axis
            is below this.
        temper_lengthscales: weigh each batch by ``batch_distance / (this · ℓ)``, at most 1
            (module docstring); 0 = no weighing.
        recovery_alpha_slow, recovery_alpha_fast: the decay rates of the long- and short-term
            averages of the particles' likelihood; when the short falls below the long, that
            share of the particles is drawn anew over the map at the next resampling (AMCL's
            names; 0 turns the recovery off).
        seed: the random stream; the same inputs and seed give the same poses.
    """

    min_particles: int = default("min_particles")
    max_particles: int = default("max_particles")
    batch_distance_m: float = default("batch_distance_m")
    alpha1: float = default("alpha1")
    alpha2: float = default("alpha2")
    alpha3: float = default("alpha3")
    alpha4: float = default("alpha4")
    kld_error: float = default("kld_error")
    kld_quantile: float = default("kld_quantile")
    kld_bin_m: float = default("kld_bin_m")
    kld_bin_rad: float = default("kld_bin_rad")
    resample_ess: float = default("resample_ess")
    initial_sd_m: float = default("initial_sd_m")
    initial_sd_rad: float = default("initial_sd_rad")
    converged_sd_m: float = default("converged_sd_m")
    temper_lengthscales: float = default("temper_lengthscales")
    recovery_alpha_slow: float = default("recovery_alpha_slow")
    recovery_alpha_fast: float = default("recovery_alpha_fast")
    seed: int = default("seed")

    @property
    def motion(self) -> MotionNoise:
        return MotionNoise(self.alpha1, self.alpha2, self.alpha3, self.alpha4)

    def __post_init__(self) -> None:
        # Each value against its row of the table (type, range), then the pair.
        for item in dataclasses.fields(self):
            object.__setattr__(
                self, item.name, PARAMETER_BY_NAME[item.name].check(getattr(self, item.name))
            )
        if self.min_particles > self.max_particles:
            raise ValueError(
                f"need min_particles <= max_particles; got {self.min_particles}, "
                f"{self.max_particles}"
            )

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> LocalizerConfig:
        """From a mapping that may hold other settings too (the node's parameters)."""
        names = {item.name for item in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


class Step(NamedTuple):
    """One filter update: the observation and the estimate after it."""

    stamp_ns: int  # the batch's middle reading
    odometry: np.ndarray  # (x, y, yaw) odometry pose there (odom frame)
    observed_ut: float  # ‖B‖ of the batch's mean
    readings: int
    estimate: PoseEstimate
    converged: bool
    predicted_sd_ut: float  # the map's mean predictive sd at the particles (weighted)
    last_stamp_ns: int  # the batch's last reading: what AMCL post-dates map -> odom from


class Localizer:
    """The filter, fed readings and odometry in stamp order.

    Args:
        lookup: the map.
        config: the settings.
        history: how many of the latest updates ``steps`` keeps (None: all, as an offline run
            wants; a node running for hours keeps one and counts ``updates``).
    """

    def __init__(
        self,
        lookup: FieldLookup,
        config: LocalizerConfig | None = None,
        history: int | None = None,
    ) -> None:
        self.lookup = lookup
        self.config = config or LocalizerConfig()
        self._rng = np.random.default_rng(self.config.seed)
        self.particles: ParticleSet | None = None
        self.drops: Counter[str] = Counter()
        self._odometry: deque[tuple[int, np.ndarray]] = deque(maxlen=2)
        self._waiting: deque[tuple[int, np.ndarray]] = deque()
        self._batch: list[tuple[int, np.ndarray, np.ndarray]] = []
        self._anchor: np.ndarray | None = None  # odometry pose the particles stand at
        self._last_field_ns: int | None = None
        self._w_slow = self._w_fast = 0.0
        self.injected = 0  # particles drawn anew by the recovery
        self.steps: list[Step] = []
        self.updates = 0  # every update, also those ``history`` no longer keeps
        self._history = history

    # ------------------------------------------------------------------ starts
    def initialize_pose(self, mean: np.ndarray, covariance: np.ndarray | None = None) -> None:
        """Start around a pose (x, y, yaw) in the map frame, as AMCL's ``initialpose``."""
        c = self.config
        if covariance is None:
            covariance = np.diag([c.initial_sd_m**2, c.initial_sd_m**2, c.initial_sd_rad**2])
        mean = np.asarray(mean, dtype=np.float64)
        if mean.shape != (3,) or not np.isfinite(mean).all():
            raise ValueError(f"an initial pose is finite (x, y, yaw); got {mean}")
        draws = self._rng.multivariate_normal(mean, covariance, size=c.max_particles)
        self.particles = ParticleSet(draws)
        self._anchor = None

    def initialize_global(self) -> None:
        """Start uniform over the map's known area, every heading (a global localization,
        or the recovery of a kidnapped robot)."""
        c = self.config
        xy = self.lookup.sample_known(self._rng, c.max_particles)
        yaw = self._rng.uniform(-math.pi, math.pi, c.max_particles)
        self.particles = ParticleSet(np.column_stack([xy, yaw]))
        self._anchor = None

    # ------------------------------------------------------------------ inputs
    def add_odometry(self, stamp_ns: int, pose: np.ndarray) -> None:
        """An odometry pose (x, y, yaw) of the base in the odom frame."""
        pose = np.asarray(pose, dtype=np.float64)
        if pose.shape != (3,) or not np.isfinite(pose).all():
            self.drops["odometry_non_finite"] += 1
            return
        if self._odometry and stamp_ns <= self._odometry[-1][0]:
            self.drops["odometry_stamp_not_increasing"] += 1
            return
        self._odometry.append((int(stamp_ns), pose))
        self._drain()

    def add_field(self, stamp_ns: int, field_ut: np.ndarray) -> None:
        """A magnetometer reading [µT] in the sensor frame (a map of ‖B‖ reads its norm, a map
        of the field vector all three components: ``_field_likelihood``)."""
        field = np.asarray(field_ut, dtype=np.float64).reshape(3)
        if not np.isfinite(field).all():
            self.drops["field_non_finite"] += 1
            return
        if self._last_field_ns is not None and stamp_ns < self._last_field_ns:
            self.drops["field_stamp_backwards"] += 1
            return
        self._last_field_ns = int(stamp_ns)
        self._waiting.append((int(stamp_ns), field))
        self._drain()

    def update_now(self) -> bool:
        """Weigh the readings gathered since the last update now, moved or not (AMCL's
        ``nomotion_update``); False when there are none or no start was given."""
        if not self._batch or self.particles is None:
            return False
        if self._anchor is None:  # a start since the batch began: its particles stand there
            self._anchor = self._batch[0][2]
        self._update(self._batch)
        self._batch = []
        return True

    def _field_likelihood(
        self, fields: np.ndarray, yaws: np.ndarray, middle: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Log-likelihood [P] of a batch of sensor-frame readings [n, 3] against a map of the
        field vector, the map's variance [P] and the batch's ‖B‖.

        The readings are turned into the odom frame by the odometry's yaw at each (so a turn
        within the batch does not smear its mean); a particle whose yaw differs from the
        odometry's by δ predicts, in that frame, its map field turned by −δ. The horizontal
        components thus weigh the heading as well as the place; the vertical one the place.
        The horizontal variance is the mean of the map's x and y ones, so it does not turn
        with δ. A level sensor whose frame is the base's (yaw only) is assumed.
        """
        c, s = np.cos(yaws), np.sin(yaws)
        odom = np.column_stack([
            c * fields[:, 0] - s * fields[:, 1], s * fields[:, 0] + c * fields[:, 1],
            fields[:, 2],
        ]).mean(axis=0)  # fmt: skip
        poses = self.particles.poses  # type: ignore[union-attr]
        mean, variance = self.lookup.field_at(poses[:, :2])
        delta = poses[:, 2] - middle[2]
        cd, sd = np.cos(delta), np.sin(delta)
        predicted_x = cd * mean[:, 0] + sd * mean[:, 1]
        predicted_y = -sd * mean[:, 0] + cd * mean[:, 1]
        noise = self.lookup.noise.of_mean(fields.shape[0])
        horizontal = 0.5 * (variance[:, 0] + variance[:, 1]) + noise
        vertical = variance[:, 2] + noise
        log_likelihood = -0.5 * (
            ((odom[0] - predicted_x) ** 2 + (odom[1] - predicted_y) ** 2) / horizontal
            + (odom[2] - mean[:, 2]) ** 2 / vertical
            + 2.0 * np.log(horizontal)
            + np.log(vertical)
        )
        return log_likelihood, variance.mean(axis=1), float(np.linalg.norm(odom))

    # ------------------------------------------------------------------ recovery
    def _track_evidence(self, log_evidence: float) -> None:
        """The short- and long-term averages of the particles' mean likelihood (augmented MCL,
        Thrun, Burgard & Fox 2005, table 8.3; AMCL's ``recovery_alpha_slow/fast``)."""
        c = self.config
        if c.recovery_alpha_slow <= 0.0 or c.recovery_alpha_fast <= 0.0:
            return
        w = math.exp(max(log_evidence, MIN_LOG_EVIDENCE))
        self._w_slow += c.recovery_alpha_slow * (w - self._w_slow) if self._w_slow else w
        self._w_fast += c.recovery_alpha_fast * (w - self._w_fast) if self._w_fast else w

    def _inject_random_particles(self) -> None:
        """After a resampling: replace each particle with one drawn over the known map with
        probability ``1 − w_fast / w_slow``: the share by which the particles explain the
        readings worse now than they used to (a lost or kidnapped robot)."""
        if not (self._w_slow > 0.0 and self._w_fast > 0.0) or self.particles is None:
            return
        share = max(0.0, 1.0 - self._w_fast / self._w_slow)
        if share <= 0.0:
            return
        replace = self._rng.uniform(size=self.particles.size) < share
        count = int(replace.sum())
        if count:
            xy = self.lookup.sample_known(self._rng, count)
            yaw = self._rng.uniform(-math.pi, math.pi, count)
            self.particles.poses[replace] = np.column_stack([xy, yaw])
            self.injected += count
        self._w_slow = self._w_fast = 0.0  # as AMCL: start the averages again

    # ------------------------------------------------------------------ the filter
    def _drain(self) -> None:
        """Place every waiting reading that odometry now covers; drop those it never will."""
        wait_ns = MAX_WAIT_S * NS_PER_S
        if not self._odometry:
            while self._waiting and self._waiting[-1][0] - self._waiting[0][0] > wait_ns:
                self._waiting.popleft()
                self.drops["no_odometry"] += 1
            return
        newest_ns = self._odometry[-1][0]
        while self._waiting and self._waiting[0][0] <= newest_ns:
            stamp, field = self._waiting.popleft()
            pose = self._odometry_at(stamp)
            if pose is None:
                self.drops["before_odometry"] += 1
                continue
            self._add_to_batch(stamp, field, pose)
        while self._waiting and self._waiting[-1][0] - newest_ns > wait_ns:
            self._waiting.popleft()
            self.drops["odometry_late"] += 1

    def _odometry_at(self, stamp_ns: int) -> np.ndarray | None:
        """The odometry pose at a stamp, interpolated between the last two odometry poses."""
        if len(self._odometry) == 1:
            t, pose = self._odometry[0]
            return pose if stamp_ns == t else None
        (t0, p0), (t1, p1) = self._odometry
        if stamp_ns < t0:
            return None
        s = (stamp_ns - t0) / (t1 - t0)
        out = p0 + s * (p1 - p0)
        out[2] = p0[2] + s * float(wrap_angle(p1[2] - p0[2]))
        return out

    def _add_to_batch(self, stamp_ns: int, field: np.ndarray, pose: np.ndarray) -> None:
        self._batch.append((stamp_ns, field, pose))
        if self._anchor is None:
            self._anchor = self._batch[0][2]
        start = self._batch[0][2]
        if math.hypot(pose[0] - start[0], pose[1] - start[1]) >= self.config.batch_distance_m:
            self._update(self._batch)
            self._batch = []

    def _update(self, batch: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
        if self.particles is None:  # no start given: nothing to weigh yet
            self.drops["not_initialized"] += len(batch)
            return
        c = self.config
        stamp, _, middle = batch[len(batch) // 2]
        fields = np.array([field for _, field, _ in batch])
        assert self._anchor is not None
        step = odometry_step(self._anchor, middle)
        self.particles.poses = sample_motion(self.particles.poses, step, c.motion, self._rng)
        self._anchor = middle
        if self.lookup.has_field:
            yaws = np.array([pose[2] for _, _, pose in batch])
            log_likelihood, variance, observed = self._field_likelihood(fields, yaws, middle)
        else:
            observed = float(np.linalg.norm(fields, axis=1).mean())
            mean, variance = self.lookup.at(self.particles.poses[:, :2])
            total = variance + self.lookup.noise.of_mean(len(batch))
            log_likelihood = -0.5 * ((observed - mean) ** 2 / total + np.log(total))
        if c.temper_lengthscales > 0.0:
            span = c.temper_lengthscales * self.lookup.lengthscale_m
            log_likelihood *= min(1.0, c.batch_distance_m / span)
        weights = self.particles.weights
        predicted_sd = float(weights @ np.sqrt(variance))
        evidence = self.particles.weigh(log_likelihood)
        self._track_evidence(evidence)
        estimate = self.particles.estimate()
        if estimate.effective_size < c.resample_ess * self.particles.size:
            size = kld_size(
                self.particles.poses, bin_m=c.kld_bin_m, bin_rad=c.kld_bin_rad,
                error=c.kld_error, quantile=c.kld_quantile, minimum=c.min_particles,
                maximum=c.max_particles,
            )  # fmt: skip
            self.particles.resample(size, self._rng)
            self._inject_random_particles()
        converged = estimate.position_sd_m < c.converged_sd_m
        last_stamp = batch[-1][0]
        self.steps.append(
            Step(stamp, middle.copy(), observed, len(batch), estimate, converged, predicted_sd,
                 last_stamp)
        )  # fmt: skip
        self.updates += 1
        if self._history is not None and len(self.steps) > self._history:
            del self.steps[: len(self.steps) - self._history]
