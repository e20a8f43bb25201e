"""When a streamed window re-fits the hyperparameters θ, and when it only joins the map.

Selecting a window's inducing points and updating the posterior under the current θ are a
fraction of the cost of re-fitting θ by L-BFGS (at M ~ 600 inducing points about 2 s against
10 s), and after the first windows θ hardly moves on a stationary field. So θ is re-fitted on
a map's first windows, then on every n-th window, and whenever the engine's own bound says
that θ no longer explains the data: the bound per sample of the windows joined under the
current θ falls well below its value right after the last fit (a new floor, a sensor swapped,
a disturbance that changes the field's statistics).

The bound per sample also moves from place to place under a θ that is right: a window that
explores adds inducing points and pays for them, one that revisits a mapped corridor does
not. On the validation office floor (``benchmarks/building.py --seed 1``) its spread over the
windows is ~0.36 nats (sd, from the median absolute deviation), so one window against one
reference window crossed the 0.5-nat drop every few windows: 29 fits in 301 windows where
the first windows and the schedule ask for 20, for no better map (RMSE 1.71 µT, coverage
0.880, against 1.71 and 0.881 with no stale re-fit at all). Both levels are therefore medians of
:data:`LEVEL_WINDOWS` windows: the first ones after the fit, and the latest ones. A change
that lasts moves the latest median within that many windows; a place does not.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import NamedTuple

# Windows whose median bound per sample is a level: the reference after a fit, and the
# latest (20 s of the node's 4-s windows, what a lasting change takes to be called stale).
LEVEL_WINDOWS = 5


class FitDecision(NamedTuple):
    """Whether the next update re-fits θ, and why.

    Attributes:
        fit: True to re-fit θ on the next window.
        reason: "first" (one of the map's first windows), "schedule" (every n-th), "stale"
            (the bound dropped), or "" when θ is kept.
    """

    fit: bool
    reason: str


class FitSchedule:
    """Decides, window by window, whether the engine re-fits θ.

    Not thread-safe: the pipeline calls it under its engine lock.

    Args:
        first: re-fit on each of a map's first ``first`` windows (counted in the engine's
            committed updates, so a loaded map does not start over) [windows].
        every: then re-fit on every ``every``-th window since the last fit; 0 = only when
            stale [windows].
        bound_drop: re-fit when the latest windows joined under the current θ have a
            median bound per sample this far below the reference (the median of the first
            ones joined after the last fit); 0 = off [nats/sample].
    """

    def __init__(self, first: int, every: int, bound_drop: float) -> None:
        if first < 0 or every < 0 or not bound_drop >= 0.0:
            raise ValueError(
                f"fit schedule needs first >= 0, every >= 0, bound_drop >= 0; got {first}, "
                f"{every}, {bound_drop}"
            )
        self.first = first
        self.every = every
        self.bound_drop = bound_drop
        self._since_fit = 0  # windows joined under the current θ
        self._first: list[float] = []  # bounds per sample of the first of them
        self._latest: deque[float] = deque(maxlen=LEVEL_WINDOWS)  # and of the latest
        self._stale = False
        self.fits = 0

    @property
    def reference(self) -> float | None:
        """The median bound per sample of the first windows after the last fit, which the
        latest windows' median is compared with; None until there are enough [nats/sample]."""
        if len(self._first) < LEVEL_WINDOWS:
            return None
        return statistics.median(self._first)

    def decide(self, updates: int) -> FitDecision:
        """Whether the next window re-fits θ.

        Args:
            updates: committed updates of the map so far.
        """
        if updates < self.first:
            return FitDecision(True, "first")
        if self._stale:
            return FitDecision(True, "stale")
        if self.every > 0 and self._since_fit + 1 >= self.every:
            return FitDecision(True, "schedule")
        return FitDecision(False, "")

    def record(self, fitted: bool, bound: float | None, n: int, at_cap: bool = False) -> None:
        """Take note of a committed update.

        Args:
            fitted: θ was re-fitted on this window.
            bound: the engine's bound on the window after the update (under the θ it was
                committed with) [nats], or None if the engine reports none.
            n: samples in the window.
            at_cap: the map is at its inducing-point cap. It cannot add points where the data
                went, so its bound falls there whatever θ is: it says nothing of a stale θ.
        """
        if fitted:
            self.fits += 1
            self._since_fit = 0
            # A fitted window's own bound is optimistic: the levels start after it.
            self._first.clear()
            self._latest.clear()
            self._stale = False
            return
        self._since_fit += 1
        if at_cap or bound is None or n < 1 or not math.isfinite(bound):
            return
        per_sample = bound / n
        if len(self._first) < LEVEL_WINDOWS:
            self._first.append(per_sample)
        self._latest.append(per_sample)
        reference = self.reference
        if (
            self.bound_drop > 0.0
            and reference is not None
            and len(self._latest) == LEVEL_WINDOWS
            and statistics.median(self._latest) < reference - self.bound_drop
        ):
            self._stale = True
