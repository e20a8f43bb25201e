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

Against a map of the field vector (``likelihood: auto`` or ``vector``) a batch is weighed by
all three components (``three_axis``): the readings are turned into the odom frame by the
odometry's yaw and each reading's attitude (the mounting and the base's roll and pitch, from
TF), and a particle predicts its map field, turned by its heading's difference from the
odometry's, with the map's 3 x 3 covariance. The horizontal components hold the heading that
‖B‖ cannot. The sensor's own offset (hard iron, or what another sensor than the map's reads
differently) is a Gaussian state per particle, integrated out of the likelihood and updated
in closed form (``hard_iron_sd_ut``, ``hard_iron_walk_ut``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import logsumexp

from .field_lookup import FieldLookup
from .motion import MotionNoise, odometry_step, sample_motion, wrap_angle
from .particles import ParticleSet, PoseEstimate, kld_size
from .proposal import BatchEvidence, draw_poses
from .settings import PARAMETER_BY_NAME, default
from .three_axis import BatchObservation, batch_observation, three_axis_update

# exp() of a mean log-likelihood below this underflows; the recovery's averages floor it here.
MIN_LOG_EVIDENCE = -700.0
# Readings waiting for odometry that covers their stamp: at most this many seconds of them.
MAX_WAIT_S = 5.0
NS_PER_S = 1_000_000_000
# The particles' states of the sensor offset's Gaussian (``three_axis``).
OFFSET_MEAN = "offset_mean"
OFFSET_COVARIANCE = "offset_covariance"
# ... and of the offset of ‖B‖ (``_norm_offset_update``).
NORM_OFFSET_MEAN = "norm_offset_mean"
NORM_OFFSET_VARIANCE = "norm_offset_variance"


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
        sensor_resetting: draw a global start's cloud (at its first batch) and the recovery's
            new particles where the map agrees with the last batch (``proposal``) rather than
            uniformly over the known map.
        recovery_alpha_slow, recovery_alpha_fast: the decay rates of the long- and short-term
            averages of the particles' likelihood; when the short falls below the long, that
            share of the particles is drawn anew over the map at the next resampling (AMCL's
            names; 0 turns the recovery off).
        likelihood: ``auto`` (the three-axis likelihood where the map holds the field vector,
            ‖B‖'s otherwise), ``norm`` or ``vector``.
        hard_iron_sd_ut: prior sd of each component of the sensor's offset in its own axes,
            estimated online per particle by the three-axis likelihood (``three_axis``);
            0: the readings have none.
        hard_iron_walk_ut: the offset's random walk [µT/√s]: how fast it may drift.
        field_offset_sd_ut, field_offset_walk_ut: the same for an offset of the reading along
            the field it reads (a gain error, a pass's calibration residue), estimated with the
            sensor offset by the three-axis likelihood; 0: none.
        norm_offset_sd_ut, norm_offset_walk_ut: the same for an offset of ‖B‖ when the
            filter weighs ‖B‖ (a pass's error, a sensor other than the map's); 0: none.
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
    sensor_resetting: bool = default("sensor_resetting")
    recovery_alpha_slow: float = default("recovery_alpha_slow")
    recovery_alpha_fast: float = default("recovery_alpha_fast")
    likelihood: str = default("likelihood")
    hard_iron_sd_ut: float = default("hard_iron_sd_ut")
    hard_iron_walk_ut: float = default("hard_iron_walk_ut")
    field_offset_sd_ut: float = default("field_offset_sd_ut")
    field_offset_walk_ut: float = default("field_offset_walk_ut")
    norm_offset_sd_ut: float = default("norm_offset_sd_ut")
    norm_offset_walk_ut: float = default("norm_offset_walk_ut")
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
    # The sensor offset's weighted mean and sd per component (µT); None without one.
    hard_iron_ut: np.ndarray | None = None
    hard_iron_sd_ut: np.ndarray | None = None


class _Reading(NamedTuple):
    """A reading placed on the odometry: stamp, field [3] (µT, sensor axes), odometry pose
    [3] and the sensor's attitude [3, 3] (None: the base's levelled axes)."""

    stamp_ns: int
    field: np.ndarray
    pose: np.ndarray
    attitude: np.ndarray | None


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
        self._waiting: deque[tuple[int, np.ndarray, np.ndarray | None]] = deque()
        self._batch: list[_Reading] = []
        self._last_update_ns: int | None = None  # the offset's random walk runs from here
        self._anchor: np.ndarray | None = None  # odometry pose the particles stand at
        self._last_field_ns: int | None = None
        self._w_slow = self._w_fast = 0.0
        self.injected = 0  # particles drawn anew by the recovery
        self._reset_pending = False  # a global start waits for its first batch (``proposal``)
        self.steps: list[Step] = []
        self.updates = 0  # every update, also those ``history`` no longer keeps
        self._history = history
        _ = self.uses_field_vector  # likelihood: vector on a map of ‖B‖ is refused here

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
        self.particles = ParticleSet(draws, self._offset_prior(c.max_particles))
        self._anchor = None
        self._reset_pending = False

    def initialize_global(self) -> None:
        """Start uniform over the map's known area, every heading (a global localization,
        or the recovery of a kidnapped robot); with ``sensor_resetting`` the first batch then
        draws the cloud anew where the map agrees with it (``proposal``)."""
        c = self.config
        poses = self._uniform_poses(c.max_particles)
        self.particles = ParticleSet(poses, self._offset_prior(c.max_particles))
        self._anchor = None
        self._reset_pending = c.sensor_resetting

    def _uniform_poses(self, count: int) -> np.ndarray:
        """``count`` poses [count, 3] uniform over the map's known cells, every heading."""
        xy = self.lookup.sample_known(self._rng, count)
        yaw = self._rng.uniform(-math.pi, math.pi, count)
        return np.column_stack([xy, yaw])

    @property
    def uses_field_vector(self) -> bool:
        """Whether the filter weighs all three components (the map holds the field vector and
        ``likelihood`` is not ``norm``)."""
        if self.config.likelihood == "norm":
            return False
        if self.config.likelihood == "vector" and not self.lookup.has_field:
            raise ValueError("likelihood: vector needs a map of the field vector (target: vector)")
        return self.lookup.has_field

    @property
    def estimates_offset(self) -> bool:
        """Whether each particle carries the sensor offset's Gaussian (``three_axis``)."""
        c = self.config
        return self.uses_field_vector and (c.hard_iron_sd_ut > 0.0 or c.field_offset_sd_ut > 0.0)

    def _offset_prior(self, count: int) -> dict[str, np.ndarray]:
        """The sensor offset's prior for ``count`` particles: zero mean, ``hard_iron_sd_ut``
        per component (nothing when the filter estimates none). A start forgets what an
        earlier one learnt: after a wrong convergence it may be wrong too."""
        if not self.uses_field_vector and self.config.norm_offset_sd_ut > 0.0:
            return {
                NORM_OFFSET_MEAN: np.zeros(count),
                NORM_OFFSET_VARIANCE: np.full(count, self.config.norm_offset_sd_ut**2),
            }
        if not self.estimates_offset:
            return {}
        c = self.config
        variances = [c.hard_iron_sd_ut**2] * 3
        if c.field_offset_sd_ut > 0.0:  # and one along the field (``three_axis``)
            variances.append(c.field_offset_sd_ut**2)
        k = len(variances)
        return {
            OFFSET_MEAN: np.zeros((count, k)),
            OFFSET_COVARIANCE: np.broadcast_to(np.diag(variances), (count, k, k)).copy(),
        }

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

    def add_field(
        self, stamp_ns: int, field_ut: np.ndarray, attitude: np.ndarray | None = None
    ) -> None:
        """A magnetometer reading [µT] in the sensor's axes (a map of ‖B‖ reads its norm, a map
        of the field vector all three components: ``three_axis``).

        Args:
            stamp_ns: the reading's stamp.
            field_ut: [3] the reading.
            attitude: [3, 3] the rotation from the sensor's axes into the base's levelled axes
                (the base's heading, z up: the mounting and the base's roll and pitch, from
                TF); None: the reading is in those axes already (a level sensor aligned with
                the base).
        """
        field = np.asarray(field_ut, dtype=np.float64).reshape(3)
        if not np.isfinite(field).all():
            self.drops["field_non_finite"] += 1
            return
        if attitude is not None:
            attitude = np.asarray(attitude, dtype=np.float64).reshape(3, 3)
            if not np.isfinite(attitude).all() or not np.allclose(
                attitude @ attitude.T, np.eye(3), atol=1e-6
            ):
                self.drops["attitude_not_a_rotation"] += 1
                return
        if self._last_field_ns is not None and stamp_ns < self._last_field_ns:
            self.drops["field_stamp_backwards"] += 1
            return
        self._last_field_ns = int(stamp_ns)
        self._waiting.append((int(stamp_ns), field, attitude))
        self._drain()

    def update_now(self) -> bool:
        """Weigh the readings gathered since the last update now, moved or not (AMCL's
        ``nomotion_update``); False when there are none or no start was given."""
        if not self._batch or self.particles is None:
            return False
        if self._anchor is None:  # a start since the batch began: its particles stand there
            self._anchor = self._batch[0].pose
        self._update(self._batch)
        self._batch = []
        return True

    @staticmethod
    def _observation(batch: list[_Reading], fields: np.ndarray) -> BatchObservation:
        """The batch in the odom frame (``three_axis.batch_observation``); a reading without
        an attitude is level in the base's axes."""
        identity = np.eye(3)
        attitudes = np.array([identity if r.attitude is None else r.attitude for r in batch])
        return batch_observation(fields, np.array([r.pose[2] for r in batch]), attitudes)

    def _vector_likelihood(
        self,
        batch: list[_Reading],
        observation: BatchObservation,
        middle: np.ndarray,
        weight: float,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Log-likelihood [P] of a batch against a map of the field vector (``three_axis``),
        its surprise [P] (``_track_evidence``), the map's mean component variance [P] at the
        particles and the batch's ‖B‖. Each particle's offset Gaussian steps forward by the
        random walk and is updated."""
        particles = self.particles
        assert particles is not None
        mean, covariance = self.lookup.field_covariance_at(particles.poses[:, :2])
        noise = float(self.lookup.noise.component_of_mean(len(batch)))
        delta = particles.poses[:, 2] - middle[2]
        offset_mean = particles.states.get(OFFSET_MEAN)
        offset_cov = particles.states.get(OFFSET_COVARIANCE)
        if offset_cov is not None and self._last_update_ns is not None:
            seconds = max(batch[len(batch) // 2].stamp_ns - self._last_update_ns, 0) / NS_PER_S
            walks = [self.config.hard_iron_walk_ut**2] * 3 + [self.config.field_offset_walk_ut**2]
            offset_cov = offset_cov + np.diag(walks[: offset_cov.shape[1]]) * seconds
        log_likelihood, surprise, new_mean, new_cov = three_axis_update(
            observation, delta, mean, covariance, noise, weight, offset_mean, offset_cov,
            self.lookup.noise.along,
        )  # fmt: skip
        if new_mean is not None and new_cov is not None:
            particles.states[OFFSET_MEAN] = new_mean
            particles.states[OFFSET_COVARIANCE] = new_cov
        variance = np.trace(covariance, axis1=1, axis2=2) / 3.0
        return log_likelihood, surprise, variance, float(np.linalg.norm(observation.mean_ut))

    def _norm_offset_update(
        self, residual: np.ndarray, noise: np.ndarray, weight: float, stamp_ns: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """‖B‖'s likelihood [P] and surprise [P] with each particle's offset of the norm (the
        pass's, or the sensor's) integrated out, and its Kalman update: the scalar case of
        ``three_axis`` (``N(z̄; μ + c, R)^w`` with ``c ~ N(m_c, s_c²)``)."""
        states = self.particles.states  # type: ignore[union-attr]
        mean, variance = states[NORM_OFFSET_MEAN], states[NORM_OFFSET_VARIANCE]
        if self._last_update_ns is not None:
            seconds = max(stamp_ns - self._last_update_ns, 0) / NS_PER_S
            variance = variance + self.config.norm_offset_walk_ut**2 * seconds
        innovation = residual - mean
        total = noise / weight + variance
        squared = innovation**2 / total
        log_likelihood = -0.5 * (squared + np.log(total)) + 0.5 * (1.0 - weight) * np.log(noise)
        surprise = -0.5 * (squared - weight)
        gain = variance / total
        states[NORM_OFFSET_MEAN] = mean + gain * innovation
        states[NORM_OFFSET_VARIANCE] = variance * (1.0 - gain)
        return log_likelihood, surprise

    def _evidence(
        self,
        count: int,
        norm: float,
        observation: BatchObservation | None,
        middle: np.ndarray,
        weight: float,
    ) -> BatchEvidence:
        """What a batch of ``count`` readings (mean ‖B‖ ``norm``; ``observation`` where the
        filter weighs the field vector) says without a heading, less the filter's offset
        estimates (before this batch updates them), for ``proposal.draw_poses``."""
        particles = self.particles
        assert particles is not None
        noise = float(self.lookup.noise.of_mean(count))
        reading = None
        states, w = particles.states, particles.weights
        if observation is not None:
            reading = observation.mean_ut
            if OFFSET_MEAN in states:
                offset, sd = self._offset_estimate()
                reading = reading - observation.axes @ offset
                noise += float(np.mean(sd**2))
        elif NORM_OFFSET_MEAN in states:
            offset = float(w @ states[NORM_OFFSET_MEAN])
            spread = states[NORM_OFFSET_MEAN] - offset
            norm -= offset
            noise += float(w @ states[NORM_OFFSET_VARIANCE] + w @ spread**2)
        return BatchEvidence(norm, reading, noise, weight, float(middle[2]))

    def _offset_estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """The sensor offset over the weighted particles: mean [3] and sd [3] (µT), the
        mixture's (the particles' own covariances and their means' spread)."""
        particles = self.particles
        assert particles is not None
        w = particles.weights
        means = particles.states[OFFSET_MEAN][:, :3]
        mean = w @ means
        spread = means - mean
        covariances = particles.states[OFFSET_COVARIANCE][:, :3, :3]
        variance = w @ np.diagonal(covariances, axis1=1, axis2=2)
        variance = variance + w @ spread**2
        return mean, np.sqrt(variance)

    # ------------------------------------------------------------------ recovery
    def _track_evidence(self, log_evidence: float) -> None:
        """The short- and long-term averages of the particles' mean likelihood (augmented MCL,
        Thrun, Burgard & Fox 2005, table 8.3; AMCL's ``recovery_alpha_slow/fast``).

        The likelihood each particle brings here is its surprise: the batch's log-likelihood
        less what the particle's own predictive expects it to be, ``−½ w (r² / s² − 1)`` for
        ‖B‖ (``−½ (rᵀ S⁻¹ r − 3 w)`` for the three axes). A particle in a cell the map does
        not know predicts with the prior's wide variance and is not surprised by any
        plausible reading, so walking into a room the map never saw does not look like a
        kidnapping (the raw likelihood falls there by the width of the prior alone, and drew
        particles over the map each time); a particle sure of a wrong place is surprised.
        """
        c = self.config
        if c.recovery_alpha_slow <= 0.0 or c.recovery_alpha_fast <= 0.0:
            return
        w = math.exp(max(log_evidence, MIN_LOG_EVIDENCE))
        self._w_slow += c.recovery_alpha_slow * (w - self._w_slow) if self._w_slow else w
        self._w_fast += c.recovery_alpha_fast * (w - self._w_fast) if self._w_fast else w

    def _inject_random_particles(self, evidence: BatchEvidence | None = None) -> None:
        """After a resampling: replace each particle with one drawn over the known map with
        probability ``1 − w_fast / w_slow``: the share by which the particles explain the
        readings worse now than they used to (a lost or kidnapped robot). Drawn uniformly, or
        with ``evidence`` (``sensor_resetting``) where the map agrees with the last batch."""
        if not (self._w_slow > 0.0 and self._w_fast > 0.0) or self.particles is None:
            return
        share = max(0.0, 1.0 - self._w_fast / self._w_slow)
        if share <= 0.0:
            return
        replace = self._rng.uniform(size=self.particles.size) < share
        count = int(replace.sum())
        if count:
            if evidence is not None:
                drawn, _ = draw_poses(self.lookup, evidence, self._rng, count)
                self.particles.poses[replace] = drawn
            else:
                self.particles.poses[replace] = self._uniform_poses(count)
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
            stamp, field, attitude = self._waiting.popleft()
            pose = self._odometry_at(stamp)
            if pose is None:
                self.drops["before_odometry"] += 1
                continue
            self._add_to_batch(_Reading(stamp, field, pose, attitude))
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

    def _add_to_batch(self, reading: _Reading) -> None:
        self._batch.append(reading)
        if self._anchor is None:
            self._anchor = self._batch[0].pose
        start, pose = self._batch[0].pose, reading.pose
        if math.hypot(pose[0] - start[0], pose[1] - start[1]) >= self.config.batch_distance_m:
            self._update(self._batch)
            self._batch = []

    def _update(self, batch: list[_Reading]) -> None:
        if self.particles is None:  # no start given: nothing to weigh yet
            self.drops["not_initialized"] += len(batch)
            return
        c = self.config
        stamp, _, middle, _ = batch[len(batch) // 2]
        fields = np.array([r.field for r in batch])
        assert self._anchor is not None
        step = odometry_step(self._anchor, middle)
        self.particles.poses = sample_motion(self.particles.poses, step, c.motion, self._rng)
        self._anchor = middle
        weight = 1.0
        if c.temper_lengthscales > 0.0:
            span = c.temper_lengthscales * self.lookup.lengthscale_m
            weight = min(1.0, c.batch_distance_m / span)
        observation = self._observation(batch, fields) if self.uses_field_vector else None
        observed = float(np.linalg.norm(fields, axis=1).mean())
        evidence = None
        if c.sensor_resetting:
            evidence = self._evidence(len(batch), observed, observation, middle, weight)
        log_proposal = None
        if self._reset_pending and evidence is not None:
            # A global start's cloud drawn where the map agrees with this batch, then weighed
            # by the batch's whole likelihood over the proposal's density.
            self.particles.poses, log_proposal = draw_poses(
                self.lookup, evidence, self._rng, self.particles.size
            )
            self._reset_pending = False
        if observation is not None:
            log_likelihood, surprise, variance, observed = self._vector_likelihood(
                batch, observation, middle, weight
            )
        else:
            mean, variance = self.lookup.at(self.particles.poses[:, :2])
            total = variance + self.lookup.noise.of_mean(len(batch))
            states = self.particles.states
            if NORM_OFFSET_MEAN in states:
                log_likelihood, surprise = self._norm_offset_update(
                    observed - mean, total, weight, batch[len(batch) // 2].stamp_ns
                )
            else:
                squared = (observed - mean) ** 2 / total
                log_likelihood = -0.5 * (squared + np.log(total)) * weight
                surprise = -0.5 * (squared - 1.0) * weight
        self._last_update_ns = int(stamp)
        weights = self.particles.weights
        predicted_sd = float(weights @ np.sqrt(variance))
        self._track_evidence(float(logsumexp(self.particles.log_weights + surprise)))
        if log_proposal is not None:
            log_likelihood = log_likelihood - log_proposal
        self.particles.weigh(log_likelihood)
        estimate = self.particles.estimate()
        offset = offset_sd = None
        if OFFSET_MEAN in self.particles.states:
            offset, offset_sd = self._offset_estimate()
        if estimate.effective_size < c.resample_ess * self.particles.size:
            size = kld_size(
                self.particles.poses, bin_m=c.kld_bin_m, bin_rad=c.kld_bin_rad,
                error=c.kld_error, quantile=c.kld_quantile, minimum=c.min_particles,
                maximum=c.max_particles,
            )  # fmt: skip
            self.particles.resample(size, self._rng)
            self._inject_random_particles(evidence)
        converged = estimate.position_sd_m < c.converged_sd_m
        last_stamp = batch[-1].stamp_ns
        self.steps.append(
            Step(stamp, middle.copy(), observed, len(batch), estimate, converged, predicted_sd,
                 last_stamp, offset, offset_sd)
        )  # fmt: skip
        self.updates += 1
        if self._history is not None and len(self.steps) > self._history:
            del self.steps[: len(self.steps) - self._history]
