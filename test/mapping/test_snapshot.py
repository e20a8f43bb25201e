from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.mapping import GridSpec, MapSnapshot

GRID = GridSpec((0.0, 0.0), 0.5, (2, 3))


def make(**overrides) -> MapSnapshot:
    fields = {
        "seq": 1,
        "stamp_ns": 5,
        "grid": GRID,
        "mean": np.arange(6.0).reshape(2, 3),
        "variance": np.full((2, 3), 10.0),
        "prior_variance": np.full((2, 3), 100.0),
        "support_m": np.zeros((4, 2)),
        "trajectory_m": [[0.0, 0.0], [1.0, 0.5]],
        "report": {"accepted": True},
        "num_samples": 40,
    }
    fields.update(overrides)
    return MapSnapshot(**fields)


def test_snapshot_arrays_are_read_only_private_copies() -> None:
    mean = np.arange(6.0).reshape(2, 3)
    snapshot = make(mean=mean)
    mean[0, 0] = 99.0
    assert snapshot.mean[0, 0] == 0.0
    with pytest.raises(ValueError, match="read-only"):
        snapshot.variance[0, 0] = 1.0
    with pytest.raises(AttributeError):
        snapshot.seq = 2  # type: ignore[misc]
    assert snapshot.trajectory_m.shape == (2, 2) and snapshot.num_inducing == 4


def test_snapshot_checks_shapes() -> None:
    with pytest.raises(ValueError, match="grid"):
        make(mean=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="support_m"):
        make(support_m=np.zeros(4))


def test_unknown_uses_the_variance_ratio() -> None:
    snapshot = make(variance=np.array([[10.0, 95.0, 50.0], [91.0, 89.0, 0.0]]))
    np.testing.assert_array_equal(
        snapshot.unknown(0.9), [[False, True, False], [True, False, False]]
    )


def test_vector_snapshot_carries_read_only_components() -> None:
    field = np.arange(18.0).reshape(2, 3, 3)
    snapshot = make(field_mean=field, field_variance=np.ones((2, 3, 3)))
    assert snapshot.is_vector and not make().is_vector
    field[0, 0, 0] = 99.0
    assert snapshot.field_mean[0, 0, 0] == 0.0
    with pytest.raises(ValueError, match="read-only"):
        snapshot.field_variance[0, 0, 0] = 2.0
    with pytest.raises(ValueError, match="field_mean has shape"):
        make(field_mean=np.zeros((2, 3)), field_variance=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="come together"):
        make(field_mean=np.zeros((2, 3, 3)))
