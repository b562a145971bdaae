"""``ray.train.v2.api.exceptions``: the errors ``fit()`` raises when the run fails.

``TrainingFailedError`` is the base: ``WorkerGroupError`` when a worker raised or died
(``worker_failures``: rank -> exception), ``ControllerError`` when tandem's controller
failed, ``PreemptionError`` when preemptions exceeded ``max_preemption_failures``.
"""

from __future__ import annotations

from tandem.train.api.errors import (
    ControllerError,
    NCCLHangError,
    TrainingFailedError,
    WorkerGroupError,
)
from tandem.train.api.preemption import PreemptionError

__all__ = ["ControllerError", "NCCLHangError", "PreemptionError", "TrainingFailedError",
           "WorkerGroupError"]
