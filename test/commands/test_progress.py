"""The command line's progress: a bar on a terminal, periodic lines in a log, an ETA."""

from __future__ import annotations

import io

import pytest

from gp_mapper.commands import progress as progress_module
from gp_mapper.commands.progress import LOG_PERIOD_S, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_terminal_a_line_comes_every_period_with_an_eta(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("fit vips", log)
    for step in range(1, 61):  # a minute of work reported every second
        clock.now += 1.0
        bar.update(step / 60, f"window {step}")
    bar.done("M=120")
    lines = log.getvalue().splitlines()
    assert len(lines) == 60 // int(LOG_PERIOD_S) + 1 and "\r" not in log.getvalue()
    first = int(LOG_PERIOD_S)
    assert lines[0] == f"fit vips: {100 * first / 60:3.0f} %  window {first}, ETA {60 - first} s"
    assert int(LOG_PERIOD_S) <= 5  # a line at least every 10 s while the work reports
    assert lines[-1] == "fit vips: done  M=120  (60.0 s)"


def test_on_a_terminal_the_bar_is_redrawn_in_place(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    tty = Terminal()
    bar = Progress("replay", tty)
    clock.now += 5.0
    bar.update(0.5)
    assert tty.getvalue().startswith("\rreplay [###############...............]  50%  ETA 5 s")
    bar.done()
    assert tty.getvalue().endswith("(5.0 s)\x1b[K\n")


@pytest.mark.parametrize("fraction", [-1.0, 0.0])
def test_no_eta_before_any_progress(monkeypatch, fraction: float) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("fit", log)
    clock.now += LOG_PERIOD_S
    bar.update(fraction)
    assert log.getvalue() == "fit:   0 %  \n"


def test_the_eta_counts_from_the_last_report_of_nothing_done(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("fit tiles", log)
    clock.now += 30.0  # a bag read and a first fit, before the counted work
    bar.update(0.0, "tiles 0/4")
    clock.now += 10.0
    bar.update(0.5, "tiles 2/4")
    assert log.getvalue().splitlines()[-1] == "fit tiles:  50 %  tiles 2/4, ETA 10 s"


def test_a_long_step_between_updates_still_shows_a_line_without_an_eta(monkeypatch) -> None:
    """A replay fits a window between two records: the heartbeat says how long it has run."""
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("replay walk", log)
    clock.now += LOG_PERIOD_S
    bar.update(0.5, "M=120")
    clock.now += 1.0
    bar.beat()  # the last update was a second ago: nothing to say
    assert log.getvalue().count("\n") == 1
    clock.now += 11.0
    bar.beat()
    last = log.getvalue().splitlines()[-1]
    assert last == "replay walk:  50 %  M=120, this step running for 12 s"
    assert "ETA" not in last
    clock.now += 1.0
    bar.beat()  # at most one line a period
    assert log.getvalue().count("\n") == 2


def test_the_heartbeat_thread_stops_with_the_work() -> None:
    log = io.StringIO()
    bar = Progress("replay", log, heartbeat=True)
    assert bar._thread is not None and bar._thread.is_alive()
    bar.done()
    assert bar._thread is None
    bar.close()  # idempotent
    assert log.getvalue().startswith("replay: done")


def test_a_first_line_comes_at_once(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("fit cagp", log)
    bar.start("reading 17794 readings of aalto12")
    assert log.getvalue() == "fit cagp:   0 %  reading 17794 readings of aalto12\n"
    clock.now += 1.0
    bar.update(0.1, "epoch 1")  # the period counts from the first line
    assert log.getvalue().count("\n") == 1


def test_the_heartbeat_writes_the_latest_report_within_the_period(monkeypatch) -> None:
    """Reports every 2 s are rate-limited to one line per period; when they stop, the last
    one's state is written within the period, not a period after the last report."""
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    log = io.StringIO()
    bar = Progress("fit", log)
    bar.start("pre-fit")
    clock.now += 2.0
    bar.update(0.0, "evaluation 2")
    clock.now += 2.0
    bar.update(0.0, "evaluation 4")  # 4 s since the last line: not written
    assert log.getvalue().count("\n") == 1
    clock.now += LOG_PERIOD_S - 4.0
    bar.beat()
    assert log.getvalue().splitlines()[-1] == "fit:   0 %  evaluation 4"
    clock.now += LOG_PERIOD_S
    bar.beat()
    assert log.getvalue().splitlines()[-1] == "fit:   0 %  evaluation 4, this step running for 6 s"
