from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.mapping import Trajectory


def test_points_closer_than_the_spacing_are_skipped() -> None:
    trajectory = Trajectory(cap=100, spacing_m=0.1)
    for x in np.arange(0.0, 1.0, 0.03):
        trajectory.add(x, 0.0)
    xs = trajectory.as_array()[:, 0]
    assert xs[0] == 0.0 and np.all(np.diff(xs) >= 0.1 - 1e-12)


def test_cap_decimates_and_keeps_the_whole_path() -> None:
    trajectory = Trajectory(cap=10, spacing_m=0.1)
    for x in np.arange(0.0, 100.0, 0.1):
        trajectory.add(float(x), 0.0)
    points = trajectory.as_array()
    assert len(points) < 10
    assert points[0, 0] == 0.0 and points[-1, 0] > 80.0  # the start survives, the end is recent
    assert trajectory.spacing_m > 0.1


def test_load_and_clear() -> None:
    trajectory = Trajectory(cap=4, spacing_m=0.1)
    trajectory.load(np.arange(12.0).reshape(6, 2))
    assert len(trajectory) < 4
    trajectory.clear()
    assert len(trajectory) == 0 and trajectory.spacing_m == 0.1
    with pytest.raises(ValueError, match="cap"):
        Trajectory(cap=1)
