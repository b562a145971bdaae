"""Ray's ``ray.train.tensorflow.keras`` (and ``ray.air.integrations.keras``):
``ReportCheckpointCallback``, a Keras callback that reports Keras' logs (and a checkpoint of
the model) through ``tandem.train.report``; ``tandem.tune.integration.keras`` subclasses it.

Importing this module imports TensorFlow (the callback subclasses
``tf.keras.callbacks.Callback``): import it in the train function, or in a script that
uses TensorFlow anyway.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, ClassVar

from tandem.train.backends.tensorflow import require_tensorflow

require_tensorflow("tandem.train.tensorflow.keras")

from tensorflow.keras.callbacks import Callback as KerasCallback

from tandem import train
from tandem.train.api.checkpoint import Checkpoint

__all__ = ["ReportCheckpointCallback"]


class _Callback(KerasCallback):
    """Calls ``_handle(logs, when)`` on the Keras events named in ``on`` (Ray's)."""

    _allowed: ClassVar[list[str]] = [
        "epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end",
        "test_batch_begin", "test_batch_end", "predict_batch_begin", "predict_batch_end",
        "train_begin", "train_end", "test_begin", "test_end", "predict_begin", "predict_end",
    ]

    def __init__(self, on: str | list[str] = "validation_end") -> None:
        super().__init__()
        if not isinstance(on, list):
            on = [on]
        if any(w not in self._allowed for w in on):
            raise ValueError(
                f"Invalid trigger time selected: {on}. Must be one of {self._allowed}"
            )
        self._on = on

    def _handle(self, logs: dict | None, when: str) -> None:
        raise NotImplementedError

    def _maybe(self, when: str, logs: dict | None) -> None:
        if when in self._on:
            self._handle(logs, when)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._maybe("epoch_begin", logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._maybe("epoch_end", logs)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("train_batch_begin", logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("train_batch_end", logs)

    def on_test_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("test_batch_begin", logs)

    def on_test_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("test_batch_end", logs)

    def on_predict_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("predict_batch_begin", logs)

    def on_predict_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._maybe("predict_batch_end", logs)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._maybe("train_begin", logs)

    def on_train_end(self, logs: dict | None = None) -> None:
        self._maybe("train_end", logs)

    def on_test_begin(self, logs: dict | None = None) -> None:
        self._maybe("test_begin", logs)

    def on_test_end(self, logs: dict | None = None) -> None:
        self._maybe("test_end", logs)

    def on_predict_begin(self, logs: dict | None = None) -> None:
        self._maybe("predict_begin", logs)

    def on_predict_end(self, logs: dict | None = None) -> None:
        self._maybe("predict_end", logs)


class ReportCheckpointCallback(_Callback):
    """Reports Keras' logs with ``tandem.train.report`` and, on ``checkpoint_on`` events, a
    checkpoint holding the model (``model.keras``, Ray's file name). Metrics are always
    reported with checkpoints.

    Args:
        checkpoint_on: Keras events (less the ``on_``) to checkpoint at; default
            ``"epoch_end"``.
        report_metrics_on: Keras events to report metrics at; default ``"epoch_end"``.
        metrics: the Keras log keys to report (a name, a list, or a dict of reported name
            -> Keras key); None reports all logs.

    Raises (at ``fit``'s start, before the first step): ``ValueError`` when the gang has
    several workers but the model was not built inside a ``MultiWorkerMirroredStrategy``
    scope, so its gradients would not be all-reduced.
    """

    def __init__(
        self,
        checkpoint_on: str | list[str] = "epoch_end",
        report_metrics_on: str | list[str] = "epoch_end",
        metrics: str | list[str] | dict[str, str] | None = None,
    ) -> None:
        if isinstance(checkpoint_on, str):
            checkpoint_on = [checkpoint_on]
        if isinstance(report_metrics_on, str):
            report_metrics_on = [report_metrics_on]
        super().__init__(on=sorted(set(checkpoint_on + report_metrics_on)))
        self._checkpoint_on = checkpoint_on
        self._report_metrics_on = report_metrics_on
        self._metrics = metrics

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        check_model_in_strategy_scope(self.model)
        super().on_train_begin(logs)

    def _handle(self, logs: dict | None, when: str) -> None:
        metrics = self._get_reported_metrics(dict(logs or {}))
        if when in self._checkpoint_on:
            # every rank holds the same weights; rank 0's copy is the run's checkpoint (two
            # ranks writing one checkpoint folder could interleave their files)
            if train.get_context().get_world_rank() == 0:
                import tempfile

                d = tempfile.mkdtemp(prefix="tandem-keras-ckpt-")
                try:
                    self.model.save(os.path.join(d, "model.keras"))
                    self._save_and_report_checkpoint(metrics, Checkpoint.from_directory(d))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
            else:
                self._save_elsewhere()
                self._report_metrics(metrics)
        else:
            self._report_metrics(metrics)

    # Ray's hooks (RayReportCallback): where the metrics and checkpoint go
    def _save_and_report_checkpoint(self, metrics: dict[str, object], checkpoint: Checkpoint) -> None:
        train.report(metrics, checkpoint=checkpoint)

    def _report_metrics(self, metrics: dict[str, object]) -> None:
        train.report(metrics)

    def _save_elsewhere(self) -> None:
        """Non-zero ranks save too (and throw it away): saving a distributed model may be a
        collective step every worker must take part in."""
        import tempfile

        d = tempfile.mkdtemp(prefix="tandem-keras-ckpt-")
        try:
            self.model.save(os.path.join(d, "model.keras"))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def _get_reported_metrics(self, logs: dict[str, object]) -> dict[str, object]:
        if self._metrics is None:
            reported = logs
        elif isinstance(self._metrics, str):
            reported = {self._metrics: logs[self._metrics]}
        elif isinstance(self._metrics, list):
            reported = {m: logs[m] for m in self._metrics}
        else:
            reported = {key: logs[m] for key, m in self._metrics.items()}
        return {k: (float(v) if hasattr(v, "__float__") and not isinstance(v, (int, float, bool))
                    else v) for k, v in reported.items()}


def check_model_in_strategy_scope(model: object) -> None:
    """Raises ``ValueError`` when this worker belongs to a gang of several but ``model`` was
    not built in a ``MultiWorkerMirroredStrategy`` scope (its variables are not mirrored,
    so each worker would train alone). Called at ``fit``'s start by the callback."""
    world = train.get_context().get_world_size()
    if world <= 1:
        return
    strategy = getattr(model, "distribute_strategy", None)
    replicas = getattr(strategy, "num_replicas_in_sync", 1)
    if replicas < world:
        raise ValueError(
            f"The Keras model {getattr(model, 'name', type(model).__name__)!r} was built "
            f"outside a tf.distribute strategy scope (it trains on {replicas} replica(s), "
            f"but the gang has {world} workers), so its gradients would not be all-reduced "
            f"and each worker would train its own model. Build and compile it inside the "
            f"strategy's scope:\n"
            f"    strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
            f"    with strategy.scope():\n"
            f"        model = build_model(); model.compile(...)"
        )
