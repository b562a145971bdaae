"""Ray Tune's progress reporters: ``ProgressReporter`` (subclass it: ``should_report`` /
``report``), ``CLIReporter`` and ``JupyterNotebookReporter``, for
``tune.run(progress_reporter=...)`` (and ``RunConfig(progress_reporter=...)`` where the
config has it). The table follows Ray's: a "== Status ==" block, the current best trial,
"Number of trials: ..." and one row per trial (name, status, location, parameters,
metrics)."""

from __future__ import annotations

import collections
import datetime
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial

# Ray's default metric columns and the result keys Tune adds itself (never inferred)
DEFAULT_COLUMNS = collections.OrderedDict({
    "mean_accuracy": "acc", "mean_loss": "loss", "training_iteration": "iter",
    "time_total_s": "total time (s)", "timesteps_total": "ts", "episode_reward_mean": "reward",
})
AUTO_RESULT_KEYS = {
    "training_iteration", "time_this_iter_s", "timesteps_this_iter", "time_total_s", "date",
    "timestamp", "pid", "hostname", "node_ip", "config", "trial_id", "experiment_id",
    "experiment_tag", "done", "should_checkpoint", "iterations_since_restore",
    "time_since_restore", "timesteps_since_restore", "checkpoint_dir_name", "episodes_total",
    "timesteps_total",
}


class ProgressReporter:
    """Ray Tune's reporter interface. The tuner calls ``setup`` once, then, while trials
    run and once at the end (``done=True``), ``report`` whenever ``should_report`` says so.
    """

    def setup(self, start_time: float | None = None, total_samples: int | None = None,
              metric: str | None = None, mode: str | None = None, **kwargs: object) -> None:
        """Called once before the first report."""

    def should_report(self, trials: Sequence[TuneTrial], done: bool = False) -> bool:
        """Whether to report now (``done``: the experiment has ended)."""
        raise NotImplementedError

    def report(self, trials: Sequence[TuneTrial], done: bool, *sys_info: str) -> None:
        """Reports progress over ``trials``."""
        raise NotImplementedError


