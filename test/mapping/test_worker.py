from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from gp_mapper.mapping import SingleFlightWorker, Window, WindowJob
from gp_mapper.mapping.worker import thin_window

TIMEOUT_S = 10.0  # generous: only reached if the worker is broken


def job(n: int, start: int, generation: int = 0) -> WindowJob:
    window = Window(np.full((n, 2), float(start)), np.arange(start, start + n, dtype=float),
                    start, start + n - 1)  # fmt: skip
    return WindowJob(window, generation, float(start))


class Recorder:
    """A process function that can be held inside a job, to make the worker busy on purpose."""

    def __init__(self) -> None:
        self.seen: list[WindowJob] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_on: set[int] = set()

    def __call__(self, item: WindowJob) -> None:
        self.seen.append(item)
        self.entered.set()
        assert self.release.wait(TIMEOUT_S)
        if item.window.start_ns in self.fail_on:
            raise RuntimeError("engine exploded")


def busy_worker(
    merge_cap: int, backlog_cap: int | None = None
) -> tuple[SingleFlightWorker, Recorder]:
    recorder = Recorder()
    worker = SingleFlightWorker(recorder, merge_cap=merge_cap, backlog_cap=backlog_cap)
    recorder.release.clear()
    worker.submit(job(3, 0))
    assert recorder.entered.wait(TIMEOUT_S)
    return worker, recorder


def test_jobs_are_processed_in_order() -> None:
    recorder = Recorder()
    worker = SingleFlightWorker(recorder, merge_cap=100)
    for start in (0, 10, 20):
        worker.submit(job(2, start))
        assert worker.wait_idle(TIMEOUT_S)
    assert [item.window.start_ns for item in recorder.seen] == [0, 10, 20]
    worker.close()


