"""What a person sees while an experiment runs.

On a terminal, a live table redrawn in place (at most a few times a second); otherwise
one line per trial status change — never one line per result. ``verbose=0`` prints
nothing, 1 the table/lines and a summary, 2 also every worker's output, prefixed with its
trial and rank (it is always in the trial folder's ``logs/``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class ProgressReporter:
    def __init__(self, verbose: int, metric: str | None, mode: str | None,
                 param_keys: Sequence[str], experiment_path: str, max_rows: int = 20,
                 refresh_s: float = 0.5) -> None:
        self.verbose = verbose
        self.metric = metric
        self.mode = mode
        self.param_keys = list(param_keys)[:6]
        short = [k.rsplit("/", 1)[-1] for k in self.param_keys]
        # show "lr" rather than "train_loop_config/lr" when that is unambiguous
        self._labels = dict(zip(self.param_keys, short if len(set(short)) == len(short)
                                else self.param_keys))
        self.experiment_path = experiment_path
        self.max_rows = max_rows
        self.refresh_s = refresh_s
        self._live: Any = None
        self._last = 0.0
        self._tty = sys.stdout.isatty()
        self._lines: list[str] = []  # status lines not written yet

    def start(self, trials: Sequence[TuneTrial]) -> None:
        if self.verbose <= 0:
            return
        print(f"tandem: experiment folder {self.experiment_path}", flush=True)
        if self._tty:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._table(trials), console=Console(), refresh_per_second=4,
                              transient=False)
            self._live.start()

    def status_change(self, trial: TuneTrial, trials: Sequence[TuneTrial], note: str = "") -> None:
        if self.verbose <= 0:
            return
        if self._live is not None:
            self.refresh(trials, force=False)
            return
        params = ", ".join(f"{self._labels[k]}={_fmt(v)}" for k, v in self._params(trial).items())
        metric = ""
        if self.metric and trial.last_result and self.metric in trial.last_result:
            metric = f" {self.metric}={_fmt(trial.last_result[self.metric])}"
        it = trial.last_result.get("training_iteration") if trial.last_result else None
        it_s = f" iter={it}" if it is not None else ""
        extra = f" ({note})" if note else ""
        # written by refresh() at the end of the tuning loop's step: one write for a batch
        # (stdout is often unbuffered: PYTHONUNBUFFERED makes each print two system calls)
        self._lines.append(f"Trial {trial.name} {trial.status.value}{extra}{it_s}{metric}"
                           f"{' ' + params if params else ''}\n")

    def _write_lines(self) -> None:
        lines, self._lines = self._lines, []
        sys.stdout.write("".join(lines))
        sys.stdout.flush()

    def refresh(self, trials: Sequence[TuneTrial], force: bool = False) -> None:
        if self._lines:
            self._write_lines()
        if self._live is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.refresh_s:
            self._last = now
            self._live.update(self._table(trials))

    def _params(self, trial: TuneTrial) -> dict[str, Any]:
        flat = flatten_dict(trial.config)
        return {k: flat[k] for k in self.param_keys if k in flat}

    def _table(self, trials: Sequence[TuneTrial]) -> Any:
        from rich.table import Table

        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status.value] = counts.get(t.status.value, 0) + 1
        title = "Trials: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        table = Table(title=title, title_justify="left")
        table.add_column("Trial")
        table.add_column("Status")
        for k in self.param_keys:
            table.add_column(self._labels[k])
        table.add_column("iter", justify="right")
        if self.metric:
            table.add_column(self.metric, justify="right")
        order = {"RUNNING": 0, "PENDING": 1, "PAUSED": 2, "ERROR": 3, "TERMINATED": 4}
        shown = sorted(trials, key=lambda t: order.get(t.status.value, 5))[: self.max_rows]
        for t in shown:
            res = t.last_result or {}
            row = [t.name, t.status.value] + [_fmt(self._params(t).get(k, "")) for k in self.param_keys]
            row.append(_fmt(res.get("training_iteration", "")))
            if self.metric:
                row.append(_fmt(res.get(self.metric, "")))
            table.add_row(*row)
        if len(trials) > len(shown):
            table.caption = f"... and {len(trials) - len(shown)} more"
        return table

    def end(self, trials: Sequence[TuneTrial], best: TuneTrial | None = None, elapsed_s: float = 0.0) -> None:
        if self._lines:
            self._write_lines()
        if self._live is not None:
            self._live.update(self._table(trials))
            self._live.stop()
            self._live = None
        if self.verbose <= 0:
            return
        n_err = sum(1 for t in trials if t.status.value == "ERROR")
        print(f"tandem: {len(trials)} trial{'' if len(trials) == 1 else 's'} finished in "
              f"{elapsed_s:.1f} s"
              f"{f', {n_err} errored' if n_err else ''}. Results: {self.experiment_path}", flush=True)


class UserReporterDisplay:
    """Drives a user's ``tune.ProgressReporter`` (``CLIReporter``, a subclass...) from the
    tune controller's display hooks: ``setup`` at the start, ``report(trials, False)``
    whenever its ``should_report`` agrees while trials run, ``report(trials, True)`` at the
    end. It replaces tandem's own display."""

    def __init__(self, reporter: Any, metric: str | None, mode: str | None,
                 scheduler_name: str) -> None:
        self.reporter = reporter
        self.metric = metric
        self.mode = mode
        self._sys_info = (f"Using {scheduler_name} scheduling algorithm.",)

    def start(self, trials: Sequence[TuneTrial]) -> None:
        self.reporter.setup(start_time=time.time(), total_samples=None, metric=self.metric,
                            mode=self.mode)

    def _maybe(self, trials: Sequence[object]) -> None:
        if self.reporter.should_report(list(trials), done=False):
            self.reporter.report(list(trials), False, *self._sys_info)

    def status_change(self, trial: TuneTrial, trials: Sequence[TuneTrial], note: str = "") -> None:
        self._maybe(trials)

    def refresh(self, trials: Sequence[TuneTrial], force: bool = False) -> None:
        self._maybe(trials)

    def end(self, trials: Sequence[TuneTrial], best: TuneTrial | None = None, elapsed_s: float = 0.0) -> None:
        if self.reporter.should_report(list(trials), done=True):
            self.reporter.report(list(trials), True, *self._sys_info)
