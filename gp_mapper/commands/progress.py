"""A dependency-free progress report for long command-line work, on stderr: a bar redrawn in
place on a terminal, a plain line every ``LOG_PERIOD_S`` otherwise (a log file, a CI job,
``ros2 launch``), so that captured output still shows the work going on."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

BAR_WIDTH = 30
# Redraw at most this often so the bar costs nothing next to the work it reports.
REDRAW_PERIOD_S = 0.2
# Without a terminal: at most one line this often (a log is read, not watched). Half of the
# 10 s a reader waits at most for a sign of life: the line comes with the model's next report
# after the period, so a period of 10 s itself left gaps of 10-12 s.
LOG_PERIOD_S = 5.0


class Progress:
    """``label [#####.....]  42%  detail, ETA 12 s`` on one line of ``stream`` when it is a
    terminal; ``label: 42 % detail, ETA 12 s`` lines every ``LOG_PERIOD_S`` when it is not;
    a last line with the total time either way.

    With ``heartbeat``, a thread writes a line (or redraws the bar) when none was written for
    ``LOG_PERIOD_S``: work that reports between steps (a replay between windows) still shows
    a sign of life while one long step runs, with how long it has run and no ETA, which that
    step has made stale; and reports too frequent to be written each still show their latest
    state within the period.
    """

    def __init__(self, label: str, stream: TextIO | None = None, heartbeat: bool = False) -> None:
        self.label = label
        # Looked up now, not at import: a redirected stderr (a test's, a launcher's) is seen.
        self.stream = sys.stderr if stream is None else stream
        self._start = time.perf_counter()
        # The ETA's clock: from the last report of nothing done yet, so that the work before
        # the counted work (a bag read, a first fit) does not stretch it.
        self._counting_from = self._start
        self._last = self._start
        self._last_update = self._start
        self._fraction, self._detail = 0.0, ""
        self._live = self.stream.isatty()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat_loop, daemon=True)
            self._thread.start()

    def start(self, detail: str) -> None:
        """A first line now, before the work's first report (a bag being read, a model built)."""
        with self._lock:
            self._detail = detail
            self._last = self._last_update = time.perf_counter()
            self._line(0.0, detail)

    def update(self, fraction: float, detail: str = "") -> None:
        with self._lock:
            now = time.perf_counter()
            self._last_update = now
            self._fraction, self._detail = fraction, detail
            if fraction <= 0.0:
                self._counting_from = now
            if now - self._last < (REDRAW_PERIOD_S if self._live else LOG_PERIOD_S):
                return
            self._last = now
            fraction = min(max(fraction, 0.0), 1.0)
            if fraction > 0.0:
                eta = self._eta(now, fraction)
                detail = f"{detail}, ETA {eta:.0f} s" if detail else f"ETA {eta:.0f} s"
            self._line(fraction, detail)

    def beat(self) -> None:
        """A line when none was written for ``LOG_PERIOD_S``: the last update's state (its
        reports came too often to be written), or, when the step has run that long since it,
        how long it has run."""
        with self._lock:
            now = time.perf_counter()
            if now - self._last < LOG_PERIOD_S:
                return
            self._last = now
            fraction = min(max(self._fraction, 0.0), 1.0)
            running = now - self._last_update
            detail = f"{self._detail}, " if self._detail else ""
            if running >= LOG_PERIOD_S:
                self._line(fraction, f"{detail}this step running for {running:.0f} s")
            elif fraction > 0.0:
                self._line(fraction, f"{detail}ETA {self._eta(now, fraction):.0f} s")
            else:
                self._line(fraction, self._detail)

    def _eta(self, now: float, fraction: float) -> float:
        return (now - self._counting_from) * (1.0 - fraction) / fraction

    def _line(self, fraction: float, detail: str) -> None:
        """The bar redrawn on a terminal, else one line of the log."""
        if self._live:
            self._draw(fraction, detail, end="\r")
        else:
            self.stream.write(f"{self.label}: {100 * fraction:3.0f} %  {detail}\n")
            self.stream.flush()

    def _beat_loop(self) -> None:
        # Checked every second: a line comes at most LOG_PERIOD_S + 1 s after the last one.
        while not self._stop.wait(min(1.0, LOG_PERIOD_S / 2)):
            self.beat()

    def close(self) -> None:
        """Stop the heartbeat (idempotent; ``done`` does it too)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # the heartbeat stops whether the work ended or failed

    def done(self, detail: str = "") -> None:
        self.close()
        total = f"  ({time.perf_counter() - self._start:.1f} s)"
        if self._live:
            self._draw(1.0, detail + total, end="\n")
        else:
            self.stream.write(f"{self.label}: done  {detail}{total}\n")
            self.stream.flush()

    def _draw(self, fraction: float, detail: str, end: str) -> None:
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {100 * fraction:3.0f}%  {detail}\x1b[K{end}")
        self.stream.flush()
