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


class ResultGrid:
    """Iterable of ``Result`` (one per trial, in creation order)."""

    def __init__(self, results: list[Result], experiment_path: str,
                 default_metric: str | None = None, default_mode: str | None = None,
                 trial_ids: list[str] | None = None) -> None:
        self._results = results
        self.experiment_path = experiment_path
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
            raise ConfigError(
                f"No trial reported the metric {metric!r} (as a finite number), so there is "
                f"no best result. Metrics reported: {reported or 'none'}. Report it with "
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

    def __repr__(self) -> str:
        return f"ResultGrid<{len(self)} trials, {self.num_errors} errors, path={self.experiment_path!r}>"
