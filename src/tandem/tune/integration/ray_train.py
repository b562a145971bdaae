"""``TuneReportCallback``: forward a train run's reports to the tuning trial that started it.

Use it in a trial function that builds and fits a Trainer::

    def train_driver_fn(config):
        trainer = TorchTrainer(train_loop, train_loop_config=config,
                               scaling_config=ScalingConfig(num_workers=2),
                               run_config=RunConfig(callbacks=[TuneReportCallback()]))
        trainer.fit()

The nested train job goes to the same job service as the trial (the trial lends it its
slot while it waits). Each of rank 0's reports becomes a trial result; the trial's
checkpoint is the train run's latest. Outside a trial (calling ``train_driver_fn({...})``
directly), the callback does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.result import Result
from tandem.train.legacy.callbacks import TrainingCallback
from tandem.tune import session as tune_session


class TuneReportCallback(TrainingCallback):
    """Forwards a run's reports to the trial (a ``tandem.train.Callback`` for
    ``RunConfig(callbacks=...)``, and a 1.x ``TrainingCallback`` for ``Trainer.run``).

    Args:
        metrics: which metrics to forward: None (all), a list of names, or a dict mapping
            the trial's metric name to the train run's (``{"acc": "val_accuracy"}``).
    """

    def __init__(self, metrics: str | Sequence[str] | Mapping[str, str] | None = None) -> None:
        if isinstance(metrics, str):
            metrics = [metrics]
        self._metrics = metrics
        self._pending: tuple[int, Checkpoint] | None = None
        self._held: dict | None = None

    def _select(self, row: Mapping[str, object]) -> dict[str, object]:
        if self._metrics is None:
            return {k: v for k, v in row.items() if k not in ("training_iteration", "time_total_s")}
        if isinstance(self._metrics, Mapping):
            return {k: row[v] for k, v in self._metrics.items() if v in row}
        return {k: row[k] for k in self._metrics if k in row}

    # current API: called with rank 0's report rows, and committed checkpoints.
    # A checkpoint is committed once every rank reported its iteration, which may be after
    # rank 0's row went by; so each row is held until the next one (or the end) arrives and
    # then forwarded with the latest checkpoint committed for it.
    def on_checkpoint(self, entry: tuple[int, Any, dict[str, Any]]) -> None:
        self._pending = (entry[0], entry[1])

    def on_report(self, rows: list[dict[str, object]]) -> None:
        if not tune_session.is_session_enabled():
            return
        for row in rows:
            if self._held is not None:
                self._forward(self._held)
            self._held = row

    def on_end(self, result: Result) -> None:
        if self._held is not None and tune_session.is_session_enabled():
            self._forward(self._held)
        self._held = None

    def _forward(self, row: dict) -> None:
        checkpoint = None
        if self._pending is not None and row.get("training_iteration", 0) >= self._pending[0]:
            checkpoint = self._pending[1]
            self._pending = None
        tune_session.report(self._select(row), checkpoint=checkpoint)

    # the older Trainer API: handle_result(list of each worker's report)
    def handle_result(self, results: list[dict[str, object]], **info: object) -> None:
        if results and tune_session.is_session_enabled():
            tune_session.report(self._select(results[0]))

