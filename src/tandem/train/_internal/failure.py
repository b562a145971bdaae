"""``FailurePolicy``: after a worker failure, decide what the controller does next.

The policy decides; the controller acts (STYLE.md section 2): it returns a
``FailureDecision`` and never touches the gang.
"""

from __future__ import annotations

import enum

from tandem._core.records import record
from tandem.train.api.config import FailureConfig


class FailureDecision(enum.Enum):
    """What the controller does after a failed gang has been killed."""

    RETRY = "RETRY"
    """Start a new gang on the same placement, from the latest committed checkpoint."""
    RESCHEDULE = "RESCHEDULE"
    """A node of the placement is gone: give the placement back, wait until the cluster
    places the whole gang again, then start it from the latest committed checkpoint."""
    RAISE = "RAISE"
    """Give up: the run fails with the root cause."""


@record
class FailureStatus:
    """What the policy is told about a failure.

    Attributes:
        num_failures: failures of this run so far, this one included.
        rank: the rank whose failure is the root cause (None: unknown).
        reason: the root cause, in words.
        placement_alive: False when a node of the gang's placement was lost.
    """

    num_failures: int
    rank: int | None
    reason: str
    placement_alive: bool = True


class FailurePolicy:
    """Restarts while ``num_failures <= FailureConfig.max_failures`` (always with -1):
    on the same placement while it is alive, on a new one after node loss. A failure past
    the budget raises, whatever its cause."""

    def __init__(self, config: FailureConfig | None) -> None:
        self.config = config or FailureConfig()

    def within_budget(self, num_failures: int) -> bool:
        m = self.config.max_failures
        return m == -1 or num_failures <= m

    def within_preemption_budget(self, num_preemptions: int) -> bool:
        """Preemptions have their own budget (``max_preemption_failures``, -1: unlimited)
        and never count against ``max_failures``."""
        m = self.config.max_preemption_failures
        return m == -1 or num_preemptions <= m

    def make_preemption_decision(self, num_preemptions: int) -> FailureDecision:
        """After the scheduler preempted the run (its gang is stopped): RESCHEDULE (wait in
        the queue, resume from the latest checkpoint) or RAISE (budget spent)."""
        if not self.within_preemption_budget(num_preemptions):
            return FailureDecision.RAISE
        return FailureDecision.RESCHEDULE

    def make_decision(self, status: FailureStatus) -> FailureDecision:
        if not self.within_budget(status.num_failures):
            return FailureDecision.RAISE
        if not status.placement_alive:
            return FailureDecision.RESCHEDULE
        return FailureDecision.RETRY
