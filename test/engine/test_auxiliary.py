"""The auxiliary model inputs (yaw, run label, time), built in one place for every caller."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.engine.auxiliary import auxiliary_columns, run_labels
from gp_mapper.engine.warmup import _with_auxiliary
from gp_mapper.io.bag_convert import SEQUENCE_GAP_S
from gp_mapper.io.heading import yaw_to_quaternion
from gp_mapper.mapping.inputs import CollectedSamples
from gp_mapper.mapping.records import Window
from gp_mapper.mapping.windowing import window_model_inputs

NS = 1_000_000_000


def samples(stamps_s: np.ndarray, yaw: np.ndarray) -> CollectedSamples:
    n = len(stamps_s)
    xy = np.column_stack([np.linspace(0.0, 1.0, n), np.zeros(n)])
    return CollectedSamples(
        xy, np.zeros(n), (np.asarray(stamps_s) * NS).astype(np.int64), yaw_to_quaternion(yaw),
        np.empty((0, 2)), {},
    )  # fmt: skip


def test_runs_split_at_the_conversion_gap() -> None:
    # Three runs at 50 Hz laid SEQUENCE_GAP_S apart, as `convert aalto` writes them.
    parts, start = [], 0.0
    for length in (3.0, 1.0, 2.0):
        t = start + np.arange(0.0, length, 0.02)
        parts.append(t)
        start = t[-1] + SEQUENCE_GAP_S
    stamps = np.concatenate(parts)
    labels = run_labels((stamps * NS).astype(np.int64), SEQUENCE_GAP_S)
    expected = np.concatenate([np.full(len(p), float(i)) for i, p in enumerate(parts)])
    np.testing.assert_array_equal(labels, expected)
    with pytest.raises(ValueError, match="gap_s must be positive"):
        run_labels(np.zeros(3, np.int64), 0.0)


def test_a_fit_gets_the_columns_in_the_order_asked_time_from_the_first_sample() -> None:
    yaw = np.array([0.1, -2.0, 3.0, 1.0])
    s = samples(np.array([10.0, 10.5, 20.0, 20.5]), yaw)
    widened = s.with_auxiliary_inputs(("yaw", "run", "time"), run_gap_s=5.0)
    cols = widened.X[:, 2:]
    np.testing.assert_allclose(cols[:, 0], yaw, atol=1e-12)
    np.testing.assert_array_equal(cols[:, 1], [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(cols[:, 2], [0.0, 0.5, 10.0, 10.5])
    assert s.with_auxiliary_inputs((), 5.0) is s
    with pytest.raises(ValueError, match="unknown auxiliary inputs"):
        s.with_auxiliary_inputs(("speed",), 5.0)


def test_yaw_falls_back_to_the_direction_of_travel() -> None:
    s = samples(np.arange(20) * 0.1, np.zeros(20))
    s = s._replace(orientation_xyzw=np.full((20, 4), np.nan))  # poses without orientation
    yaw = s.with_auxiliary_inputs(("yaw",), 5.0).X[:, 2]
    np.testing.assert_allclose(yaw, 0.0, atol=1e-9)  # the track runs along +x


def test_a_window_gets_the_same_yaw_rule_and_the_stamp_as_time() -> None:
    n = 20
    stamps = (1_700_000_000.0 + np.arange(n) * 0.1) * NS
    orientation = np.full((n, 4), np.nan)
    orientation[:5] = yaw_to_quaternion(np.full(5, 1.0))  # a pose with yaw, then none
    xy = np.column_stack([np.zeros(n), np.linspace(0.0, 2.0, n)])  # driving along +y
    window = Window(
        X=xy, y=np.zeros(n), start_ns=int(stamps[0]), end_ns=int(stamps[-1]),
        stamps_ns=stamps.astype(np.int64), orientation_xyzw=orientation,
    )  # fmt: skip
    X = window_model_inputs(window, ("yaw", "time"))
    np.testing.assert_allclose(X[:5, 2], 1.0, atol=1e-12)
    np.testing.assert_allclose(X[5:, 2], np.pi / 2, atol=1e-9)
    np.testing.assert_allclose(X[:, 3], stamps / NS)
    same = auxiliary_columns(("yaw", "time"), xy, window.stamps_ns, orientation)
    np.testing.assert_array_equal(X[:, 2:], same)
    bare = window._replace(stamps_ns=None)
    with pytest.raises(ValueError, match="no stamps or orientations"):
        window_model_inputs(bare, ("time",))


def test_the_warm_up_builds_its_columns_the_same_way() -> None:
    engine = build_model(EngineSpec(model="gam_stream"), 2)
    X = torch.rand(32, 2, dtype=torch.float64)
    widened = _with_auxiliary(engine, X)
    assert widened.shape == (32, 2 + len(engine.auxiliary_inputs))
    assert torch.isfinite(widened).all()
