"""``TuneReportCheckpointCallback`` for ``xgboost.train`` inside a Tune trial (Ray's
``ray.tune.integration.xgboost``): a report per boosting round, the booster checkpointed
every ``frequency`` rounds and at the end. Needs ``pip install 'tandem-ml[xgboost]'``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tandem.train.xgboost.callback import RayTrainReportCallback


class TuneReportCheckpointCallback(RayTrainReportCallback):
    """XGBoost callback that reports metrics (and checkpoints) to Tune.

    A trial function is one tandem worker, so this is the train callback with Tune's
    signature.

    Args:
        metrics: Metrics to report: a key, a list of keys (reported under the same
            name), or ``{reported name: xgboost key}``; keys look like ``"eval-logloss"``.
            All by default.
        filename: The booster's file name in the checkpoint (``"model.ubj"``).
        frequency: Checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: Checkpoint after the last round.
        results_postprocessing_fn: Maps the metrics dict before it is reported (e.g. to
            average the folds of ``xgboost.cv``).
    """

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str = RayTrainReportCallback.CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(
            metrics=metrics,
            filename=filename,
            frequency=frequency,
            checkpoint_at_end=checkpoint_at_end,
            results_postprocessing_fn=results_postprocessing_fn,
        )


class TuneReportCallback:
    """Removed in Ray (2.11): constructing it raises, as Ray's does."""

    def __new__(cls: type, *args: object, **kwargs: object) -> Any:
        raise DeprecationWarning(
            "`TuneReportCallback` is deprecated. "
            "Use `ray.tune.integration.xgboost.TuneReportCheckpointCallback` instead."
        )


__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]
