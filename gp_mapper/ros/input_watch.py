"""Notice inputs that stay silent, so a wrong remapping is reported instead of an empty map.

A node that subscribes to the wrong topic (a missing ``-r mag:=/imu/mag``, a namespace)
receives nothing and raises no error. ``InputWatch`` keeps the time of the last message on
each input and, once an input has been silent for ``silence_s`` (since start or since its
last message), says so in one line naming the resolved topic, at most once per
``repeat_s``. Pure: the caller passes the clock readings and the publisher counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple


class Silence(NamedTuple):
    """One input that has been silent too long.

    Attributes:
        label: what the input is, e.g. ``"magnetometer"``.
        topic: the resolved (remapped) topic name.
        silent_s: seconds since its last message, or since start if it never had one.
        ever_heard: whether any message ever arrived.
    """

    label: str
    topic: str
    silent_s: float
    ever_heard: bool


class InputWatch:
    """Last-message times of a node's inputs, and the warning when one stays silent.

    Args:
        topics: label -> resolved topic name, e.g. ``{"magnetometer": "/imu/mag"}``.
        silence_s: an input silent this long is reported [s].
        repeat_s: at most one warning per this period [s].
        start_s: the clock reading at start (the same clock as every later call) [s].
    """

    def __init__(
        self, topics: Mapping[str, str], silence_s: float, repeat_s: float, start_s: float
    ) -> None:
        self.topics = dict(topics)
        self.silence_s = silence_s
        self.repeat_s = repeat_s
        self._start_s = start_s
        self._last: dict[str, float | None] = dict.fromkeys(self.topics)
        self._received = dict.fromkeys(self.topics, 0)
        self._warned_s = -math.inf

    def heard(self, label: str, now_s: float) -> None:
        """Note a message on ``label`` at ``now_s`` (O(1): called from input callbacks)."""
        self._last[label] = now_s
        self._received[label] += 1

    def received(self, label: str) -> int:
        """Messages heard on ``label`` so far (a player compares it with what it sent)."""
        return self._received[label]

    def age_s(self, label: str, now_s: float) -> float:
        """Seconds since the last message on ``label``; NaN if none ever arrived."""
        last = self._last[label]
        return math.nan if last is None else now_s - last

    def silent(self, now_s: float) -> list[Silence]:
        """The inputs silent for at least ``silence_s`` at ``now_s``, in ``topics`` order."""
        out = []
        for label, topic in self.topics.items():
            last = self._last[label]
            since = now_s - (self._start_s if last is None else last)
            if since >= self.silence_s:
                out.append(Silence(label, topic, since, last is not None))
        return out

    def warning(self, now_s: float, publishers: Callable[[str], int]) -> str | None:
        """The warning to log now, or None (nothing silent, or one was given lately).

        Args:
            now_s: the clock reading.
            publishers: topic -> how many publishers the graph has for it.
        """
        silent = self.silent(now_s)
        if not silent or now_s - self._warned_s < self.repeat_s:
            return None
        self._warned_s = now_s
        parts = []
        for s in silent:
            count = publishers(s.topic)
            since = f"for {s.silent_s:.0f} s" if s.ever_heard else "since start"
            who = "no publisher" if count == 0 else f"{count} publisher{'s' * (count != 1)}"
            parts.append(f"no {s.label} message on {s.topic} {since} ({who})")
        hint = (
            "check the remapping (e.g. -r mag:=/imu/mag) and the namespace"
            if any(publishers(s.topic) == 0 for s in silent)
            else "its publishers send nothing this node receives (stopped, or QoS)"
        )
        return "; ".join(parts) + f": {hint}"