class TuneReporterBase(ProgressReporter):
    """The default reporters' logic (Ray's arguments; see ``CLIReporter``)."""

    DEFAULT_COLUMNS = DEFAULT_COLUMNS

    def __init__(self, *, metric_columns: list[str] | dict[str, str] | None = None,
                 parameter_columns: list[str] | dict[str, str] | None = None,
                 total_samples: int | None = None, max_progress_rows: int = 20,
                 max_error_rows: int = 20, max_column_length: int = 20,
                 max_report_frequency: int = 5, infer_limit: int = 3,
                 print_intermediate_tables: bool | None = None, metric: str | None = None,
                 mode: str | None = None, sort_by_metric: bool = False) -> None:
        if mode not in (None, "min", "max"):
            raise ConfigError(f"{type(self).__name__}(mode={mode!r}): use 'min' or 'max'.")
        self._total_samples = total_samples
        self._metrics_override = metric_columns is not None
        self._inferred_metrics: dict[str, str] = {}
        self._metric_columns: Any = metric_columns or self.DEFAULT_COLUMNS.copy()
        self._parameter_columns: Any = parameter_columns or []
        self._max_progress_rows = max_progress_rows
        self._max_error_rows = max_error_rows
        self._max_column_length = max_column_length
        self._infer_limit = infer_limit
        self._print_intermediate_tables = print_intermediate_tables
        self._max_report_freqency = max_report_frequency
        self._last_report_time = 0.0
        self._start_time = time.time()
        self._metric = metric
        self._mode = mode
        self._sort_by_metric = sort_by_metric

    def setup(self, start_time: float | None = None, total_samples: int | None = None,
              metric: str | None = None, mode: str | None = None, **kwargs: object) -> None:
        self._start_time = start_time if start_time is not None else time.time()
        if total_samples is not None:
            self._total_samples = total_samples
        self.set_search_properties(metric, mode)

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        if (self._metric and metric and metric != self._metric) or (
                self._mode and mode and mode != self._mode):
            raise ValueError(
                "You passed a `metric` or `mode` argument to `tune.TuneConfig()`, but "
                "the reporter you are using was already instantiated with their "
                "own `metric` and `mode` parameters. Either remove the arguments "
                "from your reporter or from your call to `tune.TuneConfig()`"
            )
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def should_report(self, trials: Sequence[TuneTrial], done: bool = False) -> bool:
        if time.time() - self._last_report_time > self._max_report_freqency:
            self._last_report_time = time.time()
            return True
        return done

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        self._metrics_override = True
        if metric in self._metric_columns:
            raise ValueError(f"Column {metric} already exists.")
        if isinstance(self._metric_columns, dict):
            self._metric_columns[metric] = representation or metric
        else:
            if representation is not None and representation != metric:
                raise ValueError("`representation` cannot differ from `metric` if this "
                                 "reporter was initialized with a list of metric columns.")
            self._metric_columns.append(metric)

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        if parameter in self._parameter_columns:
            raise ValueError(f"Column {parameter} already exists.")
        if isinstance(self._parameter_columns, dict):
            self._parameter_columns[parameter] = representation or parameter
        else:
            if representation is not None and representation != parameter:
                raise ValueError("`representation` cannot differ from `parameter` if this "
                                 "reporter was initialized with a list of metric columns.")
            self._parameter_columns.append(parameter)

    # -- the text --------------------------------------------------------------------------
    def _infer_user_metrics(self, trials: Sequence[TuneTrial]) -> dict[str, str]:
        for t in trials:
            for k, v in (t.last_result or {}).items():
                if len(self._inferred_metrics) >= self._infer_limit:
                    return self._inferred_metrics
                if k not in DEFAULT_COLUMNS and k not in AUTO_RESULT_KEYS and (
                        v is None or isinstance(v, (int, float))) and not isinstance(v, bool):
                    self._inferred_metrics[k] = k
        return self._inferred_metrics

    def _current_best_trial(self, trials: Sequence[TuneTrial]) -> tuple[Any, str | None]:
        metric = self._metric
        if not metric and len(self._inferred_metrics) == 1:
            metric = next(iter(self._inferred_metrics))
        if not metric or not self._mode:
            return None, metric
        sign = 1.0 if self._mode == "max" else -1.0
        best, best_v = None, -math.inf
        for t in trials:
            v = flatten_dict(t.last_result or {}).get(metric)
            if isinstance(v, (int, float)) and not math.isnan(v) and v * sign > best_v:
                best, best_v = t, v * sign
        return best, metric

    def _columns(self, spec: Any) -> dict[str, str]:
        return dict(spec) if isinstance(spec, Mapping) else {k: k for k in spec}

    def _progress_str(self, trials: Sequence[TuneTrial], done: bool, *sys_info: str) -> str:
        if not self._metrics_override:
            self._metric_columns.update(self._infer_user_metrics(trials))
        now = time.time()
        running = datetime.timedelta(seconds=now - self._start_time)
        clock = f"{datetime.datetime.fromtimestamp(now):%Y-%m-%d %H:%M:%S}"
        passed = str(running)[:-3] if running.microseconds else str(running)
        messages = ["== Status ==", f"Current time: {clock} (running for {passed})", *sys_info]
        best, metric = self._current_best_trial(trials)
        if best is not None and metric is not None:
            value = flatten_dict(best.last_result)[metric]
            params = flatten_dict(best.config)
            shown = self._columns(self._parameter_columns) or {k: k for k in params}
            messages.append(f"Current best trial: {best.trial_id} with {metric}={value} and "
                            f"params={ {k: params[k] for k in shown if k in params} }")
        table = self._table(trials, done)
        if not done and self._print_intermediate_tables is False:
            table = table.split("\n", 1)[0]  # the counts only, the table at the end
        messages.append(table)
        errors = self._errors(trials, done)
        if errors:
            messages.append(errors)
        return "\n".join(messages) + "\n"

    def _errors(self, trials: Sequence[TuneTrial], done: bool) -> str:
        """Ray's error table: each errored trial, its failure count and error file."""
        failed = [t for t in trials if t.status.value == "ERROR"]
        if not failed:
            return ""
        shown = failed if done else failed[: self._max_error_rows]
        rows = [[t.trial_id, getattr(t, "num_failures", 1) or 1,
                 (t.path.rstrip("/") + "/error.txt") if getattr(t, "path", None) else ""]
                for t in shown]
        more = f" (showing {len(shown)})" if len(shown) < len(failed) else ""
        return (f"Number of errored trials: {len(failed)}{more}\n"
                + psql_table(["Trial name", "# failures", "error file"], rows))

    def _table(self, trials: Sequence[TuneTrial], done: bool) -> str:
        by_state: dict[str, int] = collections.Counter(t.status.value for t in trials)
        total = self._total_samples
        header = (f"Number of trials: {len(trials)}"
                  f"{f'/{total}' if total and total >= len(trials) else ''} "
                  f"({', '.join(f'{n} {s}' for s, n in sorted(by_state.items()))})")
        rows_of = list(trials)
        metric = self._metric
        if self._sort_by_metric and metric and self._mode:
            sign = -1 if self._mode == "max" else 1
            rows_of.sort(key=lambda t: sign * float(
                (t.last_result or {}).get(metric, math.inf * sign)))
        if not done and len(rows_of) > self._max_progress_rows:
            rows_of = rows_of[: self._max_progress_rows]
        metrics = {k: v for k, v in self._columns(self._metric_columns).items()
                   if any(k in flatten_dict(t.last_result or {}) for t in trials)}
        params = self._columns(self._parameter_columns) or {
            k: k for k in dict.fromkeys(k for t in trials for k in flatten_dict(t.config))}
        cut = self._max_column_length
        names = ["Trial name", "status", "loc", *[v[:cut] for v in params.values()],
                 *[v[:cut] for v in metrics.values()]]
        rows = []
        for t in rows_of:
            res = flatten_dict(t.last_result or {})
            cfg = flatten_dict(t.config)
            loc = f"{res['node_ip']}:{res['pid']}" if "node_ip" in res and "pid" in res else ""
            rows.append([t.trial_id, t.status.value, loc, *[cfg.get(k, "") for k in params],
                         *[res.get(k, "") for k in metrics]])
        return header + "\n" + psql_table(names, rows)


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.5g}" if abs(v) < 1e5 else f"{v:.6g}"
    return str(v)


