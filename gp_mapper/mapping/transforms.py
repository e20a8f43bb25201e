"""A TF tree in time: transforms in, the pose of one frame in another at a stamp out.

tf2's buffer (``ros2/geometry2`` ``tf2/src/buffer_core.cpp``) without ROS, so that a live node
where ``tf2_ros`` is not installed and the offline replay of a bag share one lookup: every
dynamic edge is a time cache (`PoseBuffer`: linear translation, slerp rotation, never
extrapolated, ``cache_time`` 10 s), a static edge holds for all time, and a lookup composes the
chain through the two frames' nearest common ancestor. What tf2 refuses is refused here too,
with the reason: a non-finite value, a quaternion that is not of unit length (tf2's tolerance),
a frame its own parent, an edge that would close a loop, data older than the cache.

Not in tf2: a transform stamped more than ``future_limit`` ahead of the data (a clock gone
wrong) is refused rather than kept, since kept it would bracket every later lookup of its edge
across a gap; and the edges carry a largest gap (``max_gap``) across which they are not
interpolated (a stalled odometry is not a straight line).
"""

from __future__ import annotations

import enum
import math
from typing import NamedTuple

import numpy as np

from gp_mapper.mapping.pose_buffer import (
    NS_PER_S,
    AddResult,
    LookupStatus,
    PoseBuffer,
    PoseLookup,
    rotate,
)
from gp_mapper.mapping.records import Pose, Transform

# tf2's QUATERNION_NORMALIZATION_TOLERANCE: |‖q‖² - 1| above it is refused, not normalised
# (BufferCore::setTransformImpl). Below it the quaternion is normalised.
QUATERNION_TOLERANCE = 10e-3
# tf2's default cache_time: a dynamic edge keeps this much of its past [ns].
DEFAULT_CACHE_NS = 10 * NS_PER_S
# Transforms kept per dynamic edge, whatever their age: 10 s of a 1 kHz source.
EDGE_CAPACITY = 10_000
# The longest chain a lookup walks (tf2's MAX_GRAPH_DEPTH); a longer one means a loop.
MAX_DEPTH = 1000

_IDENTITY_Q = np.array([0.0, 0.0, 0.0, 1.0])


class TransformAdd(enum.Enum):
    """What `TransformBuffer.add` did with a transform."""

    ADDED = "added"
    LATE = "late"  # older than its edge's cache (tf2: TF_OLD_DATA), or a repeated stamp
    INVALID = "invalid"  # non-finite, an empty frame name, or a frame its own parent
    BAD_QUATERNION = "bad_quaternion"  # not of unit length within QUATERNION_TOLERANCE
    LOOP = "loop"  # the child is an ancestor of the parent: the tree would close a loop
    FUTURE = "future"  # stamped more than future_limit ahead of the data


