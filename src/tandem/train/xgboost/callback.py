"""``RayTrainReportCallback`` for ``xgboost.train``: one report per boosting round, the
booster checkpointed every ``frequency`` rounds and at the end."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import xgboost

from tandem.train._internal.gbdt import ReportCallbackBase, select_metrics


def flat_metrics(evals_log: Mapping[str, Mapping[str, Any]],
                 metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """``{"train": {"logloss": [...]}}`` -> ``{"train-logloss": last value}``, or only the
    asked-for keys (a dict renames ``{reported: xgboost key}``)."""
    flat: dict[str, float] = {}
    for data, by_metric in evals_log.items():
        for metric, values in by_metric.items():
            last = values[-1]
            flat[f"{data}-{metric}"] = float(last[0] if isinstance(last, tuple) else last)
    return select_metrics(flat, metrics)


class RayTrainReportCallback(ReportCallbackBase, xgboost.callback.TrainingCallback):
    """Reports ``<eval set>-<metric>`` (e.g. ``train-logloss``, ``valid-error``) once per
    round to tandem, from every worker (rank 0's are the run's metrics), and saves the
    booster as a checkpoint every ``frequency`` rounds and after the last round.

    Each round's report is sent when the next round ends (or training ends), so the last
    round's report carries the final checkpoint and every round is reported exactly once.

    Takes ``metrics`` (a key, a list, or ``{name: xgboost key}``), ``filename``
    (``model.ubj``), ``frequency``, ``checkpoint_at_end``, ``results_postprocessing_fn`` and
    ``extra_files``, as its base class ``ReportCallbackBase`` describes them.
    """

    CHECKPOINT_NAME = "model.ubj"
    library = "XGBoost"

    # a round's (metrics, checkpoint round?, checkpoint folder), sent when the next one ends
    _pending: tuple[dict[str, float], bool, str | None] | None = None

    @classmethod
    def load_booster(cls, path: str) -> xgboost.Booster:
        booster = xgboost.Booster()
        booster.load_model(path)
        return booster

    def _send(self) -> None:
        if self._pending is None:
            return
        metrics, checkpoint_round, ckpt_dir = self._pending
        self._pending = None
        gang = xgboost.collective.get_world_size() > 1
        self._deliver(metrics, checkpoint_round, ckpt_dir, _barrier if gang else None)

    def after_iteration(self, model: xgboost.Booster, epoch: int,
                        evals_log: dict[str, dict[str, Any]]) -> bool:
        self._send()
        metrics = self._report_metrics(flat_metrics(evals_log, None))
        due = self._due(epoch + 1)
        self._pending = (metrics, due, self._save(model) if due else None)
        return False

    def after_training(self, model: xgboost.Booster) -> xgboost.Booster:
        if self._pending is not None and not self._pending[1] and self._checkpoint_at_end:
            self._pending = (self._pending[0], True, self._save(model))
        self._send()
        return model


def _barrier() -> None:
    import numpy as np

    xgboost.collective.allreduce(np.zeros(1), xgboost.collective.Op.SUM)


ReportCallback = RayTrainReportCallback
