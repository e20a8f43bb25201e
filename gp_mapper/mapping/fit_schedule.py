"""When a streamed window re-fits the hyperparameters θ, and when it only joins the map.

Selecting a window's inducing points and updating the posterior under the current θ are a
fraction of the cost of re-fitting θ by L-BFGS (at M ~ 600 inducing points about 2 s against
10 s), and after the first windows θ hardly moves on a stationary field. So θ is re-fitted on
a map's first windows, then on every n-th window, and whenever the engine's own bound says
that θ no longer explains the data: the bound per sample of a window joined under the current
θ falls well below its value right after the last fit (a new floor, a sensor swapped, a
disturbance that changes the field's statistics).
"""

from __future__ import annotations

import math
from typing import NamedTuple


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
        bound_drop: re-fit when a window joined under the current θ has a bound per sample
            this far below the reference (the first window joined after the last fit); 0 =
            off [nats/sample].
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
        self._reference: float | None = None  # bound per sample of the first of them
        self._stale = False
        self.fits = 0

    @property
    def reference(self) -> float | None:
        """The bound per sample that later windows are compared with [nats/sample]."""
        return self._reference

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
            self._reference = None  # a fitted window's own bound is optimistic: wait for one
            self._stale = False
            return
        self._since_fit += 1
        if at_cap or bound is None or n < 1 or not math.isfinite(bound):
            return
        per_sample = bound / n
        if self._reference is None:
            self._reference = per_sample
        elif self.bound_drop > 0.0 and per_sample < self._reference - self.bound_drop:
            self._stale = True