# Each refusal's name in the drop counts (`DropCounts`, /diagnostics) and why, for the log.
REFUSALS: dict[TransformAdd, tuple[str, str]] = {
    TransformAdd.LATE: ("late_transform", "older than its edge's cache or a repeated stamp"),
    TransformAdd.INVALID: (
        "bad_transform",
        "a non-finite value, an empty frame or a frame its own parent",
    ),
    TransformAdd.BAD_QUATERNION: ("bad_quaternion", "a rotation quaternion not of unit length"),
    TransformAdd.LOOP: ("transform_loop", "it would close a loop in the tree"),
    TransformAdd.FUTURE: ("future_transform", "stamped far ahead of the data"),
}


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The Hamilton product ``a b`` of quaternions (x, y, z, w): rotate by b, then by a."""
    ax, ay, az, aw = (float(c) for c in a)
    bx, by, bz, bw = (float(c) for c in b)
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def _conjugate(q: np.ndarray) -> np.ndarray:
    return np.array([-q[0], -q[1], -q[2], q[3]])


class _Rigid(NamedTuple):
    """A rigid transform: p_parent = translation + R(rotation) p_child."""

    translation: np.ndarray
    rotation: np.ndarray

    def then(self, child: _Rigid) -> _Rigid:
        """This transform composed with one below it (parent <- self <- child)."""
        return _Rigid(
            self.translation + rotate(self.rotation, child.translation),
            quaternion_multiply(self.rotation, child.rotation),
        )

    def inverse(self) -> _Rigid:
        conjugate = _conjugate(self.rotation)
        return _Rigid(-rotate(conjugate, self.translation), conjugate)


_IDENTITY = _Rigid(np.zeros(3), _IDENTITY_Q)


class TransformBuffer:
    """The TF tree: each frame's parent and the transform to it, static or in time.

    Args:
        max_gap_ns: Largest stamp difference (ns) between two transforms of one dynamic edge
            that a lookup interpolates across.
        cache_ns: How much of each dynamic edge's past is kept (ns).
        future_limit_ns: A dynamic transform stamped more than this (ns) after the `now_ns`
            given to `add` is refused; 0 accepts any stamp.
    """

    def __init__(
        self,
        max_gap_ns: int,
        *,
        cache_ns: int = DEFAULT_CACHE_NS,
        future_limit_ns: int = DEFAULT_CACHE_NS,
    ) -> None:
        if max_gap_ns <= 0:
            raise ValueError(f"max_gap_ns must be positive; got {max_gap_ns}")
        self._max_gap_ns = int(max_gap_ns)
        self._cache_ns = int(cache_ns)
        self._future_limit_ns = int(future_limit_ns)
        self._parent: dict[str, str] = {}  # child -> parent
        self._static: dict[str, _Rigid] = {}  # child -> its transform to the parent
        self._dynamic: dict[str, PoseBuffer] = {}  # child -> its time cache
        self._known: set[str] = set()  # every frame named, as a parent or a child

    def __len__(self) -> int:
        """Transforms held, over every edge."""
        return len(self._static) + sum(len(cache) for cache in self._dynamic.values())

    @property
    def frames(self) -> frozenset[str]:
        """Every frame named so far, as a parent or a child."""
        return frozenset(self._known)

    def parent_of(self, frame: str) -> str | None:
        """The frame's parent, or None for a root or an unknown frame."""
        return self._parent.get(frame)

    def clear(self) -> None:
        """Forget every transform."""
        self._parent.clear()
        self._static.clear()
        self._dynamic.clear()
        self._known.clear()

    def add(self, transform: Transform, *, static: bool, now_ns: int | None = None) -> TransformAdd:
        """Add one edge's transform (``/tf_static`` when ``static``, else ``/tf``).

        A frame's parent may change (tf2 allows it): its edge then starts afresh. A static
        transform replaces the edge's previous one.

        Args:
            transform: The edge at its stamp; frame names lose a leading slash, as in tf2.
            static: Valid for all time (the stamp is ignored).
            now_ns: The newest stamp of the data the tree serves, for the future check; None
                skips it.
        """
        parent, child = transform.parent.lstrip("/"), transform.child.lstrip("/")
        translation = np.asarray(transform.translation_m, dtype=np.float64).reshape(-1)
        rotation = np.asarray(transform.rotation_xyzw, dtype=np.float64).reshape(-1)
        if not parent or not child or parent == child:
            return TransformAdd.INVALID
        if translation.shape != (3,) or rotation.shape != (4,):
            return TransformAdd.INVALID
        values = translation.tolist() + rotation.tolist()
        if not all(map(math.isfinite, values)):
            return TransformAdd.INVALID
        norm2 = sum(c * c for c in values[3:])
        if abs(norm2 - 1.0) > QUATERNION_TOLERANCE:
            return TransformAdd.BAD_QUATERNION
        rotation = rotation / math.sqrt(norm2)
        if self._is_ancestor(child, parent):
            return TransformAdd.LOOP
        stamp = int(transform.stamp_ns)
        if (
            not static
            and now_ns is not None
            and self._future_limit_ns > 0
            and stamp > now_ns + self._future_limit_ns
        ):
            return TransformAdd.FUTURE
        if self._parent.get(child) != parent:
            self._static.pop(child, None)
            self._dynamic.pop(child, None)
            self._parent[child] = parent
            self._known.update((parent, child))
        if static:
            self._dynamic.pop(child, None)
            self._static[child] = _Rigid(translation, rotation)
            return TransformAdd.ADDED
        self._static.pop(child, None)
        cache = self._dynamic.get(child)
        if cache is None:
            cache = PoseBuffer(EDGE_CAPACITY, self._max_gap_ns, horizon_ns=self._cache_ns)
            self._dynamic[child] = cache
        result = cache.add(Pose(stamp, translation, rotation))
        if result in (AddResult.LATE, AddResult.INVALID):  # INVALID here: a repeated stamp
            return TransformAdd.LATE
        return TransformAdd.ADDED

    def lookup(self, target: str, source: str, stamp_ns: int) -> PoseLookup:
        """The pose of frame ``source`` in frame ``target`` at ``stamp_ns``.

        The returned pose's position is the source origin in the target frame and its
        orientation rotates source-frame vectors into the target frame (tf2's
        ``lookupTransform(target, source, time)``).

        Status: OK; WAIT while some edge of the chain has nothing at or after the stamp yet;
        UNCONNECTED while the frames are not joined by known edges (a later transform may join
        them); BEFORE_OLDEST or GAP when an edge can never serve the stamp (older than its
        cache, or its bracketing transforms further apart than ``max_gap``).
        """
        target, source = target.lstrip("/"), source.lstrip("/")
        stamp = int(stamp_ns)
        if target == source:
            return PoseLookup(Pose(stamp, np.zeros(3), _IDENTITY_Q.copy()), LookupStatus.OK)
        up_source, up_target = self._chain(source), self._chain(target)
        if up_source is None or up_target is None:
            return PoseLookup(None, LookupStatus.UNCONNECTED)
        on_target = {frame: i for i, frame in enumerate(up_target)}
        common = next((i for i, frame in enumerate(up_source) if frame in on_target), None)
        if common is None:
            return PoseLookup(None, LookupStatus.UNCONNECTED)
        source_in_common, status = self._compose(up_source[: common + 1], stamp)
        if status is not LookupStatus.OK:
            return PoseLookup(None, status)
        target_in_common, status = self._compose(
            up_target[: on_target[up_source[common]] + 1], stamp
        )
        if status is not LookupStatus.OK:
            return PoseLookup(None, status)
        pose = target_in_common.inverse().then(source_in_common)
        return PoseLookup(Pose(stamp, pose.translation, pose.rotation), LookupStatus.OK)

    # ------------------------------------------------------------------ the tree

    def _is_ancestor(self, frame: str, of: str) -> bool:
        """Whether ``frame`` is ``of`` or above it in the tree."""
        node: str | None = of
        for _ in range(MAX_DEPTH):
            if node is None:
                return False
            if node == frame:
                return True
            node = self._parent.get(node)
        return True  # deeper than any real tree: treat as a loop

    def _chain(self, frame: str) -> list[str] | None:
        """``frame`` and its ancestors up to the root; None for a frame nothing names."""
        if frame not in self._known:
            return None
        chain = [frame]
        for _ in range(MAX_DEPTH):
            parent = self._parent.get(chain[-1])
            if parent is None:
                return chain
            chain.append(parent)
        return None

    def _compose(self, chain: list[str], stamp: int) -> tuple[_Rigid, LookupStatus]:
        """The pose of ``chain[0]`` in ``chain[-1]`` (its ancestor) at ``stamp``.

        A permanent failure of any edge (BEFORE_OLDEST, GAP) outranks a WAIT of another: the
        lookup can then never succeed, so the reading need not wait.
        """
        pose = _IDENTITY
        waiting = False
        for child in reversed(chain[:-1]):  # from the top down
            edge = self._static.get(child)
            if edge is None:
                found = self._dynamic[child].lookup(stamp)
                if found.status is LookupStatus.WAIT:
                    waiting = True
                    continue
                if found.status is not LookupStatus.OK:
                    return _IDENTITY, found.status
                assert found.pose is not None
                edge = _Rigid(found.pose.position_m, found.pose.orientation_xyzw)
            pose = pose.then(edge)
        return pose, LookupStatus.WAIT if waiting else LookupStatus.OK
