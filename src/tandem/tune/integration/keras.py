"""Ray's ``ray.tune.integration.keras``: ``TuneReportCheckpointCallback``, a Keras callback
that reports Keras' logs (and, on ``checkpoint_on`` events, the model as a checkpoint) to
the trial with ``tune.report``; ``TuneReportCallback`` is deprecated in Ray and raises
there and here.

TensorFlow is imported when ``TuneReportCheckpointCallback`` is first used, not when this
module is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tandem.tune.integration._keras import TuneReportCheckpointCallback

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]

_DEPRECATION_MESSAGE = (
    "The `ray.tune.integration.keras` module is deprecated in favor of "
    "`ray.train.tensorflow.keras.ReportCheckpointCallback`."
)


class TuneReportCallback:
    """Deprecated in Ray: creating one raises ``DeprecationWarning`` (Ray's message). Use
    ``TuneReportCheckpointCallback`` (``checkpoint_on=[]`` to report only) or
    ``tandem.train.tensorflow.keras.ReportCheckpointCallback``."""

    def __new__(cls, *args: object, **kwargs: object) -> TuneReportCallback:
        raise DeprecationWarning(_DEPRECATION_MESSAGE)


def __getattr__(name: str) -> Any:
    if name == "TuneReportCheckpointCallback":
        from tandem.tune.integration._keras import TuneReportCheckpointCallback

        return TuneReportCheckpointCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
