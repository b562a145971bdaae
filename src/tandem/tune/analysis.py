"""``ExperimentAnalysis``: what the older ``tune.run`` returns.

A read-only view over a ``ResultGrid`` (one ``Result`` per trial, in creation order) with
the older names: ``get_best_config``, ``get_best_trial``, ``get_best_checkpoint``,
``best_config``, ``best_result``, ``dataframe()``, ``results_df``, ``trials``. New code
should use the ``ResultGrid`` that ``Tuner.fit()`` returns (``analysis.result_grid``).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.result import Result, list_checkpoints, read_result_rows
from tandem.tune.controller import STATE_FILE, TuneError
from tandem.tune.result_grid import ResultGrid
from tandem.tune.search.searcher import check_mode

if TYPE_CHECKING:
    import pandas as pd

    from tandem.tune.trial import TuneTrial

_CKPT_ITER = re.compile(r"checkpoint_(\d+)$")
_SCOPES = ("last", "all", "avg", "last-5-avg", "last-10-avg")


@dataclass(frozen=True, eq=False)
class FrozenTrial:
    """A finished trial as ``ExperimentAnalysis.trials`` lists it (a snapshot; read-only).

    Attributes:
        trial_id: the trial's id within the experiment.
        config: the sampled config it ran with.
        last_result: its last reported metrics (with ``training_iteration`` and
            ``trial_id``), or None if it never reported.
        status: ``"TERMINATED"`` or ``"ERROR"`` (``"PENDING"``/``"RUNNING"``/``"PAUSED"`` only
            for an analysis loaded from the folder of an experiment that did not finish).
        checkpoint: its latest checkpoint, or None.
        path: the trial folder (``logdir`` is the older name).
        error: why it failed, or None.
    """

    trial_id: str
    config: dict[str, Any]
    last_result: dict[str, Any] | None
    status: str
    checkpoint: Checkpoint | None
    path: str
    error: BaseException | None = None

    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def logdir(self) -> str:
        return self.path

    @property
    def local_path(self) -> str:
        return self.path

    def is_finished(self) -> bool:
        return self.status in (self.TERMINATED, self.ERROR)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenTrial) and other.trial_id == self.trial_id

    def __hash__(self) -> int:
        return hash(self.trial_id)

    def __str__(self) -> str:
        return self.trial_id

    def __repr__(self) -> str:
        return f"FrozenTrial({self.trial_id!r}, {self.status})"


class ExperimentAnalysis:
    """The trials of one experiment, with the older ``tune.run`` analysis API.

    Built by ``tune.run`` from the ``ResultGrid`` of the ``Tuner`` it ran, or from an
    experiment folder: ``ExperimentAnalysis("~/tandem_results/my_exp")``.

    Args:
        experiment_checkpoint_path: the path of an experiment folder (the one holding
            ``experiment_state.json``), or a ``ResultGrid``.
        storage_filesystem: a ``pyarrow.fs.FileSystem`` the path is in (as Ray's; mapped to
            its URL).
        trials: only these trials (objects with a ``trial_id``, such as
            ``analysis.trials``' entries), as Ray's.
        default_metric, default_mode: used when a method is called without
            ``metric``/``mode`` (``tune.run`` passes its own ``metric``/``mode``).
    """

    def __init__(self, experiment_checkpoint_path: ResultGrid | str | os.PathLike, *,
                 storage_filesystem: object = None, trials: list[TuneTrial] | None = None,
                 default_metric: str | None = None, default_mode: str | None = None) -> None:
        experiment = experiment_checkpoint_path
        if storage_filesystem is not None:
            if not isinstance(experiment, (str, os.PathLike)):
                raise ConfigError(
                    "ExperimentAnalysis(..., storage_filesystem=...) needs the experiment's "
                    "path inside that filesystem as its first argument."
                )
            from tandem.train.api.config import storage_url

            experiment = storage_url(storage_filesystem, os.fspath(experiment))
        if default_mode is not None:
            check_mode(default_mode, "ExperimentAnalysis(default_mode=...)")
        if isinstance(experiment, ResultGrid):
            grid = experiment
            statuses = ["ERROR" if r.error is not None else "TERMINATED" for r in grid]
        elif isinstance(experiment, (str, os.PathLike)):
            grid, statuses = _load_grid(os.fspath(experiment), default_metric, default_mode)
        else:
            raise ConfigError(
                f"ExperimentAnalysis({type(experiment).__name__}) is not supported: pass the "
                f"ResultGrid from Tuner.fit() or the path of an experiment folder."
            )
        self._grid = grid
        if default_metric is None and default_mode is not None:
            from tandem.tune.result import DEFAULT_METRIC

            default_metric = DEFAULT_METRIC  # Ray's: the unnamed metric a function returns
        self.default_metric = default_metric
        self.default_mode = default_mode
        ids = grid.trial_ids
        self._trials = [
            FrozenTrial(
                trial_id=tid or (r.metrics or {}).get("trial_id") or os.path.basename(r.path),
                config=dict(r.config or {}), last_result=dict(r.metrics) if r.metrics else None,
                status=status, checkpoint=r.checkpoint, path=r.path, error=r.error,
            )
            for r, tid, status in zip(grid, ids, statuses)
        ]
        if trials is not None:
            wanted = {getattr(t, "trial_id", t) for t in trials}
            self._trials = [t for t in self._trials if t.trial_id in wanted]
        self._result_of = {t.trial_id: r for t, r in zip(self._trials, grid)}

    # -- the experiment ------------------------------------------------------------------
    @property
    def result_grid(self) -> ResultGrid:
        """The ``ResultGrid`` underneath (what ``Tuner.fit()`` returns)."""
        return self._grid

    @property
    def experiment_path(self) -> str:
        return self._grid.experiment_path

    @property
    def trials(self) -> list[FrozenTrial]:
        """Every trial, in creation order."""
        return list(self._trials)

    @property
    def results(self) -> dict[str, dict[str, Any] | None]:
        """Each trial's last result, by trial id."""
        return {t.trial_id: t.last_result for t in self._trials}

    def get_all_configs(self) -> dict[str, dict[str, Any]]:
        """Each trial's config, by trial folder (as the older API keyed it)."""
        return {t.path: t.config for t in self._trials}

    # -- best ----------------------------------------------------------------------------
    def get_best_trial(self, metric: str | None = None, mode: str | None = None,
                       scope: str = "last", filter_nan_and_inf: bool = True) -> FrozenTrial:
        """The trial with the best ``metric`` (defaults: those given to ``tune.run``).

        Args:
            scope: ``"last"`` compares each trial's last value, ``"all"`` its best value
                ever, ``"avg"``/``"last-5-avg"``/``"last-10-avg"`` a mean of its reports.

        Raises:
            ConfigError: no metric/mode here or in ``tune.run``, a bad mode or scope, or no
                trial reported ``metric`` as a finite number.
        """
        metric, mode = self._metric_mode(metric, mode, "get_best_trial")
        if scope not in _SCOPES:
            raise ConfigError(
                f"get_best_trial(scope={scope!r}) is not known: use one of "
                f"{', '.join(repr(s) for s in _SCOPES)}."
            )
        best = self._grid.get_best_result(metric, mode, scope=scope,
                                          filter_nan_and_inf=filter_nan_and_inf)
        for t, r in zip(self._trials, self._grid):
            if r is best:
                return t
        raise AssertionError("get_best_result returned a Result that is not in the grid")

    def get_best_config(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last") -> dict[str, Any]:
        """The config of ``get_best_trial(metric, mode, scope)``."""
        metric, mode = self._metric_mode(metric, mode, "get_best_config")
        return self.get_best_trial(metric, mode, scope).config

    def get_best_logdir(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last") -> str:
        """The folder of ``get_best_trial(metric, mode, scope)``."""
        metric, mode = self._metric_mode(metric, mode, "get_best_logdir")
        return self.get_best_trial(metric, mode, scope).path

    def get_best_checkpoint(self, trial: FrozenTrial | str, metric: str | None = None,
                            mode: str | None = None, return_path: bool = False
                            ) -> Checkpoint | str | None:
        """The best of ``trial``'s kept checkpoints by ``metric`` (the value reported with
        each checkpoint); None if the trial kept no checkpoint.

        Args:
            trial: a trial from ``trials``, its id, or its folder.
            metric, mode: default to those given to ``tune.run``; without them,
                ``"training_iteration"``/``"max"`` (the latest checkpoint).
            return_path: return the checkpoint's path instead of the ``Checkpoint``.
        """
        t = self._find_trial(trial)
        if metric is None and self.default_metric is None:
            metric, mode = "training_iteration", mode or "max"
        metric, mode = self._metric_mode(metric, mode, "get_best_checkpoint")
        r = self._result_of[t.trial_id]
        candidates = self._checkpoints_with_metrics(r)
        best: tuple[float, Checkpoint] | None = None
        for ckpt, value in ((c, m.get(metric)) for c, m in candidates):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                continue
            key = value if mode == "max" else -value
            if best is None or key > best[0]:
                best = (key, ckpt)
        if best is None:
            if not candidates:
                return None
            reported = sorted({k for _, m in candidates for k in m})
            raise ConfigError(
                f"get_best_checkpoint(trial={t.trial_id!r}, metric={metric!r}): none of its "
                f"{len(candidates)} checkpoints was reported with {metric!r}. Metrics reported "
                f"with them: {reported or 'none'}. Pass one of those as metric=..."
            )
        return best[1].path if return_path else best[1]

    def get_last_checkpoint(self, trial: FrozenTrial | str | None = None) -> Checkpoint | None:
        """The latest checkpoint of ``trial`` (default: the best trial by the default metric)."""
        t = self._find_trial(trial) if trial is not None else self.best_trial
        return t.checkpoint

    @property
    def best_trial(self) -> FrozenTrial:
        """``get_best_trial()`` with the metric and mode given to ``tune.run``."""
        return self.get_best_trial(*self._defaults("best_trial"))

    @property
    def best_config(self) -> dict[str, Any]:
        return self.get_best_trial(*self._defaults("best_config")).config

    @property
    def best_result(self) -> dict[str, Any]:
        """The last result of the best trial."""
        return dict(self.get_best_trial(*self._defaults("best_result")).last_result or {})

    @property
    def best_logdir(self) -> str:
        return self.get_best_trial(*self._defaults("best_logdir")).path

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        """The best trial's best checkpoint, both by the metric given to ``tune.run``."""
        metric, mode = self._defaults("best_checkpoint")
        return self.get_best_checkpoint(self.get_best_trial(metric, mode), metric, mode)  # type: ignore[return-value]

    @property
    def best_dataframe(self) -> pd.DataFrame:
        """Every report of the best trial."""
        t = self.get_best_trial(*self._defaults("best_dataframe"))
        return self._result_of[t.trial_id].metrics_dataframe

    # -- tables --------------------------------------------------------------------------
    def dataframe(self, metric: str | None = None, mode: str | None = None) -> pd.DataFrame:
        """One row per trial: its last metrics, ``trial_id``, ``config/<key>`` columns and
        ``logdir``; with ``metric`` and ``mode``, each trial's best report instead."""
        if metric is None and mode is not None:
            raise ConfigError(
                f"dataframe(mode={mode!r}) needs a metric too: dataframe(metric='loss', "
                f"mode={mode!r}) picks each trial's best report; dataframe() its last one."
            )
        if metric is not None:
            if mode is None and metric == self.default_metric:
                mode = self.default_mode
            if mode is None:
                raise ConfigError(
                    f"dataframe(metric={metric!r}) needs a mode ('min' or 'max') to pick each "
                    f"trial's best report: dataframe(metric={metric!r}, mode='min')."
                )
            check_mode(mode, "dataframe(mode=...)")
        return self._grid.get_dataframe(filter_metric=metric, filter_mode=mode)

    @property
    def results_df(self) -> pd.DataFrame:
        """Each trial's last result with its flattened config, indexed by ``trial_id``."""
        return self.dataframe().set_index("trial_id")

    @property
    def trial_dataframes(self) -> dict[str, pd.DataFrame]:
        """Every report of every trial, by trial id."""
        return {t.trial_id: self._result_of[t.trial_id].metrics_dataframe for t in self._trials}

    def __len__(self) -> int:
        return len(self._trials)

    def __repr__(self) -> str:
        return (f"ExperimentAnalysis<{len(self)} trials, {self._grid.num_errors} errors, "
                f"path={self.experiment_path!r}>")

    # -- helpers -------------------------------------------------------------------------
    def _metric_mode(self, metric: str | None, mode: str | None, where: str) -> tuple[str, str]:
        metric = metric or self.default_metric
        mode = mode or self.default_mode
        if metric is None or mode is None:
            raise ConfigError(
                f"{where}() needs a metric and a mode (got metric={metric!r}, mode={mode!r}): "
                f"pass them, e.g. {where}(metric='loss', mode='min'), or give them to "
                f"tune.run(..., metric='loss', mode='min')."
            )
        check_mode(mode, f"{where}(mode=...)")
        return metric, mode

    def _defaults(self, where: str) -> tuple[str, str]:
        if self.default_metric is None or self.default_mode is None:
            raise ConfigError(
                f"analysis.{where} uses the metric and mode given to tune.run, but got "
                f"metric={self.default_metric!r}, mode={self.default_mode!r}. Pass them to "
                f"tune.run(..., metric='loss', mode='min'), or call "
                f"analysis.get_best_trial(metric=..., mode=...) instead."
            )
        return self.default_metric, self.default_mode

    def _find_trial(self, trial: FrozenTrial | str) -> FrozenTrial:
        if isinstance(trial, FrozenTrial):
            key = trial.trial_id
        elif isinstance(trial, (str, os.PathLike)):
            key = os.fspath(trial)
        else:
            raise ConfigError(
                f"Expected a trial from analysis.trials, a trial id or a trial folder; got "
                f"{type(trial).__name__}."
            )
        for t in self._trials:
            if key in (t.trial_id, t.path, t.path.rstrip("/")):
                return t
        raise ConfigError(
            f"No trial {key!r} in this experiment; its trial ids are "
            f"{[t.trial_id for t in self._trials][:20]}."
        )

    @staticmethod
    def _checkpoints_with_metrics(r: Result) -> list[tuple[Checkpoint, dict[str, object]]]:
        """The trial's kept checkpoints with the metrics reported with each; metrics a
        checkpoint lacks (e.g. one kept from before a restart) come from ``result.json``."""
        kept = list(r.best_checkpoints) or [(Checkpoint(p), {}) for p in sorted(list_checkpoints(r.path))]
        if not kept and r.checkpoint is not None:
            kept = [(r.checkpoint, {})]
        rows: dict[int, dict[str, Any]] | None = None
        out = []
        for ckpt, metrics in kept:
            if not metrics:
                if rows is None:
                    rows = {int(row["training_iteration"]): row for row in read_result_rows(r.path)
                            if isinstance(row.get("training_iteration"), (int, float))}
                m = _CKPT_ITER.search(ckpt.path.rstrip("/"))
                metrics = rows.get(int(m.group(1)), {}) if m else {}
            out.append((ckpt, dict(metrics)))
        return out


def _load_grid(path: str, metric: str | None, mode: str | None) -> tuple[ResultGrid, list[str]]:
    path = os.path.abspath(os.path.expanduser(path))
    state_file = os.path.join(path, STATE_FILE)
    if not os.path.exists(state_file):
        raise ConfigError(
            f"ExperimentAnalysis({path!r}): no {STATE_FILE} there, so it is not an experiment "
            f"folder. Pass the folder tune.run/Tuner.fit wrote (<storage_path>/<name>)."
        )
    with open(state_file) as f:
        state = json.load(f)
    results, ids, statuses = [], [], []
    for d in state["trials"]:
        # the trial folder inside this experiment folder: the experiment may have moved
        # since it ran (Ray finds it the same way)
        trial_path = os.path.join(path, os.path.basename(str(d["path"]).rstrip("/")))
        if not os.path.isdir(trial_path):
            trial_path = d["path"]
        r = Result.from_path(trial_path)
        r.config = d.get("config") if r.config is None else r.config
        if d.get("last_result") and not r.metrics:
            r.metrics = d["last_result"]
        if d.get("checkpoint") and r.checkpoint is None:
            moved = os.path.join(trial_path, os.path.basename(str(d["checkpoint"]).rstrip("/")))
            r.checkpoint = Checkpoint(moved if os.path.isdir(moved) else d["checkpoint"])
        if d.get("error") and r.error is None:
            r.error = TuneError(d["error"])
        results.append(r)
        ids.append(d["trial_id"])
        statuses.append(d.get("status") or ("ERROR" if r.error else "TERMINATED"))
    return ResultGrid(results, path, metric, mode, trial_ids=ids), statuses
