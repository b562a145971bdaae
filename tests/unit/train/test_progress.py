"""The live line of a run's progress keeps its clock running while no report arrives."""

from __future__ import annotations

import io

from rich.console import Console

from tandem.train.progress import RunProgress


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
