from __future__ import annotations

import numpy as np
import pytest

from gp_mapper.mapping import DropCounts, Sample, Window, Windower, merge_windows, target_value

MS = 1_000_000  # ns per ms


def make(**kwargs) -> tuple[Windower, DropCounts]:
    drops = DropCounts()
    options = {
        "batch_size": 5,
        "batch_period_ns": 1000 * MS,
        "input_dims": 2,
        "target": "norm",
        "min_spacing_m": 0.0,
    }
    options.update(kwargs)
    return Windower(**options, drops=drops), drops


def sample(t_ms: int, x: float, y: float = 0.0, z: float = 0.5, b=(3.0, 4.0, 12.0)) -> Sample:
    return Sample(t_ms * MS, np.array([x, y, z]), np.asarray(b, dtype=float))


def test_window_closes_at_batch_size() -> None:
    windower, _ = make(batch_size=3)
    closed = [w for k in range(7) for w in windower.add(sample(10 * k, 0.1 * k))]
    assert [len(w.y) for w in closed] == [3, 3]
    first = closed[0]
    assert first.X.shape == (3, 2) and first.start_ns == 0 and first.end_ns == 20 * MS
    np.testing.assert_allclose(first.X[:, 0], [0.0, 0.1, 0.2])
    np.testing.assert_allclose(first.y, 13.0)  # |(3, 4, 12)|
    assert windower.open_samples == 1
    last = windower.flush()
    assert last is not None and len(last.y) == 1 and windower.flush() is None


def test_window_closes_after_batch_period_of_stamp_time() -> None:
    windower, _ = make(batch_size=100, batch_period_ns=100 * MS)
    closed = []
    for k in range(25):  # 10 ms apart
        closed += windower.add(sample(10 * k, 0.1 * k))
    assert [len(w.y) for w in closed] == [10, 10]
    # The sample 100 ms after the window's first opens the next window.
    assert closed[0].end_ns == 90 * MS and closed[1].start_ns == 100 * MS


def test_windows_wait_for_first_window_min_samples_until_theta_is_fitted() -> None:
    windower, _ = make(batch_size=100, batch_period_ns=100 * MS, first_window_min=15)
    closed = []
    for k in range(35):  # 10 ms apart: 10 per period
        closed += windower.add(sample(10 * k, 0.1 * k))
    # θ awaits its first fit: each window runs past its period to 15 samples.
    assert [len(w.y) for w in closed] == [15, 15]
    assert closed[1].start_ns == 150 * MS
    # Once a fit has been accepted, windows close on time.
    windower.await_first_fit(False)
    closed = [w for k in range(35, 60) for w in windower.add(sample(10 * k, 0.1 * k))]
    assert [len(w.y) for w in closed] == [10, 10]
    # A loaded, fitted map goes on: its windows close on time.
    windower.clear(awaiting_fit=False)
    closed = [w for k in range(60, 72) for w in windower.add(sample(10 * k, 0.1 * k))]
    assert [len(w.y) for w in closed] == [10]
    # A reset starts a new map: its windows wait again.
    windower.clear()
    closed = [w for k in range(72, 90) for w in windower.add(sample(10 * k, 0.1 * k))]
    assert [len(w.y) for w in closed] == [15]
    # batch_size and the end of input close it in any case.
    windower, _ = make(batch_size=4, batch_period_ns=100 * MS, first_window_min=15)
    assert [len(w.y) for k in range(5) for w in windower.add(sample(50 * k, k))] == [4]
    windower, _ = make(batch_size=100, batch_period_ns=100 * MS, first_window_min=15)
    for k in range(3):
        assert windower.add(sample(50 * k, k)) == []
    last = windower.flush()
    assert last is not None and len(last.y) == 3


def test_a_stationary_robot_closes_windows_on_time_and_drops_repeats() -> None:
    windower, drops = make(batch_size=400, batch_period_ns=1000 * MS)
    closed = []
    for k in range(5000):  # 10 s at 500 Hz, standing still
        closed += windower.add(sample(2 * k, 1.0, 2.0))
    assert drops.duplicate == 4999
    # The first window holds the one kept sample and closes after 1 s of stamps.
    assert len(closed) == 1 and len(closed[0].y) == 1
    assert windower.open_samples == 0


def test_min_spacing_thins_against_the_last_kept_sample() -> None:
    windower, drops = make(batch_size=100, min_spacing_m=0.25)
    for k in range(11):  # 0.1 m apart
        windower.add(sample(10 * k, 0.1 * k))
    window = windower.flush()
    np.testing.assert_allclose(window.X[:, 0], [0.0, 0.3, 0.6, 0.9])
    assert drops.duplicate == 7


def test_three_dimensional_inputs_and_thinning_in_3d() -> None:
    windower, drops = make(batch_size=100, input_dims=3)
    windower.add(sample(0, 0.0, z=0.0))
    windower.add(sample(10, 0.0, z=1.0))  # same (x, y), different height: kept
    window = windower.flush()
    assert window.X.shape == (2, 3) and drops.duplicate == 0
    np.testing.assert_allclose(window.X[:, 2], [0.0, 1.0])


@pytest.mark.parametrize(("target", "value"), [("norm", 13.0), ("x", 3.0), ("y", 4.0), ("z", 12.0)])
def test_targets(target: str, value: float) -> None:
    assert target_value(np.array([3.0, 4.0, 12.0]), target) == pytest.approx(value)
    windower, _ = make(target=target)
    windower.add(sample(0, 0.0))
    assert windower.flush().y[0] == pytest.approx(value)


