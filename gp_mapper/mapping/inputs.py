"""The input side of mapping: readings and poses in, samples paired, windows closed, drops counted.

The same stage feeds the streaming pipeline (one window at a time) and a batch fit (every
sample of a bag at once), so both see the same pairing, thinning and drop counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from gp_mapper.engine.auxiliary import auxiliary_columns
from gp_mapper.mapping.config import MapperConfig
from gp_mapper.mapping.pairing import Pairer
from gp_mapper.mapping.pose_buffer import NS_PER_S, PoseBuffer
from gp_mapper.mapping.records import (
    DropCounts,
    FieldReading,
    Pose,
    Sample,
    StaticTransform,
    Transform,
    Window,
)
from gp_mapper.mapping.trajectory import Trajectory
from gp_mapper.mapping.transforms import TransformBuffer
from gp_mapper.mapping.windowing import VECTOR_TARGET, Windower
from gp_mapper.mapping.worker import WindowJob

# pose_source: poses from the TF tree (the other value, "topic", reads a pose topic).
TF_POSE_SOURCE = "tf"

# What an input stage takes: a reading, a pose of the sensor, or a TF edge (dynamic or static).
InputRecord = FieldReading | Pose | Transform | StaticTransform


def seconds_to_ns(seconds: float) -> int:
    return round(seconds * NS_PER_S)


class InputStage:
    """Pairing, windowing, the trajectory and the drop counts, under one lock.

    Thread-safe: the node's callbacks add inputs while the worker and ``diagnostics`` read
    counts. Windows are stamped with the current generation (a reset or a load starts a new
    one, so windows of the old map are recognised and dropped).

    Args:
        config: the pipeline's parameters (pairing, windowing, target, input_dims).
    """

    def __init__(self, config: MapperConfig) -> None:
        self.lock = threading.Lock()
        self.drops = DropCounts()
        poses: PoseBuffer | TransformBuffer
        if config.pose_source == TF_POSE_SOURCE:
            poses = TransformBuffer(seconds_to_ns(config.max_transform_gap))
            wait_s = config.transform_timeout
        else:
            poses = PoseBuffer(
                config.pose_buffer_size, seconds_to_ns(config.max_pose_gap), config.max_pose_speed
            )
            wait_s = config.pose_wait
        self._pairer = Pairer(
            poses,
            self.drops,
            pose_wait_ns=seconds_to_ns(wait_s),
            expected_frame=config.expected_frame,
            field_range_ut=(config.field_min, config.field_max),
            mag_bias_ut=None if config.mag_bias is None else np.asarray(config.mag_bias),
            map_frame=config.map_frame,
            sensor_frame=config.sensor_frame,
        )
        self._windower = Windower(
            batch_size=config.batch_size,
            batch_period_ns=seconds_to_ns(config.batch_period),
            input_dims=config.input_dims,
            target=config.target,
            min_spacing_m=config.min_spacing,
            drops=self.drops,
            first_window_min=config.first_batch_min,
        )
        self._trajectory = Trajectory()
        self.generation = 0
        self.closed = False

    # All methods below expect ``lock`` held by the caller, so that a caller can hand the
    # windows on (to the worker, in stamp order) under the same lock.

    def add_pose(self, pose: Pose) -> list[WindowJob]:
        return self._windows_from(self._pairer.add_pose(pose))

    def add_field(self, reading: FieldReading) -> list[WindowJob]:
        return self._windows_from(self._pairer.add_reading(reading))

    def add_transform(self, transform: Transform, *, static: bool) -> list[WindowJob]:
        return self._windows_from(self._pairer.add_transform(transform, static=static))

    def add(self, record: InputRecord) -> list[WindowJob]:
        """Any input record, by its type."""
        if isinstance(record, FieldReading):
            return self.add_field(record)
        if isinstance(record, StaticTransform):
            return self.add_transform(record.transform, static=True)
        if isinstance(record, Transform):
            return self.add_transform(record, static=False)
        return self.add_pose(record)

    def flush(self) -> list[WindowJob]:
        """End of input: readings still waiting for a pose are dropped (no_pose); the open
        window closes now."""
        self._pairer.flush()
        window = self._windower.flush()
        return [] if window is None else [self._job(window)]

    def new_generation(self, trajectory: np.ndarray | None, awaiting_fit: bool = True) -> None:
        """Forget the open window and the path (or take ``trajectory``): a new map starts (its
        θ awaiting its first fit), or a loaded one goes on."""
        self.generation += 1
        self._windower.clear(awaiting_fit)
        self._trajectory.clear()
        if trajectory is not None:
            self._trajectory.load(trajectory)

    def await_first_fit(self, awaiting: bool) -> None:
        """Whether the map's θ awaits its first fit (``Windower.await_first_fit``)."""
        self._windower.await_first_fit(awaiting)

    def trajectory(self) -> np.ndarray:
        return self._trajectory.as_array()

    def status(self) -> dict[str, int]:
        """open_window_samples, pending_readings, poses_buffered."""
        return {
            "open_window_samples": self._windower.open_samples,
            "pending_readings": self._pairer.pending,
            "poses_buffered": len(self._pairer.poses),  # transforms, under TF
        }

    def _windows_from(self, samples: list[Sample]) -> list[WindowJob]:
        jobs = []
        for sample in samples:
            self._trajectory.add(sample.position_m[0], sample.position_m[1])
            jobs.extend(self._job(w) for w in self._windower.add(sample))
        return jobs

    def _job(self, window: Window) -> WindowJob:
        return WindowJob(window, self.generation, time.perf_counter())


