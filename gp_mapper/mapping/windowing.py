"""Group samples into windows (engine batches) by count and by message-stamp time.

Windows close on stamps, never on the wall clock, so a live run and the replay of its bag give
the same windows.
"""

from __future__ import annotations

import numpy as np

from gp_mapper.engine.auxiliary import auxiliary_columns
from gp_mapper.mapping.records import DropCounts, Sample, Window

TARGETS = ("norm", "x", "y", "z", "vector")
# The target whose windows carry the whole map-frame field, y [N, 3], for a vector model.
VECTOR_TARGET = "vector"
_AXIS = {"x": 0, "y": 1, "z": 2}
# The orientation of a sample whose pose had none.
_NO_ORIENTATION = np.full(4, np.nan)


def target_value(field_ut: np.ndarray, target: str) -> float | np.ndarray:
    """The mapped quantity of one sample.

    Args:
        field_ut: [3] field (µT) in the map frame.
        target: "norm" for |B|, "x", "y", "z" for that map-frame component, or "vector" for
            all three.

    Returns:
        The target (µT): a float, or for "vector" a [3] float64 copy of the field (each
        component exactly as "x", "y", "z" give it).
    """
    if target == "norm":
        return float(np.linalg.norm(field_ut))
    if target in _AXIS:
        return float(field_ut[_AXIS[target]])
    if target == VECTOR_TARGET:
        return np.array(field_ut, dtype=np.float64).reshape(3)
    raise ValueError(f"target must be one of {TARGETS}; got {target!r}")


def window_model_inputs(window: Window, auxiliary: tuple[str, ...]) -> np.ndarray:
    """The model's inputs of a window: X [N, D] with the ``auxiliary`` columns appended.

    A streaming model with nuisance components (``gam_stream``) reads, after the position,
    ``yaw`` and ``time`` (:func:`gp_mapper.engine.auxiliary.auxiliary_columns`: the pose's yaw,
    else the window's direction of travel; seconds of the stamp, the model keeping its own
    clock); other models read X as it is.

    Raises:
        ValueError: an unknown column name, or a window without stamps or orientations.
    """
    if not auxiliary:
        return window.X
    extra = auxiliary_columns(auxiliary, window.X, window.stamps_ns, window.orientation_xyzw)
    return np.concatenate([window.X, extra], axis=1)


def merge_windows(first: Window, second: Window) -> Window:
    """One window holding both (first's samples, then second's)."""

    def joined(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
        return None if a is None or b is None else np.concatenate([a, b])

    return Window(
        X=np.concatenate([first.X, second.X]),
        y=np.concatenate([first.y, second.y]),
        start_ns=min(first.start_ns, second.start_ns),
        end_ns=max(first.end_ns, second.end_ns),
        stamps_ns=joined(first.stamps_ns, second.stamps_ns),
        orientation_xyzw=joined(first.orientation_xyzw, second.orientation_xyzw),
    )


class Windower:
    """Collects samples into windows of `batch_size` samples or `batch_period_ns` of stamps.

    A window closes when it holds `batch_size` samples, or when a sample arrives whose stamp is
    `batch_period_ns` or more after the window's first sample (that sample opens the next
    window). Every sample, kept or thinned, advances the clock, so a stationary robot still
    closes its window on time. While the map's θ awaits its first fit (`await_first_fit`), a
    window closes on time only once it holds `first_window_min` samples: that fit starts from
    the configured guess, and a few readings cannot correct it.

    A sample at exactly the last kept position, or (with `min_spacing_m` > 0) closer to it than
    that, is dropped and counted as `duplicate`: a stationary robot's thousands of identical
    inputs add nothing but cost and make the engine's kernel matrices singular.

    Args:
        batch_size: Samples per window.
        batch_period_ns: Stamp time (ns) after which an open window closes.
        input_dims: 2 for (x, y) inputs, 3 for (x, y, z).
        target: "norm", "x", "y", "z" (windows' y is [N]) or "vector" (y is [N, 3]); see
            `target_value`.
        min_spacing_m: Thinning distance (m) in the input space; 0 keeps all but exact repeats.
        drops: Counters to increment.
        first_window_min: Samples a window needs before it closes on time while θ awaits its
            first fit.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        batch_period_ns: int,
        input_dims: int,
        target: str,
        min_spacing_m: float,
        drops: DropCounts,
        first_window_min: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1; got {batch_size}")
        if batch_period_ns <= 0:
            raise ValueError(f"batch_period_ns must be positive; got {batch_period_ns}")
        if input_dims not in (2, 3):
            raise ValueError(f"input_dims must be 2 or 3; got {input_dims}")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}; got {target!r}")
        self._batch_size = batch_size
        self._period_ns = int(batch_period_ns)
        self._dims = input_dims
        self._target = target
        self._min_spacing = float(min_spacing_m)
        self._drops = drops
        self._first_min = max(1, int(first_window_min))
        self._awaiting_fit = True  # the map's θ is still the configured guess
        self._X: list[np.ndarray] = []
        self._y: list[float | np.ndarray] = []
        self._stamps: list[int] = []
        self._orientations: list[np.ndarray] = []
        self._last_kept: np.ndarray | None = None

    @property
    def open_samples(self) -> int:
        """Samples in the open window."""
        return len(self._y)

    def add(self, sample: Sample) -> list[Window]:
        """Add one sample; return the windows it closes (zero, one, or two if batch_size is 1)."""
        closed: list[Window] = []
        stamp = int(sample.stamp_ns)
        due = bool(self._stamps) and stamp - self._stamps[0] >= self._period_ns
        if due and (not self._awaiting_fit or len(self._y) >= self._first_min):
            closed.append(self._close())
        x = np.asarray(sample.position_m, dtype=np.float64)[: self._dims]
        if self._last_kept is not None:
            distance = float(np.linalg.norm(x - self._last_kept))
            if distance == 0.0 or distance < self._min_spacing:
                self._drops.duplicate += 1
                return closed
        self._last_kept = x
        self._X.append(x)
        self._y.append(target_value(sample.field_ut, self._target))
        self._stamps.append(stamp)
        q = sample.orientation_xyzw
        self._orientations.append(_NO_ORIENTATION if q is None else np.asarray(q, np.float64))
        if len(self._y) >= self._batch_size:
            closed.append(self._close())
        return closed

    def flush(self) -> Window | None:
        """Close the open window now; None if it is empty."""
        return self._close() if self._y else None

    def await_first_fit(self, awaiting: bool) -> None:
        """Whether the map's θ still awaits its first fit (windows then wait for
        `first_window_min` samples before closing on time)."""
        self._awaiting_fit = awaiting

    def clear(self, awaiting_fit: bool = True) -> None:
        """Forget the open window and the last kept position; a new map's θ awaits its first
        fit (``awaiting_fit`` False: a loaded, fitted map goes on)."""
        self._awaiting_fit = awaiting_fit
        self._X.clear()
        self._y.clear()
        self._stamps.clear()
        self._orientations.clear()
        self._last_kept = None

    def _close(self) -> Window:
        window = Window(
            X=np.stack(self._X),
            y=np.asarray(self._y, dtype=np.float64),
            start_ns=self._stamps[0],
            end_ns=self._stamps[-1],
            stamps_ns=np.asarray(self._stamps, dtype=np.int64),
            orientation_xyzw=np.stack(self._orientations),
        )
        self._X.clear()
        self._y.clear()
        self._stamps.clear()
        self._orientations.clear()
        return window