def psql_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A table in tabulate's ``psql`` format (numbers right-aligned, text left-aligned)."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] == "" for r in rows) and bool(rows)
               for i in range(len(headers))]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def fmt(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if num else v.ljust(w)
                                 for v, w, num in zip(values, widths, numeric)) + " |"

    return "\n".join([line, fmt(list(headers)), line, *(fmt(r) for r in cells), line])


class CLIReporter(TuneReporterBase):
    """Prints the progress table to the terminal (Ray's ``CLIReporter``): at most every
    ``max_report_frequency`` seconds while trials run, and once at the end.

    Args:
        metric_columns: Metrics to show (a list, or ``{metric: shown name}``); by default
            Ray's defaults plus up to ``infer_limit`` metrics the trials report.
        parameter_columns: Config keys to show (nested keys joined with ``/``); all by
            default.
        total_samples, max_progress_rows, max_error_rows, max_column_length,
        max_report_frequency, infer_limit, print_intermediate_tables, metric, mode,
        sort_by_metric: as in Ray.
    """

    def report(self, trials: Sequence[TuneTrial], done: bool, *sys_info: str) -> None:
        print(self._progress_str(trials, done, *sys_info), flush=True)


class JupyterNotebookReporter(TuneReporterBase):
    """Ray's notebook reporter: the same text, shown in the notebook cell's output (replaced
    in place when ``overwrite``); printed when IPython is not running."""

    def __init__(self, *, overwrite: bool = True,
                 metric_columns: list[str] | dict[str, str] | None = None,
                 parameter_columns: list[str] | dict[str, str] | None = None,
                 total_samples: int | None = None, max_progress_rows: int = 20,
                 max_error_rows: int = 20, max_column_length: int = 20,
                 max_report_frequency: int = 5, infer_limit: int = 3,
                 print_intermediate_tables: bool | None = None, metric: str | None = None,
                 mode: str | None = None, sort_by_metric: bool = False) -> None:
        super().__init__(
            metric_columns=metric_columns, parameter_columns=parameter_columns,
            total_samples=total_samples, max_progress_rows=max_progress_rows,
            max_error_rows=max_error_rows, max_column_length=max_column_length,
            max_report_frequency=max_report_frequency, infer_limit=infer_limit,
            print_intermediate_tables=print_intermediate_tables, metric=metric, mode=mode,
            sort_by_metric=sort_by_metric)
        self._overwrite = overwrite

    def report(self, trials: Sequence[TuneTrial], done: bool, *sys_info: str) -> None:
        text = self._progress_str(trials, done, *sys_info)
        try:
            from IPython.display import HTML, clear_output, display
        except ImportError:
            print(text, flush=True)
            return
        if self._overwrite:
            clear_output(wait=True)
        display(HTML(f"<pre>{text}</pre>"))


__all__ = ["CLIReporter", "JupyterNotebookReporter", "ProgressReporter", "TuneReporterBase"]
