"""What a person sees while ``fit()`` waits: each report as it arrives.

On a terminal, one live status line redrawn in place (rich): the run, the report count
(or ``epoch 3/10`` with a bar when the trainer declares a total), the latest metrics and
the time. Piped, one plain line per report. ``RunConfig(verbose=0)`` prints nothing.
Workers' own output is echoed above the line, as before. The last line says where the
results are.

A trainer declares a total through its ``metadata``: ``{"progress_total": 10,
"progress_key": "epoch"}`` (the model layer does, with its epoch count).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tandem.jobs.handle import JobHandle
    from tandem.train.api.config import RunConfig

# report keys that are bookkeeping, not metrics a person scans for
_HIDDEN = {"training_iteration", "time_total_s", "timestamp", "time_this_iter_s", "done",
           "trial_id", "date", "hostname", "node_ip", "pid"}
_MAX_METRICS = 6


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def format_metrics(row: Mapping[str, object], skip: Iterable[str] = ()) -> str:
    """``key=value`` for the first few scalar metrics of a report."""
    skip = set(skip) | _HIDDEN
    parts = []
    for key, value in row.items():
        if key in skip or isinstance(value, (dict, list, tuple)):
            continue
        parts.append(f"{key}={_fmt(value)}")
        if len(parts) == _MAX_METRICS:
            break
    return " ".join(parts)


class RunProgress:
    """Shows one run's reports; ``follow(reports)`` consumes them until the run ends.

    Args:
        name: the run's name.
        run_path: where its results go (printed at the end).
        num_workers: shown in the first line.
        total / key: when set, progress reads ``row[key]`` out of ``total`` (an epoch count).
        tty: draw a live line (default: whether ``out`` is a terminal).
        out: where to write (default ``sys.stdout``).
        clock: seconds, for the elapsed time shown (default ``time.monotonic``).
    """

    def __init__(self, name: str, run_path: str, num_workers: int = 1,
                 total: int | None = None, key: str | None = None, tty: bool | None = None,
                 out: TextIO | None = None, refresh_s: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.run_path = run_path
        self.num_workers = num_workers
        self.total = total
        self.key = key
        self._out = out
        self._tty = tty
        self.refresh_s = refresh_s
        self.count = 0
        self.last: dict[str, Any] | None = None
        self._clock = clock
        self._t0 = clock()
        self._ended = False
        self._live: Any = None
        self._lock = threading.Lock()

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def _is_tty(self) -> bool:
        if self._tty is not None:
            return self._tty
        try:
            return bool(self.out.isatty())
        except (AttributeError, ValueError):
            return False

    def start(self) -> None:
        workers = f"{self.num_workers} worker{'s' if self.num_workers != 1 else ''}"
        self._print(f"tandem: run {self.name} started on {workers}; results in {self.run_path}")
        if self._is_tty():
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self._out) if self._out is not None else Console()
            # drawn anew at each refresh, so the clock runs while no report arrives
            self._live = Live(console=console, refresh_per_second=4, get_renderable=self._render,
                              transient=False, redirect_stdout=True, redirect_stderr=True)
            self._live.start()

    def on_report(self, row: Mapping[str, object]) -> None:
        with self._lock:
            self.count += 1
            self.last = dict(row)
            if self._live is not None:
                self._live.refresh()
            else:
                self._print(self._plain(row))

    def end(self, status: str, error: BaseException | None = None) -> None:
        with self._lock:
            if self._live is not None:
                self._ended = True  # the last drawing: no spinner
                self._live.stop()
                self._live = None
        took = self._clock() - self._t0
        what = {"FINISHED": "finished", "FAILED": "failed", "STOPPED": "was stopped"}.get(
            status, status.lower())
        metrics = f": {format_metrics(self.last)}" if self.last and status == "FINISHED" else ""
        self._print(f"tandem: run {self.name} {what} after {took:.1f} s{metrics}. "
                    f"Results: {self.run_path}")

    def follow(self, reports: Iterable[Mapping[str, object]]) -> None:
        for row in reports:
            self.on_report(row)

    # -- rendering -----------------------------------------------------------------------
    def _where(self, row: Mapping[str, object] | None) -> str:
        if self.total is not None and self.key and row is not None and self.key in row:
            return f"{self.key} {_fmt(row[self.key])}/{self.total}"
        if self.total is not None and self.key:
            return f"{self.key} 0/{self.total}"
        return f"report {self.count}"

    def _plain(self, row: Mapping[str, object]) -> str:
        took = self._clock() - self._t0
        skip = {self.key} if self.key else set()
        return f"[{self.name}] {self._where(row)} {format_metrics(row, skip)} ({took:.1f} s)"

    def _render(self) -> Any:
        return self._line(final=self._ended)

    def _line(self, final: bool = False) -> object:
        """``⠋ epoch 3/10 ━━━━━━╸━━━ loss=0.41 val_accuracy=0.93  12.3 s``: only the metrics
        are cut short on a narrow terminal (the run's name is in the line above)."""
        from rich.table import Table
        from rich.text import Text

        row = self.last
        took = self._clock() - self._t0
        grid = Table.grid(padding=(0, 1), expand=True)
        cells: list[Any] = []
        if not final:
            from rich.spinner import Spinner

            grid.add_column(no_wrap=True, width=1)
            cells.append(Spinner("dots"))
        grid.add_column(no_wrap=True)
        cells.append(Text(self._where(row), style="bold"))
        if self.total is not None and self.key:
            from rich.progress_bar import ProgressBar

            done = float(row[self.key]) if row and self.key in row else 0.0
            grid.add_column(no_wrap=True, width=16)
            cells.append(ProgressBar(total=float(self.total), completed=done, width=16))
        skip = {self.key} if self.key else set()
        grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        cells.append(Text(format_metrics(row, skip) if row else "waiting for the first report",
                          style="cyan"))
        grid.add_column(no_wrap=True, justify="right")
        cells.append(Text(f"{took:.1f} s", style="dim"))
        grid.add_row(*cells)
        return grid

    def _print(self, line: str) -> None:
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass


def console_progress(handle: JobHandle, run_config: RunConfig, num_workers: int,
                     total: int | None = None, key: str | None = None) -> RunProgress | None:
    """The console view of waiting on ``handle``: None when ``RunConfig(verbose=0)`` or when
    the wait happens inside a worker (a trial's driver function: its output is a log)."""
    from tandem.train.session import get_session

    if run_config.verbose == 0 or get_session() is not None:
        return None
    import os

    return RunProgress(handle.name, os.path.join(run_config.resolved_storage_path(), handle.name),
                       num_workers=num_workers, total=total, key=key)


def wait_with_progress(handle: JobHandle, progress: RunProgress | None) -> Any:
    """``handle.wait()``, showing each report on ``progress`` as it arrives (when given).

    Reports are read on a helper thread, so ``wait()`` (and its ``KeyboardInterrupt``) stays
    on the caller's. Ctrl-C stops the run before the last line is shown, so the reader ends
    with it (the line then says the run was stopped) and the program exits at once."""
    if progress is None:
        return handle.wait()
    progress.start()
    reader = threading.Thread(target=_follow, args=(handle, progress),
                              name="tandem-progress", daemon=True)
    reader.start()
    error: BaseException | None = None
    try:
        return handle.wait()
    except BaseException as e:
        error = e
        if isinstance(e, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                handle.stop()
        raise
    finally:
        reader.join(timeout=5)
        try:
            status = handle.status()
        except Exception:  # noqa: BLE001 - the line must not hide the real outcome
            status = "FAILED" if error is not None else "FINISHED"
        progress.end(status, error)


def _follow(handle: JobHandle, progress: RunProgress) -> None:
    try:
        progress.follow(handle.results())
    except Exception:  # noqa: BLE001, S110 - a display problem must never break the run
        pass
