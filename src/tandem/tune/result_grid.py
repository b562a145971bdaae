"""``ResultGrid``: the results of every trial of an experiment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train.api.result import Result
from tandem.tune.search.searcher import check_mode
from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    import pandas as pd


class NoBestTrialError(ConfigError, RuntimeError):
    """``get_best_result``: no trial reported the metric (Ray raises ``RuntimeError``)."""


class ResultGrid:
    """Iterable of ``Result`` (one per trial, in creation order)."""

    experiment_path: str

    def __init__(self, experiment_analysis: Any, experiment_path: str | None = None,
                 default_metric: str | None = None, default_mode: str | None = None,
                 trial_ids: list[str] | None = None) -> None:
        """``ResultGrid(experiment_analysis)`` as in Ray (from ``tune.run``'s analysis or
        ``ExperimentAnalysis(path)``), or ``ResultGrid(results, experiment_path)``."""
        if not isinstance(experiment_analysis, (list, tuple)):
            grid = getattr(experiment_analysis, "_grid", None)
            if not isinstance(grid, ResultGrid):
                raise TypeError(
                    f"ResultGrid({type(experiment_analysis).__name__}): pass the "
                    f"ExperimentAnalysis of an experiment (tune.run(...) or "
                    f"tune.ExperimentAnalysis(path)), or a list of Result objects."
                )
            experiment_path = str(grid.experiment_path)
            trial_ids = grid.trial_ids  # type: ignore[assignment]
            default_metric = default_metric or getattr(experiment_analysis, "default_metric",
                                                       None)
            default_mode = default_mode or getattr(experiment_analysis, "default_mode", None)
            experiment_analysis = list(grid)
        if experiment_path is None:
            raise TypeError("ResultGrid(results, experiment_path): experiment_path is missing.")
        results: list[Result] = list(experiment_analysis)
        self._results = results
        self.experiment_path: str = experiment_path
        self._metric = default_metric
        self._mode = default_mode
        self._trial_ids = trial_ids or [None] * len(results)  # type: ignore[list-item]

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> Result:
        return self._results[i]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    @property
    def filesystem(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` of :attr:`experiment_path` (as in Ray)."""
        from tandem.train.api.result import arrow_filesystem

        return arrow_filesystem(self.experiment_path)

    @property
    def trial_ids(self) -> list[str | None]:
        """Each result's trial id, in the same order as the results."""
        return list(self._trial_ids)

    @property
    def errors(self) -> list[BaseException]:
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        return sum(1 for r in self._results if r.error is None)

    def get_best_result(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last", filter_nan_and_inf: bool = True) -> Result:
        """The trial with the best ``metric``.

        Args:
            scope: ``"last"`` compares each trial's last reported value, ``"all"`` its best
                value ever, ``"last-5-avg"``/``"last-10-avg"`` the mean of its last reports.

        Raises:
            ConfigError: no metric/mode given here or in TuneConfig, a bad mode or scope,
                or no trial ever reported ``metric`` (the message lists what was reported).
        """
        if len(self._results) == 1:  # Ray: the only trial is the best, metric or not
            return self._results[0]
        metric = metric or self._metric
        mode = mode or self._mode
        if metric is None or mode is None:
            raise ConfigError(
                f"get_best_result() needs a metric and a mode (got metric={metric!r}, "
                f"mode={mode!r}): pass them here, e.g. get_best_result(metric='loss', "
                f"mode='min'), or set TuneConfig(metric=..., mode=...)."
            )
        check_mode(mode, "get_best_result(mode=...)")
        if scope not in ("last", "all", "last-5-avg", "last-10-avg", "avg"):
            raise ConfigError(
                f"get_best_result(scope={scope!r}): use 'last', 'all', 'avg', 'last-5-avg' or "
                f"'last-10-avg'."
            )
        best: tuple[float, Result] | None = None
        import math

        for r in self._results:
            value = self._score(r, metric, mode, scope)
            if value is None or (filter_nan_and_inf and not math.isfinite(value)):
                continue
            key = value if mode == "max" else -value
            if best is None or key > best[0]:
                best = (key, r)
        if best is None:
            reported = sorted({k for r in self._results for k in (r.metrics or {})})
            raise NoBestTrialError(
                f"No best trial found for the given metric: {metric}. This means that no "
                f"trial has reported this metric"
                + (", or all values reported for this metric are NaN or infinite (pass "
                   "filter_nan_and_inf=False to keep them)" if filter_nan_and_inf else "")
                + f". Metrics reported: {reported or 'none'}. Report it with "
                f"tune.report({{{metric!r}: value}}) or pick one of those."
            )
        return best[1]

    @staticmethod
    def _score(r: Result, metric: str, mode: str, scope: str) -> float | None:
        if scope == "last":
            v = (r.metrics or {}).get(metric)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        df = r.metrics_dataframe
        if metric not in getattr(df, "columns", ()):
            return None
        col = df[metric].dropna()
        if col.empty:
            return None
        if scope == "all":
            return float(col.max() if mode == "max" else col.min())
        if scope == "avg":
            return float(col.mean())
        n = 5 if scope == "last-5-avg" else 10
        return float(col.tail(n).mean())

    def get_dataframe(self, filter_metric: str | None = None,
                      filter_mode: str | None = None) -> pd.DataFrame:
        """One row per trial: its last metrics, ``trial_id``, and ``config/<key>`` columns
        (or, with ``filter_metric``/``filter_mode``, each trial's best report)."""
        import pandas as pd

        rows = []
        for r, trial_id in zip(self._results, self._trial_ids):
            metrics = dict(r.metrics or {})
            if filter_metric is not None:
                df = r.metrics_dataframe
                if filter_metric in getattr(df, "columns", ()) and not df[filter_metric].dropna().empty:
                    col = df[filter_metric]
                    label: Any = col.idxmax() if (filter_mode or "max") == "max" else col.idxmin()
                    metrics = {str(k): v for k, v in df.loc[label].to_dict().items()}
            row: dict[str, Any] = dict(metrics)
            row["trial_id"] = trial_id or metrics.get("trial_id")
            row.update(flatten_dict(r.config or {}, prefix="config/"))
            row["logdir"] = r.path
            rows.append(row)
        return pd.DataFrame(rows)

    def plot(self, metric: str | None = None, mode: str | None = None, *,
             kind: str = "both", x: str = "training_iteration",
             path: str | None = None) -> Any:
        """Learning curves of every trial and the best-so-far over trials (matplotlib).

        Args:
            metric: the reported key (default: the experiment's metric, else a loss or
                accuracy reported).
            mode: ``"min"`` or ``"max"`` for best-so-far (default: the experiment's).
            kind: ``"curves"``, ``"best"`` or ``"both"`` (side by side).
            x: the x axis of the curves.
            path: save the figure there (PNG by its extension).

        Scheduler decisions recorded in the experiment (ASHA stops, PBT exploits) are
        marked on the curves. Returns the matplotlib ``Figure`` (a notebook shows it).
        """
        import json
        import os

        from tandem.train.api import plot as _plot
        from tandem.train.api.result import read_result_rows

        if kind not in ("curves", "best", "both"):
            raise ValueError(f"kind={kind!r} is not known; use 'curves', 'best' or 'both'")
        mode = mode or self._mode or "max"
        check_mode(mode, "ResultGrid.plot")
        runs = [read_result_rows(r.path) if r.path else [] for r in self._results]
        metric = _plot.pick_metric(runs, metric or self._metric)
        decisions: dict[str, list[dict[str, Any]]] = {}
        try:
            with open(os.path.join(self.experiment_path, "experiment_state.json")) as f:
                for t in json.load(f).get("trials") or []:
                    decisions[os.path.basename(str(t.get("path", "")).rstrip("/"))] = \
                        t.get("decisions") or []
        except (OSError, ValueError, TypeError):
            pass
        panels = ["curves", "best"] if kind == "both" else [kind]
        fig = _plot.figure(1, len(panels))
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, panel in zip(axes, panels):
            if panel == "curves":
                marked = False
                for r, rows in zip(self._results, runs):
                    xs, ys = _plot.curve(rows, metric, x)
                    name = os.path.basename((r.path or "").rstrip("/"))
                    ax.plot(xs, ys, linewidth=1.3, label=name)
                    for d in decisions.get(name, []):
                        it = d.get("iteration")
                        if it in xs:
                            ax.plot([it], [ys[xs.index(it)]], "o", color="#d93025"
                                    if d.get("action") == "STOP" else "#7048e8",
                                    markersize=7, zorder=5,
                                    label=None if marked else "scheduler decision")
                            marked = True
                ax.set_xlabel(x)
                ax.set_ylabel(metric)
                ax.set_title(f"learning curves ({len(runs)} trials)")
                if len(runs) <= 12 or marked:
                    ax.legend(fontsize=7)
            else:
                best: float | None = None
                tx, ty, bx, by = [], [], [], []
                for i, rows in enumerate(runs):
                    _, ys = _plot.curve(rows, metric, x)
                    if not ys:
                        continue
                    v = min(ys) if mode == "min" else max(ys)
                    tx.append(i)
                    ty.append(v)
                    best = v if best is None or (v < best if mode == "min" else v > best) \
                        else best
                    bx.append(i)
                    by.append(best)
                ax.scatter(tx, ty, s=18, color="#9aa3b2", label="trial's best")
                ax.step(bx, by, where="post", color="#2b8a3e", label="best so far")
                ax.set_xlabel("trial")
                ax.set_ylabel(f"{metric} ({mode})")
                ax.set_title("best so far")
                ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        return _plot.save(fig, path)

    def __repr__(self) -> str:
        return f"ResultGrid<{len(self)} trials, {self.num_errors} errors, path={self.experiment_path!r}>"
