"""``FIFOScheduler``: run every trial to completion, in the order they were created."""

from __future__ import annotations

from typing import Any, ClassVar

from tandem.tune.schedulers.base import CONTINUE, Decision, TrialScheduler
from tandem.tune.trial import Trial

__all__ = ["FIFOScheduler"]


class FIFOScheduler(TrialScheduler):
    """The default: never stops, pauses or restarts a trial; needs no metric."""

    requires_metric: ClassVar[bool] = False

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        return CONTINUE
