"""A dependency-free progress bar for long command-line work (stderr, redrawn in place)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30
# Redraw at most this often so the bar costs nothing next to the work it reports.
REDRAW_PERIOD_S = 0.2


class Progress:
    """``[#####.....]  42%  label`` on one line of ``stream``; quiet when it is not a terminal
    except for the final line."""

    def __init__(self, label: str, stream: TextIO = sys.stderr) -> None:
        self.label = label
        self.stream = stream
        self._last = 0.0
        self._start = time.perf_counter()
        self._live = stream.isatty()

    def update(self, fraction: float, detail: str = "") -> None:
        now = time.perf_counter()
        if not self._live or now - self._last < REDRAW_PERIOD_S:
            return
        self._last = now
        self._draw(fraction, detail, end="\r")

    def done(self, detail: str = "") -> None:
        self._draw(1.0, detail + f"  ({time.perf_counter() - self._start:.1f} s)", end="\n")

    def _draw(self, fraction: float, detail: str, end: str) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {100 * fraction:3.0f}%  {detail}\x1b[K{end}")
        self.stream.flush()
