"""``RayTrainReportCallback`` for ``xgboost.train``: one report per boosting round, the
booster checkpointed every ``frequency`` rounds and at the end."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import xgboost

from tandem.train.api.checkpoint import Checkpoint


def flat_metrics(evals_log: Mapping[str, Mapping[str, Any]],
                 metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """``{"train": {"logloss": [...]}}`` -> ``{"train-logloss": last value}``, or only the
    asked-for keys (a dict renames ``{reported: xgboost key}``)."""
    flat: dict[str, float] = {}
    for data, by_metric in evals_log.items():
        for metric, values in by_metric.items():
            last = values[-1]
            flat[f"{data}-{metric}"] = float(last[0] if isinstance(last, tuple) else last)
    if metrics is None:
        return flat
    wanted = {metrics: metrics} if isinstance(metrics, str) else (
        dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics})
    return {out: flat[key] for out, key in wanted.items() if key in flat}


class RayTrainReportCallback(xgboost.callback.TrainingCallback):
    """Reports ``<eval set>-<metric>`` (e.g. ``train-logloss``, ``valid-error``) once per
    round to tandem, from every worker (rank 0's are the run's metrics), and saves the
    booster as a checkpoint every ``frequency`` rounds and after the last round.

    Each round's report is sent when the next round ends (or training ends), so the last
    round's report carries the final checkpoint and every round is reported exactly once.

    Args:
        metrics: which metrics to report (a key, a list, or ``{name: xgboost key}``); all
            by default.
        filename: the booster's file name in the checkpoint.
        frequency: checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: checkpoint after the last round.
        results_postprocessing_fn: maps the metrics dict before it is reported.
        extra_files: more files (name -> bytes) written into every checkpoint.
    """

    CHECKPOINT_NAME = "model.ubj"

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str = CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, float]], dict[str, float]] | None = None,
        extra_files: Mapping[str, bytes] | None = None,
    ) -> None:
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(f"frequency={frequency!r}: give a whole number of rounds >= 0.")
        self._metrics = metrics
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._post = results_postprocessing_fn
        self._extra = dict(extra_files or {})
        self._pending: tuple[dict[str, float], tuple[str | None] | None] | None = None

    @staticmethod
    def get_model(checkpoint: Checkpoint, filename: str = CHECKPOINT_NAME) -> xgboost.Booster:
        """The booster saved in ``checkpoint`` by this callback."""
        booster = xgboost.Booster()
        with checkpoint.as_directory() as d:
            path = os.path.join(d, filename)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{checkpoint!r} holds no {filename!r} (it has "
                    f"{sorted(os.listdir(d))}); was it written by the XGBoost report "
                    f"callback? Pass filename= if it was saved under another name."
                )
            booster.load_model(path)
        return booster

    def _rank(self) -> int:
        from tandem.train import get_context

        return get_context().world_rank

    def _save(self, model: xgboost.Booster) -> tuple[str | None]:
        """A checkpoint is due this round: rank 0 saves the booster (the same on every
        rank); the others hold ``(None,)`` so they know a checkpoint round it is."""
        if self._rank() != 0:
            return (None,)
        d = tempfile.mkdtemp(prefix="tandem-xgb-")
        model.save_model(os.path.join(d, self._filename))
        _write_files(d, self._extra)
        return (d,)

    def _send(self) -> None:
        if self._pending is None:
            return
        from tandem import train

        metrics, ckpt = self._pending
        self._pending = None
        ckpt_dir = ckpt[0] if ckpt else None
        try:
            if ckpt and xgboost.collective.get_world_size() > 1:
                # the other ranks report a checkpoint round before rank 0 does, so that the
                # checkpoint is complete (committable) when rank 0's report arrives, even if
                # the run is stopped right after it (a tuner's scheduler at max_t)
                if self._rank() != 0:
                    train.report(metrics)
                _barrier()
                if self._rank() != 0:
                    return
            train.report(metrics, checkpoint=Checkpoint.from_directory(ckpt_dir)
                         if ckpt_dir else None)
        finally:
            if ckpt_dir:
                shutil.rmtree(ckpt_dir, ignore_errors=True)

    def after_iteration(self, model: xgboost.Booster, epoch: int,
                        evals_log: dict[str, dict[str, Any]]) -> bool:
        self._send()
        metrics = flat_metrics(evals_log, self._metrics)
        if self._post is not None:
            metrics = self._post(metrics)
        due = bool(self._frequency) and (epoch + 1) % self._frequency == 0
        self._pending = (metrics, self._save(model) if due else None)
        return False

    def after_training(self, model: xgboost.Booster) -> xgboost.Booster:
        if self._pending is not None and not self._pending[1] and self._checkpoint_at_end:
            self._pending = (self._pending[0], self._save(model))
        self._send()
        return model


def _barrier() -> None:
    import numpy as np

    xgboost.collective.allreduce(np.zeros(1), xgboost.collective.Op.SUM)


def _write_files(directory: str, files: Mapping[str, bytes]) -> None:
    for name, blob in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(blob)


ReportCallback = RayTrainReportCallback
