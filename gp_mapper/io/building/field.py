"""The floor's true field: a uniform Earth field plus dipoles buried below the walking plane."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..synthetic import ANOMALY_PEAK_UT, EARTH_FIELD_UT
from .plan import DEFAULT_FLOOR_SIZE_M, FloorPlan, _office_plan

# Buried sources in three populations: (min depth m, max depth m, sources per 100 m² of floor).
# A dipole's anomaly on the plane spreads over about its depth, so the depths set the 0.3-3 m
# scales; the densities make the shallow, small anomalies common (rebar, conduits and cables in
# the slab), the middle ones occasional (pipes, ducts, machines under the floor) and the deep,
# wide ones rare (structural steel).
SOURCE_POPULATIONS: tuple[tuple[float, float, float], ...] = (
    (0.3, 0.8, 10.0),
    (0.8, 1.8, 2.0),
    (1.8, 3.0, 0.4),
)
# A source is left out of the sum where even its largest possible field, 2|m| / r³, is below
# this (µT): it keeps the sum local (fast) and changes the field by far less than the noise.
FIELD_CUTOFF_UT = 0.01
# Side of the square tiles the points are grouped in to find the sources near them, m (about
# the fastest: smaller tiles gain few sources and lose to the per-tile overhead).
FIELD_TILE_M = 3.0
# Points x sources evaluated at once: keeps the temporaries (a few MB) in cache.
MAX_PAIRS_PER_BLOCK = 2**16
# Horizontal offsets (in source depths) searched for a source's peak on the plane, and the step.
PEAK_SEARCH_HALF_WIDTH = 2.0
PEAK_SEARCH_STEP = 1e-3


@dataclass(frozen=True, eq=False)
class BuildingWorld:
    """An office floor and its magnetic field: a uniform Earth field plus buried dipoles.

    Attributes:
        plan: the floor plan.
        earth_field_ut: [3] uniform background field, µT, map frame.
        source_positions_m: [P, 3] dipole positions (z < 0: below the walking plane), metres.
        source_moments: [P, 3] dipole moments scaled so that B = (3 (m.r^) r^ - m) / |r|^3 is
            in µT with r in metres (units µT m^3).
        source_cutoffs_m: [P] distance beyond which a source is left out of the sum (its field
            is below ``FIELD_CUTOFF_UT`` there), metres.
        seed: the seed the world was made with.
    """

    plan: FloorPlan
    earth_field_ut: np.ndarray
    source_positions_m: np.ndarray
    source_moments: np.ndarray
    source_cutoffs_m: np.ndarray
    seed: int = 0

    @property
    def size_m(self) -> tuple[float, float]:
        """(width, depth) of the floor, metres."""
        return self.plan.size_m

    def field_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field at points (which must not sit on a source).

        Sources are looked up per tile of ``FIELD_TILE_M``; each one's term is exact within
        its cutoff distance and left out beyond it, so a point's value does not depend (beyond
        rounding) on the other points asked for.

        Args:
            points_m: [N, 2] (x, y) on the walking plane z = 0, or [N, 3] (x, y, z), metres.

        Returns:
            [N, 3] field in µT, map frame.
        """
        p = np.asarray(points_m, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] not in (2, 3):
            raise ValueError(f"expected points [N, 2] or [N, 3], got {p.shape}")
        if p.shape[1] == 2:
            p = np.column_stack([p, np.zeros(p.shape[0])])
        total = np.broadcast_to(self.earth_field_ut, p.shape).copy()
        if p.shape[0] == 0:
            return total
        tile = np.floor(p[:, :2] / FIELD_TILE_M).astype(np.int64)
        tile -= tile.min(axis=0)
        key = tile[:, 0] * (int(tile[:, 1].max()) + 1) + tile[:, 1]
        order = np.argsort(key, kind="stable")
        starts = np.flatnonzero(np.diff(key[order], prepend=-1))
        ends = np.append(starts[1:], order.size)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            rows = order[start:end]
            near = self._sources_near_tile(p[rows[0], :2])
            if near.size == 0:
                continue
            block = max(1, MAX_PAIRS_PER_BLOCK // near.size)
            for first in range(0, rows.size, block):
                chunk = rows[first : first + block]
                total[chunk] += self._dipole_sum(p[chunk], near)
        return total

    def norm_at(self, points_m: np.ndarray) -> np.ndarray:
        """The field magnitude ||B|| at points [N, 2] or [N, 3] (metres) -> [N] µT."""
        return np.linalg.norm(self.field_at(points_m), axis=1)

    def _sources_near_tile(self, point_m: np.ndarray) -> np.ndarray:
        """Indices of the sources whose cutoff reaches the tile holding ``point_m`` [2]."""
        lo = np.floor(point_m / FIELD_TILE_M) * FIELD_TILE_M
        hi = lo + FIELD_TILE_M
        xy = self.source_positions_m[:, :2]
        # Horizontal distance to the tile bounds the 3-D distance from below for any z.
        gap = np.maximum(np.maximum(lo - xy, xy - hi), 0.0)
        return np.flatnonzero(np.sum(gap**2, axis=1) < self.source_cutoffs_m**2)

    def _dipole_sum(self, points: np.ndarray, sources: np.ndarray) -> np.ndarray:
        """Sum of the fields of ``sources`` [K] at ``points`` [n, 3] within their cutoffs."""
        q = self.source_positions_m[sources]  # [K, 3]
        m = self.source_moments[sources]  # [K, 3]
        r = points[:, None, :] - q[None, :, :]  # [n, K, 3]
        r2 = np.einsum("nki,nki->nk", r, r)
        inv_r2 = 1.0 / r2
        inv_r3 = inv_r2 * np.sqrt(inv_r2)
        inv_r3 *= r2 < self.source_cutoffs_m[sources] ** 2
        mr = np.einsum("nki,ki->nk", r, m)
        radial = np.einsum("nk,nki->ni", 3.0 * mr * inv_r2 * inv_r3, r)
        return radial - inv_r3 @ m


def make_building_world(
    seed: int = 0, size_m: tuple[float, float] = DEFAULT_FLOOR_SIZE_M
) -> BuildingWorld:
    """Build an office floor and a random but reproducible field: same seed, same world.

    Args:
        seed: seed of the sources' positions, depths, directions and strengths.
        size_m: (width, depth) of the floor, metres; the plan scales with it.

    Returns:
        The world.

    Raises:
        ValueError: the floor is too small for the layout.
    """
    plan = _office_plan(size_m)
    rng = np.random.default_rng(seed)
    width, depth = plan.size_m
    area_100m2 = width * depth / 100.0
    positions, moments = [], []
    for lo, hi, per_100m2 in SOURCE_POPULATIONS:
        count = round(per_100m2 * area_100m2)
        xy = rng.uniform((0.0, 0.0), (width, depth), size=(count, 2))
        below = rng.uniform(lo, hi, size=count)
        direction = _unit_vectors(rng, count)
        peak = rng.uniform(*ANOMALY_PEAK_UT, size=count)
        positions.append(np.column_stack([xy, -below]))
        # |B| on the plane peaks at |m| g / depth³ (g from the direction): scale |m| for the peak.
        moments.append(direction * (peak * below**3 / _plane_peak_factor(direction))[:, None])
    moment = np.vstack(moments)
    cutoff = np.cbrt(2.0 * np.linalg.norm(moment, axis=1) / FIELD_CUTOFF_UT)
    return BuildingWorld(
        plan=plan,
        earth_field_ut=np.array(EARTH_FIELD_UT, dtype=np.float64),
        source_positions_m=np.vstack(positions),
        source_moments=moment,
        source_cutoffs_m=cutoff,
        seed=seed,
    )


def _plane_peak_factor(direction: np.ndarray) -> np.ndarray:
    """max |B| on a plane 1 m above a unit dipole of each direction [P, 3] -> [P].

    By symmetry the peak lies in the vertical plane through the moment; along it
    |B| = sqrt(1 + 3 (m^.r^)²) / |r|³ with r = (x, 1).
    """
    horizontal = np.hypot(direction[:, 0], direction[:, 1])[:, None]
    vertical = direction[:, 2:3]
    x = np.arange(
        -PEAK_SEARCH_HALF_WIDTH, PEAK_SEARCH_HALF_WIDTH + PEAK_SEARCH_STEP / 2, PEAK_SEARCH_STEP
    )
    r2 = x**2 + 1.0
    cos2 = (horizontal * x + vertical) ** 2 / r2
    return np.max(np.sqrt(1.0 + 3.0 * cos2) / r2**1.5, axis=1)


def _unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` directions uniform on the sphere, [count, 3]."""
    v = rng.normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)
