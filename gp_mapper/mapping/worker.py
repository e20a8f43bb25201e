"""A single-flight background worker: one window in the engine, at most one waiting.

The producer never blocks on the engine. Every window submitted while another waits is merged
into it, so no window is ever dropped for arriving while the engine is busy: the next update
absorbs all of them at once (the engine's per-update cost grows with the map more than with
the window, so a merged window costs little more than one). Only past a cap on the merged
size is the waiting window thinned, uniformly over its span, and the samples thinned out are
reported back for counting. Exceptions in the processing function are logged and never end
the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.records import Window
from gp_mapper.mapping.windowing import merge_windows

logger = logging.getLogger(__name__)


class WindowJob(NamedTuple):
    """A window handed to the worker.

    Attributes:
        window: The batch.
        generation: The map generation it belongs to (reset and load start a new one).
        closed_s: `time.perf_counter()` when the window closed, for latency.
    """

    window: Window
    generation: int
    closed_s: float


def thin_window(window: Window, keep: int) -> Window:
    """``keep`` samples of ``window`` spread evenly over it, first and last included.

    Even spacing in sample order keeps the whole stretch of path the window covers, only at a
    lower density: at a magnetometer's rate successive samples lie millimetres apart, well
    inside the field's lengthscale.

    Args:
        window: The window to thin (N samples).
        keep: Samples to keep, 1 <= keep (a window of at most ``keep`` comes back as it is).
    """
    n = len(window.y)
    if n <= keep:
        return window
    index = np.unique(np.round(np.linspace(0.0, n - 1.0, keep)).astype(np.intp))

    def taken(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[index]

    stamps = taken(window.stamps_ns)
    return Window(
        X=window.X[index],
        y=window.y[index],
        start_ns=int(stamps[0]) if stamps is not None else window.start_ns,
        end_ns=int(stamps[-1]) if stamps is not None else window.end_ns,
        stamps_ns=stamps,
        orientation_xyzw=taken(window.orientation_xyzw),
    )


class SingleFlightWorker:
    """Runs `process` on submitted jobs in one daemon thread.

    Args:
        process: Called with each job in the worker thread.
        merge_cap: Largest merged window (samples); a merged window beyond it is thinned to it.
        name: Thread name.
    """

    def __init__(
        self,
        process: Callable[[WindowJob], None],
        *,
        merge_cap: int,
        name: str = "gp_mapper-worker",
    ) -> None:
        if merge_cap < 1:
            raise ValueError(f"merge_cap must be at least 1 sample; got {merge_cap}")
        self._process = process
        self._merge_cap = merge_cap
        self._cond = threading.Condition()
        self._pending: WindowJob | None = None
        self._busy = False
        self._stop = False
        self._merged = 0
        self._thinned = 0
        self._running = 0  # samples of the job being processed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Jobs waiting (0 or 1)."""
        with self._cond:
            return int(self._pending is not None)

    @property
    def pending_samples(self) -> int:
        """Samples in the waiting job (0 if none)."""
        with self._cond:
            return 0 if self._pending is None else len(self._pending.window.y)

    @property
    def processing_samples(self) -> int:
        """Samples in the job being processed (0 if none)."""
        with self._cond:
            return self._running

    @property
    def busy(self) -> bool:
        """True while a job is being processed."""
        with self._cond:
            return self._busy

    @property
    def merged(self) -> int:
        """Jobs merged into a waiting one so far."""
        with self._cond:
            return self._merged

    @property
    def thinned(self) -> int:
        """Samples thinned out of merged windows past the cap so far."""
        with self._cond:
            return self._thinned

    def submit(self, job: WindowJob) -> int:
        """Queue a job without blocking; merge it into a waiting one.

        A waiting job of another generation (an older map) is replaced. A merged window over
        ``merge_cap`` samples is thinned evenly to ``merge_cap``.

        Returns:
            Samples lost to make room: thinned out, or in a replaced job (0 if none).

        Raises:
            RuntimeError: the worker has been closed.
        """
        with self._cond:
            if self._stop:
                raise RuntimeError("the worker is closed")
            lost = 0
            waiting = self._pending
            if waiting is None or waiting.generation != job.generation:
                lost = 0 if waiting is None else len(waiting.window.y)
                merged = job
            else:
                merged = WindowJob(
                    merge_windows(waiting.window, job.window),
                    job.generation,
                    min(waiting.closed_s, job.closed_s),
                )
                self._merged += 1
            size = len(merged.window.y)
            if size > self._merge_cap:
                merged = merged._replace(window=thin_window(merged.window, self._merge_cap))
                thinned = size - len(merged.window.y)
                self._thinned += thinned
                lost += thinned
            self._pending = merged
            self._cond.notify_all()
            return lost

    def discard_pending(self) -> int:
        """Drop the waiting job, if any; return its number of samples."""
        with self._cond:
            waiting, self._pending = self._pending, None
            self._cond.notify_all()
            return 0 if waiting is None else len(waiting.window.y)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is waiting or running; False if `timeout` (s) ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0.0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self, timeout: float | None = None) -> None:
        """Stop the thread after the job in progress; a waiting job is discarded (logged)."""
        with self._cond:
            self._stop = True
            if self._pending is not None:
                logger.info(
                    "discarding a waiting window of %d samples at close",
                    len(self._pending.window.y),
                )
                self._pending = None
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                job, self._pending = self._pending, None
                self._busy = True
                self._running = len(job.window.y)
            try:
                self._process(job)
            except Exception:  # the thread must outlive any failure; the map stands
                logger.exception(
                    "processing a window of %d samples failed; the previous map stands",
                    len(job.window.y),
                )
            finally:
                with self._cond:
                    self._busy = False
                    self._running = 0
                    self._cond.notify_all()
