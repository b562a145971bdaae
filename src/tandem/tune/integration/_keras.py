"""``TuneReportCheckpointCallback`` (imports TensorFlow; see ``tandem.tune.integration.keras``)."""

from __future__ import annotations

from typing import Any

from tandem.train.tensorflow.keras import ReportCheckpointCallback

__all__ = ["TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(ReportCheckpointCallback):
    """Keras callback for Tune reporting and checkpointing (Ray's).

    Args:
        checkpoint_on: Keras events (less the ``on_``) to save the model at, as a
            checkpoint holding ``model.keras``; default ``"epoch_end"``.
        report_metrics_on: Keras events to report metrics at; default ``"epoch_end"``.
            Metrics are always reported with checkpoints.
        metrics: Which of Keras' logs to report: a name, a list of names, a dict
            ``{reported_name: keras_name}``, or None for all.
    """

    def _save_and_report_checkpoint(self, metrics: dict[str, Any], checkpoint: Any) -> None:
        from tandem import tune

        tune.report(metrics, checkpoint=checkpoint)

    def _report_metrics(self, metrics: dict[str, object]) -> None:
        from tandem import tune

        tune.report(metrics)
