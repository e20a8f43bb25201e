"""The model inputs beyond position: heading, run label and time, from collected samples.

The additive model's nuisance components (``components`` heading, run, drift) read one
column each after the position (``AdditiveGP.auxiliary_inputs``):

- ``yaw`` [rad]: the yaw of the pose orientation at each sample; where a pose had none (NaN),
  the direction of travel (:func:`gp_mapper.io.heading.heading_from_track`).
- ``run``: a label 0, 1, 2, ... that starts a new run wherever two consecutive samples are at
  least ``run_gap_s`` apart. ``gp-mapper convert aalto`` lays its runs on one time line,
  :data:`gp_mapper.io.bag_convert.SEQUENCE_GAP_S` (5 s) after one another, while its samples
  are 0.02 s apart, so a 5 s threshold finds exactly the runs; a robot that stops and is
  thinned away (``min_spacing``) for longer than that starts a new run too, which costs one
  more offset, not a wrong map.
- ``time`` [s]: seconds since the first sample of the log.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gp_mapper.mapping.inputs import CollectedSamples
from gp_mapper.mapping.pose_buffer import NS_PER_S

from .heading import heading_from_track, yaw_from_quaternion

AUXILIARY_NAMES = ("yaw", "run", "time")


def run_labels(stamps_ns: np.ndarray, gap_s: float) -> np.ndarray:
    """Run labels [N] (0.0, 1.0, ...) of stamps [N] (ns, increasing) split at gaps ≥ gap_s."""
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    if gap_s <= 0.0:
        raise ValueError(f"gap_s must be positive, got {gap_s}")
    if stamps.size == 0:
        return np.empty(0)
    starts = np.diff(stamps) >= round(gap_s * NS_PER_S)
    return np.concatenate([[0], np.cumsum(starts)]).astype(np.float64)


def sample_yaw(samples: CollectedSamples) -> np.ndarray:
    """Yaw [N] rad of each sample: the pose's, else the direction of travel."""
    yaw = yaw_from_quaternion(samples.orientation_xyzw)
    missing = ~np.isfinite(yaw)
    if missing.any():
        time_s = (samples.stamps_ns - samples.stamps_ns[0]) / NS_PER_S
        yaw[missing] = heading_from_track(time_s, samples.X[:, :2])[missing]
    return yaw


def auxiliary_columns(
    samples: CollectedSamples, names: Sequence[str], run_gap_s: float
) -> np.ndarray:
    """The columns [N, len(names)] of ``names`` (each of :data:`AUXILIARY_NAMES`), in order.

    Raises:
        ValueError: an unknown name.
    """
    unknown = [n for n in names if n not in AUXILIARY_NAMES]
    if unknown:
        raise ValueError(f"unknown auxiliary inputs {unknown}; known: {AUXILIARY_NAMES}")
    n = len(samples.y)
    if n == 0:
        return np.empty((0, len(names)))
    columns = {
        "yaw": lambda: sample_yaw(samples),
        "run": lambda: run_labels(samples.stamps_ns, run_gap_s),
        "time": lambda: (samples.stamps_ns - samples.stamps_ns[0]) / NS_PER_S,
    }
    return np.column_stack([columns[name]() for name in names]).reshape(n, len(names))


def with_auxiliary_inputs(
    samples: CollectedSamples, names: Sequence[str], run_gap_s: float
) -> CollectedSamples:
    """``samples`` with the auxiliary columns appended to X (unchanged when ``names`` is empty)."""
    if not names:
        return samples
    extra = auxiliary_columns(samples, names, run_gap_s)
    return samples._replace(X=np.column_stack([samples.X, extra]))
