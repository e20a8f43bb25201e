"""A single-flight background worker: one window in the engine, a bounded backlog waiting.

The producer never blocks on the engine. A window submitted while the engine is busy is merged
into the newest waiting window, so no window is ever dropped for arriving while the engine is
busy: the next update absorbs all of them at once (the engine's per-update cost grows with the
map more than with the window, so a merged window costs little more than one). A waiting
window that has reached the merge cap is closed and the next one starts behind it, so a slow
stretch of updates (a fit, a large selection) leaves a backlog that the faster updates after it
work off, oldest first. Only when the backlog as a whole is full is the newest waiting window
thinned, uniformly over its span, and the samples thinned out are reported back for counting.
Exceptions in the processing function are logged and never end the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
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
        merge_cap: Largest merged window (samples); a full waiting window closes and the next
            window waits behind it.
        backlog_cap: Most samples waiting in all windows together (at least ``merge_cap``;
            default ``merge_cap``: one waiting window). Past it the newest waiting window is
            thinned to stay within it.
        name: Thread name.
    """

    def __init__(
        self,
        process: Callable[[WindowJob], None],
        *,
        merge_cap: int,
        backlog_cap: int | None = None,
        name: str = "gp_mapper-worker",
    ) -> None:
        if merge_cap < 1:
            raise ValueError(f"merge_cap must be at least 1 sample; got {merge_cap}")
        self._process = process
        self._merge_cap = merge_cap
        self._backlog_cap = merge_cap if backlog_cap is None else max(backlog_cap, merge_cap)
        self._cond = threading.Condition()
        self._pending: deque[WindowJob] = deque()
        self._pending_samples = 0
        self._busy = False
        self._stop = False
        self._merged = 0
        self._thinned = 0
        self._running = 0  # samples of the job being processed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Jobs waiting."""
        with self._cond:
            return len(self._pending)

    @property
    def pending_samples(self) -> int:
        """Samples in the waiting jobs (0 if none)."""
        with self._cond:
            return self._pending_samples

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
        """Samples thinned out of merged windows with the backlog full so far."""
        with self._cond:
            return self._thinned

    def submit(self, job: WindowJob) -> int:
        """Queue a job without blocking; merge it into the newest waiting one.

        Waiting jobs of another generation (an older map) are dropped. A job that would take
        the newest waiting window past ``merge_cap`` waits as a window of its own behind it,
        unless the backlog would pass ``backlog_cap``: then it is merged and the merged window
        is thinned evenly to fit (at most ``merge_cap``, the backlog at most ``backlog_cap``).

        Returns:
            Samples lost to make room: thinned out, or in dropped jobs (0 if none).

        Raises:
            RuntimeError: the worker has been closed.
        """
        with self._cond:
            if self._stop:
                raise RuntimeError("the worker is closed")
            lost = 0
            if self._pending and self._pending[-1].generation != job.generation:
                lost = self._clear_pending()
            size = len(job.window.y)
            newest = self._pending[-1] if self._pending else None
            if newest is not None and len(newest.window.y) + size <= self._merge_cap:
                self._replace_newest(self._merged_job(newest, job))
            elif newest is None or self._pending_samples + size <= self._backlog_cap:
                thin = thin_window(job.window, self._merge_cap)
                lost += self._count_thinned(size - len(thin.y))
                self._pending.append(job._replace(window=thin))
                self._pending_samples += len(thin.y)
            else:  # the backlog is full: the newest window absorbs the job at a lower density
                older = self._pending_samples - len(newest.window.y)
                merged = self._merged_job(newest, job)
                thin = thin_window(merged.window, min(self._merge_cap, self._backlog_cap - older))
                lost += self._count_thinned(len(merged.window.y) - len(thin.y))
                self._replace_newest(merged._replace(window=thin))
            self._cond.notify_all()
            return lost

    def _merged_job(self, waiting: WindowJob, job: WindowJob) -> WindowJob:
        self._merged += 1
        window = merge_windows(waiting.window, job.window)
        return WindowJob(window, job.generation, min(waiting.closed_s, job.closed_s))

    def _replace_newest(self, job: WindowJob) -> None:
        self._pending_samples += len(job.window.y) - len(self._pending[-1].window.y)
        self._pending[-1] = job

    def _count_thinned(self, samples: int) -> int:
        self._thinned += samples
        return samples

    def _clear_pending(self) -> int:
        """Empty the backlog (under the lock); return its number of samples."""
        samples = self._pending_samples
        self._pending.clear()
        self._pending_samples = 0
        return samples

    def discard_pending(self) -> int:
        """Drop the waiting jobs, if any; return their number of samples."""
        with self._cond:
            samples = self._clear_pending()
            self._cond.notify_all()
            return samples

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is waiting or running; False if `timeout` (s) ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0.0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self, timeout: float | None = None) -> None:
        """Stop the thread after the job in progress; waiting jobs are discarded (logged)."""
        with self._cond:
            self._stop = True
            if self._pending:
                logger.info(
                    "discarding %d waiting window(s) of %d samples at close",
                    len(self._pending),
                    self._pending_samples,
                )
                self._clear_pending()
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                job = self._pending.popleft()
                self._pending_samples -= len(job.window.y)
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