def test_windows_arriving_while_busy_are_merged_then_thinned_past_the_cap() -> None:
    worker, recorder = busy_worker(merge_cap=10)
    assert worker.busy and worker.processing_samples == 3
    assert worker.submit(job(4, 100)) == 0
    assert worker.submit(job(4, 200)) == 0  # merged: 8 <= 10
    assert worker.pending == 1 and worker.merged == 1
    assert worker.submit(job(4, 300)) == 2  # 12 > 10: no window is dropped, 2 samples thinned
    assert worker.pending_samples == 10 and worker.thinned == 2 and worker.merged == 2
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    assert len(recorder.seen) == 2
    merged = recorder.seen[1].window
    # Every window still has samples in the map; the first and the last sample are kept.
    assert {100, 200, 300} <= {int(v) // 100 * 100 for v in merged.y}
    assert merged.y[0] == 100 and merged.y[-1] == 303
    assert worker.processing_samples == 0
    worker.close()


def test_a_burst_of_windows_reaches_the_engine_with_nothing_dropped() -> None:
    worker, recorder = busy_worker(merge_cap=1000)
    for start in range(100, 2100, 100):  # 20 windows while the engine is busy
        assert worker.submit(job(10, start)) == 0
    assert worker.pending == 1 and worker.merged == 19
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    assert sum(len(item.window.y) for item in recorder.seen[1:]) == 200
    assert worker.thinned == 0
    worker.close()


def test_a_full_waiting_window_closes_and_the_backlog_is_worked_off_in_order() -> None:
    worker, recorder = busy_worker(merge_cap=10, backlog_cap=25)
    for start in range(100, 700, 100):  # 6 windows of 4 while the engine is busy: 24 <= 25
        assert worker.submit(job(4, start)) == 0
    assert worker.pending == 3 and worker.pending_samples == 24 and worker.merged == 3
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    assert [len(item.window.y) for item in recorder.seen] == [3, 8, 8, 8]
    mapped = np.concatenate([item.window.y for item in recorder.seen[1:]])
    expected = np.concatenate([np.arange(start, start + 4) for start in range(100, 700, 100)])
    np.testing.assert_array_equal(mapped, expected)  # every sample, oldest first
    assert worker.thinned == 0 and worker.pending_samples == 0
    worker.close()


def test_past_the_backlog_cap_the_newest_waiting_window_is_thinned() -> None:
    worker, recorder = busy_worker(merge_cap=10, backlog_cap=20)
    lost = [worker.submit(job(6, start)) for start in range(100, 500, 100)]
    # Three windows of 6 wait (6 + 6 > 10 each time); the fourth would make 24 > 20, so it is
    # merged into the newest and the 12 thinned to the 8 the backlog has room for.
    assert lost == [0, 0, 0, 4] and worker.thinned == 4
    assert worker.pending == 3 and worker.pending_samples == 20
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    assert [len(item.window.y) for item in recorder.seen] == [3, 6, 6, 8]
    newest = recorder.seen[3].window.y
    assert newest[0] == 300 and newest[-1] == 405  # both windows' ends are kept
    assert worker.submit(job(2, 900, generation=1)) == 0
    worker.close()


def test_a_new_generation_drops_the_whole_backlog() -> None:
    worker, recorder = busy_worker(merge_cap=4, backlog_cap=100)
    for start in (100, 200, 300):
        worker.submit(job(4, start))
    assert worker.pending == 3
    assert worker.submit(job(2, 400, generation=1)) == 12
    assert worker.pending == 1 and worker.pending_samples == 2
    assert worker.discard_pending() == 2
    recorder.release.set()
    worker.close(TIMEOUT_S)


def test_thin_window_keeps_an_even_spread_and_the_ends() -> None:
    n = 101
    window = Window(np.arange(2.0 * n).reshape(n, 2), np.arange(n, dtype=float), 1000,
                    1000 + n - 1, np.arange(1000, 1000 + n), np.zeros((n, 4)))  # fmt: skip
    thin = thin_window(window, 11)
    np.testing.assert_array_equal(thin.y, np.arange(0.0, 101.0, 10.0))
    np.testing.assert_array_equal(thin.X[:, 0], 2.0 * thin.y)
    np.testing.assert_array_equal(thin.stamps_ns, 1000 + thin.y.astype(int))
    assert (thin.start_ns, thin.end_ns) == (1000, 1100) and thin.orientation_xyzw.shape == (11, 4)
    assert thin_window(window, 500) is window


def test_merged_window_keeps_order_and_earliest_close_time() -> None:
    worker, recorder = busy_worker(merge_cap=100)
    worker.submit(job(2, 100))
    worker.submit(job(3, 200))
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    merged = recorder.seen[1]
    np.testing.assert_array_equal(merged.window.y, [100, 101, 200, 201, 202])
    assert merged.window.start_ns == 100 and merged.window.end_ns == 202
    assert merged.closed_s == 100.0
    worker.close()


def test_jobs_of_another_generation_are_not_merged() -> None:
    worker, recorder = busy_worker(merge_cap=100)
    worker.submit(job(2, 100, generation=0))
    assert worker.submit(job(2, 200, generation=1)) == 2
    recorder.release.set()
    worker.close()


def test_an_exception_is_logged_and_the_thread_lives_on(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    recorder.fail_on = {0}
    worker = SingleFlightWorker(recorder, merge_cap=100)
    with caplog.at_level(logging.ERROR, logger="gp_mapper.mapping.worker"):
        worker.submit(job(2, 0))
        assert worker.wait_idle(TIMEOUT_S)
    assert any("engine exploded" in (r.exc_text or "") for r in caplog.records)
    worker.submit(job(2, 10))
    assert worker.wait_idle(TIMEOUT_S)
    assert [item.window.start_ns for item in recorder.seen] == [0, 10]
    worker.close()


def test_wait_idle_times_out_while_busy_and_discard_pending() -> None:
    worker, recorder = busy_worker(merge_cap=100)
    worker.submit(job(5, 100))
    assert not worker.wait_idle(0.05)
    assert worker.discard_pending() == 5 and worker.pending == 0
    recorder.release.set()
    assert worker.wait_idle(TIMEOUT_S)
    assert len(recorder.seen) == 1
    worker.close()


def test_close_discards_the_waiting_job_and_refuses_more() -> None:
    worker, recorder = busy_worker(merge_cap=100)
    worker.submit(job(5, 100))
    worker.close(timeout=0.0)  # stops at once; the job in progress is still held
    recorder.release.set()
    worker.close(TIMEOUT_S)
    assert len(recorder.seen) == 1
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(job(1, 0))
    with pytest.raises(ValueError, match="merge_cap"):
        SingleFlightWorker(recorder, merge_cap=0)