class CollectedSamples(NamedTuple):
    """Every sample of a recording, as one batch fit takes them.

    Attributes:
        X: [N, D] inputs (m).
        y: [N] targets (µT), or [N, 3] map-frame field components (µT) for target "vector".
        stamps_ns: [N] stamps (ns).
        orientation_xyzw: [N, 4] pose orientations (NaN where none).
        trajectory_m: [K, 2] the path, thinned.
        drops: what pairing and thinning dropped, by reason.
    """

    X: np.ndarray
    y: np.ndarray
    stamps_ns: np.ndarray
    orientation_xyzw: np.ndarray
    trajectory_m: np.ndarray
    drops: dict[str, int]

    def with_auxiliary_inputs(self, names: Sequence[str], run_gap_s: float) -> CollectedSamples:
        """These samples with the model's auxiliary columns appended to X (unchanged when
        ``names`` is empty). ``time`` counts from the first sample; computed on the whole log,
        so run gaps are the log's, not a subset's."""
        if not names:
            return self
        extra = auxiliary_columns(
            names, self.X, self.stamps_ns, self.orientation_xyzw, run_gap_s=run_gap_s,
            time_origin_ns=int(self.stamps_ns[0]) if len(self.stamps_ns) else 0,
        )  # fmt: skip
        return self._replace(X=np.column_stack([self.X, extra]))

    def subsample(self, max_samples: int, seed: int) -> CollectedSamples:
        """A random subset of ``max_samples`` samples (seeded), in their original order; all
        of them when ``max_samples`` is 0 or not fewer than the samples."""
        n = len(self.y)
        if max_samples <= 0 or n <= max_samples:
            return self
        keep = np.sort(np.random.default_rng(seed).choice(n, size=max_samples, replace=False))
        return self._replace(
            X=self.X[keep],
            y=self.y[keep],
            stamps_ns=self.stamps_ns[keep],
            orientation_xyzw=self.orientation_xyzw[keep],
        )


def collect_samples(records: Iterable[InputRecord], config: MapperConfig) -> CollectedSamples:
    """Pair and thin a whole recording exactly as the streaming pipeline would.

    Args:
        records: poses (or transforms) and readings in stamp order
            (``gp_mapper.io.read_bag``).
        config: pairing and windowing parameters (the window size does not matter here).

    Returns:
        The samples, concatenated over every window.
    """
    stage = InputStage(config)
    windows: list[Window] = []
    for record in records:
        windows.extend(job.window for job in stage.add(record))
    windows.extend(job.window for job in stage.flush())
    dims = config.input_dims
    if not windows:
        empty = np.empty((0, dims))
        no_y = np.empty((0, 3)) if config.target == VECTOR_TARGET else np.empty(0)
        return CollectedSamples(
            empty, no_y, np.empty(0, np.int64), np.empty((0, 4)), stage.trajectory(),
            stage.drops.as_dict(),
        )  # fmt: skip
    return CollectedSamples(
        np.concatenate([w.X for w in windows]),
        np.concatenate([w.y for w in windows]),
        np.concatenate([w.stamps_ns for w in windows]),
        np.concatenate([w.orientation_xyzw for w in windows]),
        stage.trajectory(),
        stage.drops.as_dict(),
    )


def concat_samples(parts: list[CollectedSamples]) -> CollectedSamples:
    """The samples of several recordings as one log, in stamp order (stable: a tie keeps the
    recordings' order); their paths one after another and their drops summed."""
    if len(parts) == 1:
        return parts[0]
    stamps = np.concatenate([p.stamps_ns for p in parts])
    order = np.argsort(stamps, kind="stable")
    drops: dict[str, int] = {}
    for p in parts:
        for reason, count in p.drops.items():
            drops[reason] = drops.get(reason, 0) + int(count)
    return CollectedSamples(
        np.concatenate([p.X for p in parts])[order],
        np.concatenate([p.y for p in parts])[order],
        stamps[order],
        np.concatenate([p.orientation_xyzw for p in parts])[order],
        np.concatenate([p.trajectory_m for p in parts]),
        drops,
    )
