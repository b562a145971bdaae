"""The live line of a run's progress keeps its clock running while no report arrives, and
Ctrl-C while waiting stops the run before the last line."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest
from rich.console import Console

from tandem.train.progress import RunProgress, wait_with_progress


def _drawn(p: RunProgress) -> str:
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(p._live.get_renderable())
    return out.getvalue()


def test_waiting_line_clock_runs_between_reports():
    now = [100.0]
    p = RunProgress("run", "/r", tty=True, out=io.StringIO(), clock=lambda: now[0])
    p.start()
    try:
        first = _drawn(p)
        assert "waiting for the first report" in first and "0.0 s" in first
        now[0] += 3.5  # no report in between: the same line, a later time
        later = _drawn(p)
        assert "waiting for the first report" in later and "3.5 s" in later
        p.on_report({"loss": 0.5})
        now[0] += 1.0
        assert "loss=0.5" in _drawn(p) and "4.5 s" in _drawn(p)
    finally:
        p.end("FINISHED")
    assert p._live is None


class _InterruptedRun:
    """A run whose ``wait()`` gets Ctrl-C; its reports go on until it is stopped."""

    name = "interrupted"

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.reader_done = threading.Event()

    def wait(self) -> object:
        raise KeyboardInterrupt

    def stop(self) -> None:
        self.stopped.set()

    def status(self) -> str:
        return "STOPPED" if self.stopped.is_set() else "RUNNING"

    def results(self) -> Iterator[dict]:
        yield {"i": 0}
        self.stopped.wait(60)  # the job's reports end when the job does
        self.reader_done.set()


def test_ctrl_c_while_waiting_stops_the_run_before_the_last_line():
    # before: the reader was waited for (5 s) while the run went on, and the last line
    # said "running"; the caller stopped the run only after that
    run = _InterruptedRun()
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        wait_with_progress(run, RunProgress(run.name, "/r", out=out, tty=False))  # type: ignore[arg-type]
    assert run.stopped.is_set() and run.reader_done.is_set()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("tandem: run interrupted was stopped after"), last
