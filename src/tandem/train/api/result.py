"""``Result``: what a run produced."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tandem.train.api.checkpoint import Checkpoint, _is_url, arrow_filesystem, get_fs

if TYPE_CHECKING:
    import pandas as pd

RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.csv"
PARAMS_FILE = "params.json"
ERROR_FILE = "error.txt"


@dataclass(init=False)
class Result:
    """A finished (or failed, or stopped) run.

    Attributes:
        metrics: rank 0's last report, with or without a checkpoint (None if it never
            reported).
        checkpoint: the latest persisted checkpoint, or None.
        best_checkpoints: the kept checkpoints as ``(Checkpoint, metrics)``, oldest first.
        path: the run folder.
        error: why the run failed, or None.
        config: the config the run was started with (a tuning trial's sampled config).
        return_value: what the train function returned on rank 0 when the run finished
            (Ray's ``Result.return_value``); None when it failed or was stopped, or when
            the run is read back from its folder.
        return_values: the same for every worker, by rank (``return_values[0]`` is
            ``return_value``); None where ``return_value`` is.
    """

    metrics: dict[str, Any] | None
    checkpoint: Checkpoint | None
    path: str
    error: BaseException | None = None
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    config: dict[str, Any] | None = None
    return_value: Any = field(default=None, repr=False, compare=False)
    return_values: list[Any] | None = field(default=None, repr=False, compare=False)
    _dataframe: Any = field(default=None, repr=False, init=False)

    def __init__(self, metrics: dict[str, Any] | None, checkpoint: Checkpoint | None,
                 path: str, error: BaseException | None = None,
                 best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] | None = None,
                 config: dict[str, Any] | None = None, return_value: Any = None,
                 return_values: list[Any] | None = None,
                 metrics_dataframe: pd.DataFrame | None = None) -> None:
        """As Ray's ``Result(...)``; ``metrics_dataframe`` (None: read from the run folder's
        ``result.json`` when asked for) is what ``result.metrics_dataframe`` returns."""
        self.metrics = metrics
        self.checkpoint = checkpoint
        self.path = path
        self.error = error
        self.best_checkpoints = list(best_checkpoints) if best_checkpoints is not None else []
        self.config = config
        self.return_value = return_value
        self.return_values = return_values
        self._dataframe = metrics_dataframe

    @property
    def metrics_dataframe(self) -> pd.DataFrame:
        """Every report of rank 0 (one row each), read from the run folder's ``result.json``."""
        import pandas as pd

        if self._dataframe is not None:
            return self._dataframe
        return pd.DataFrame(read_result_rows(self.path))

    @property
    def filesystem(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` that :attr:`path` lives on (as Ray's
        ``Result.filesystem``); an fsspec URL's filesystem is wrapped with
        ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``."""
        return arrow_filesystem(self.path)

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint with the best ``metric`` (a flat ``"a/b"`` key reaches nested
        metrics) among those reported with it, as Ray's ``Result.get_best_checkpoint``.

        Raises:
            RuntimeError: no checkpoint, or none reported with ``metric``.
            ValueError: ``mode`` is not ``"min"`` or ``"max"``.
        """
        if not self.best_checkpoints:
            raise RuntimeError("No checkpoint exists in the trial directory!")
        if mode not in ("max", "min"):
            raise ValueError(f'Unsupported mode: {mode}. Please choose from ["min", "max"]!')

        def lookup(metrics: dict[str, object]) -> Any:
            value: Any = metrics
            for key in metric.split("/"):
                if not isinstance(value, dict) or key not in value:
                    return metrics.get(metric)
                value = value[key]
            return value

        valid = [(c, m) for c, m in self.best_checkpoints if lookup(m) is not None]
        if not valid:
            raise RuntimeError(
                f"Invalid metric name {metric}! You may choose from the following metrics: "
                f"{(self.metrics or {}).keys()}."
            )
        pick = max if mode == "max" else min
        return pick(valid, key=lambda x: lookup(x[1]))[0]

    @classmethod
    def from_path(cls, path: str) -> Result:
        """Rebuilds a Result from a run folder (e.g. after the driver exited)."""
        rows = read_result_rows(path)
        metrics = rows[-1] if rows else None
        checkpoints = sorted(list_checkpoints(path))
        checkpoint = Checkpoint(checkpoints[-1]) if checkpoints else None
        error = None
        err_path = os.path.join(path, ERROR_FILE)
        if not _is_url(path) and os.path.exists(err_path):
            with open(err_path) as f:
                from tandem.train.api.errors import TrainingFailedError

                error = TrainingFailedError(f.read())
        config = None
        params = os.path.join(path, PARAMS_FILE)
        if not _is_url(path) and os.path.exists(params):
            with open(params) as f:
                config = json.load(f)
        return cls(metrics=metrics, checkpoint=checkpoint, path=path, error=error,
                   best_checkpoints=kept_checkpoints(path, rows), config=config)

    def plot(self, metric: str | None = None, *, x: str = "training_iteration",
             path: str | None = None, ax: Any = None) -> Any:
        """The learning curve of ``metric`` (default: a loss or accuracy reported) over
        ``x``, from every report of the run (matplotlib).

        Args:
            metric: the reported key to plot.
            x: the key for the x axis (``training_iteration``, ``time_total_s``, ...).
            path: save the figure there (PNG by its extension).
            ax: draw into this matplotlib ``Axes`` instead of a new figure.

        Returns:
            The matplotlib ``Figure`` (a notebook shows it).
        """
        from tandem.train.api import plot as _plot

        rows: list[dict[str, Any]] = (
            [{str(k): v for k, v in r.items()} for r in self._dataframe.to_dict("records")]
            if self._dataframe is not None else read_result_rows(self.path))
        metric = _plot.pick_metric([rows], metric)
        fig = ax.figure if ax is not None else _plot.figure()
        ax = ax if ax is not None else fig.add_subplot()
        xs, ys = _plot.curve(rows, metric, x)
        ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, label=os.path.basename(
            self.path.rstrip("/")) or "run")
        ax.set_xlabel(x)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} over {x}")
        ax.grid(alpha=0.3)
        return _plot.save(fig, path)

    def __repr__(self) -> str:
        err = f", error={type(self.error).__name__}" if self.error is not None else ""
        metrics = ({k: v for k, v in self.metrics.items() if k not in _REPR_HIDDEN}
                   if isinstance(self.metrics, dict) else self.metrics)
        return f"Result(metrics={metrics!r}, checkpoint={self.checkpoint!r}, path={self.path!r}{err})"


# keys Ray's Result repr leaves out: ray.tune.result.AUTO_RESULT_KEYS and
# ray.tune.experimental.output.BLACKLISTED_KEYS
_REPR_HIDDEN = frozenset({
    "training_iteration", "time_total_s", "episodes_total", "timesteps_total", "node_ip",
    "hostname", "pid", "time_this_iter_s", "timestamp", "date", "time_since_restore",
    "timesteps_since_restore", "iterations_since_restore", "config", "checkpoint_dir_name",
    "done", "experiment_tag", "trial_id", "should_checkpoint",
                "_report_on"})


def kept_checkpoints(path: str, rows: list[dict[str, object]] | None = None
                     ) -> list[tuple[Checkpoint, dict[str, Any]]]:
    """The checkpoints a run folder keeps (oldest first), each with the metrics reported
    with it: those ``checkpoints.json`` lists (the committed ones), else every
    ``checkpoint_*`` folder."""
    rows = read_result_rows(path) if rows is None else rows
    by_iteration = {r.get("training_iteration"): r for r in rows}
    state_file = path.rstrip("/") + "/checkpoints.json"
    names: list[tuple[int | None, str]] = []
    try:
        if _is_url(path):
            fs, p = get_fs(state_file)
            with fs.open(p) as f:
                state = json.load(f)
        else:
            with open(state_file) as f:
                state = json.load(f)
        names = [(int(it), str(name)) for it, name in state.get("committed", [])]
    except (OSError, ValueError, TypeError):
        names = [(_iteration_of(c), os.path.basename(c)) for c in sorted(list_checkpoints(path))]
    out = []
    for it, name in names:
        metrics = dict(by_iteration.get(it) or {}) if it is not None else {}
        out.append((Checkpoint(path.rstrip("/") + "/" + name), metrics))
    return out


def _iteration_of(checkpoint_path: str) -> int | None:
    name = os.path.basename(checkpoint_path.rstrip("/"))
    try:
        return int(name.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return None


def read_result_rows(path: str) -> list[dict[str, Any]]:
    target = path.rstrip("/") + "/" + RESULT_FILE
    rows: list[dict[str, Any]] = []
    if _is_url(path):
        fs, p = get_fs(target)
        if not fs.exists(p):
            return rows
        with fs.open(p, "r") as f:
            lines = f.read().splitlines()
    else:
        if not os.path.exists(target):
            return rows
        with open(target) as f:
            lines = f.read().splitlines()
    for line in lines:
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut short by a crash: everything before it is intact
    return rows


def list_checkpoints(path: str) -> list[str]:
    """The ``checkpoint_*`` folders in a run folder (a local path or an fsspec URL)."""
    if _is_url(path):
        fs, p = get_fs(path)
        try:
            names = [n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(p, detail=False)]
        except FileNotFoundError:
            return []
        return [path.rstrip("/") + "/" + n for n in names if n.startswith("checkpoint_")]
    if not os.path.isdir(path):
        return []
    return [os.path.join(path, n) for n in os.listdir(path)
            if n.startswith("checkpoint_") and os.path.isdir(os.path.join(path, n))]