def test_batch_size_one_can_close_two_windows_at_once() -> None:
    windower, _ = make(batch_size=1, batch_period_ns=100 * MS)
    assert len(windower.add(sample(0, 0.0))) == 1
    windower, _ = make(batch_size=2, batch_period_ns=100 * MS)
    windower.add(sample(0, 0.0))
    # The period closes the one-sample window; the new sample waits in the next one.
    assert [len(w.y) for w in windower.add(sample(150, 1.0))] == [1]


def test_merge_windows() -> None:
    a = Window(np.zeros((2, 2)), np.array([1.0, 2.0]), 10, 20)
    b = Window(np.ones((3, 2)), np.array([3.0, 4.0, 5.0]), 30, 40)
    merged = merge_windows(a, b)
    assert merged.X.shape == (5, 2) and merged.start_ns == 10 and merged.end_ns == 40
    np.testing.assert_allclose(merged.y, [1, 2, 3, 4, 5])


def test_clear_forgets_the_last_kept_position() -> None:
    windower, drops = make()
    windower.add(sample(0, 1.0))
    windower.clear()
    windower.add(sample(10, 1.0))
    assert drops.duplicate == 0 and windower.open_samples == 1


def test_constructor_checks() -> None:
    for kwargs, match in (
        ({"batch_size": 0}, "batch_size"),
        ({"batch_period_ns": 0}, "batch_period_ns"),
        ({"input_dims": 4}, "input_dims"),
        ({"target": "w"}, "target"),
    ):
        with pytest.raises(ValueError, match=match):
            make(**kwargs)
    with pytest.raises(ValueError, match="target"):
        target_value(np.ones(3), "w")


def test_windows_keep_each_samples_stamp_and_orientation() -> None:
    # Later models take time and heading as inputs: a window carries both per sample.
    w, _ = make(batch_size=3)
    turn = np.array([0.0, 0.0, np.sin(0.25), np.cos(0.25)])
    w.add(Sample(1 * MS, np.array([0.0, 0.0, 0.5]), np.ones(3), turn))
    w.add(sample(2, 1.0))  # no orientation known
    (window,) = w.add(Sample(3 * MS, np.array([2.0, 0.0, 0.5]), np.ones(3), turn))
    np.testing.assert_array_equal(window.stamps_ns, [1 * MS, 2 * MS, 3 * MS])
    np.testing.assert_array_equal(window.orientation_xyzw[0], turn)
    assert np.isnan(window.orientation_xyzw[1]).all()
    merged = merge_windows(window, window)
    assert merged.stamps_ns.shape == (6,) and merged.orientation_xyzw.shape == (6, 4)


def test_vector_target_is_the_map_frame_field() -> None:
    b = np.array([3.0, 4.0, 12.0])
    value = target_value(b, "vector")
    np.testing.assert_array_equal(value, b)
    assert value.dtype == np.float64 and value is not b  # a copy: the sample stays the caller's
    windower, _ = make(target="vector", batch_size=3)
    (window,) = [w for k in range(3) for w in windower.add(sample(10 * k, 0.1 * k, b=b + k))]
    assert window.y.shape == (3, 3) and window.y.dtype == np.float64
    np.testing.assert_array_equal(window.y, b + np.arange(3)[:, None])
    merged = merge_windows(window, window)
    assert merged.y.shape == (6, 3)


def test_vector_target_rotates_each_reading_as_the_component_targets_do() -> None:
    # Poses turning about a tilted axis; the readings (sensor frame, tesla) between them are
    # rotated into the map frame with the slerped orientation, as by hand with scipy.
    from scipy.spatial.transform import Rotation, Slerp

    from gp_mapper.mapping import FieldReading, Pairer, Pose, PoseBuffer

    rng = np.random.default_rng(1058390)
    rotations = Rotation.from_rotvec(np.outer(np.linspace(0.0, 1.2, 6), [0.3, -0.5, 0.8]))
    stamps_ms = 100 * np.arange(6)
    fields_t = 1e-6 * (np.array([20.0, -5.0, -45.0]) + rng.normal(size=(5, 3)))
    windows = {}
    for target in ("vector", "x", "y", "z"):
        drops = DropCounts()
        pairer = Pairer(PoseBuffer(100, 200 * MS, 10.0), drops, pose_wait_ns=500 * MS)
        windower = Windower(
            batch_size=100, batch_period_ns=10_000 * MS, input_dims=2, target=target,
            min_spacing_m=0.0, drops=drops,
        )  # fmt: skip
        for k, t in enumerate(stamps_ms):
            q = rotations[k].as_quat()  # (x, y, z, w)
            for s in pairer.add_pose(Pose(int(t) * MS, np.array([0.1 * k, 0.0, 0.0]), q)):
                windower.add(s)
            if k < 5:
                reading = FieldReading(int(t + 50) * MS, fields_t[k], "imu")
                for s in pairer.add_reading(reading):
                    windower.add(s)
        windows[target] = windower.flush()
        assert drops.total() == 0
    vector = windows["vector"].y
    assert vector.shape == (5, 3)
    mid = Slerp(stamps_ms, rotations)(stamps_ms[:5] + 50.0)
    np.testing.assert_allclose(vector, mid.apply(1e6 * fields_t), rtol=1e-12, atol=1e-12)
    for k, axis in enumerate("xyz"):  # bit for bit the component targets
        np.testing.assert_array_equal(vector[:, k], windows[axis].y)
