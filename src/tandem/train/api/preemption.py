"""``PreemptionInfo`` and ``PreemptionError``, as Ray Train spells them.

tandem preempts a run when the job scheduler gives its resources to a higher-priority job
(``tandem.jobs.admission.PriorityPreemptionPolicy``): every worker then sees a
``PreemptionInfo`` from ``train.get_preemption_info()`` until its gang is stopped; the run
is re-queued and resumes from its latest checkpoint.
"""

from __future__ import annotations

from tandem._core.records import record
from tandem.train.api.errors import TrainingFailedError


@record
class PreemptionInfo:
    """An imminent preemption.

    Attributes:
        deadline_ms: when the workers are stopped (UNIX time in milliseconds).
        preempted_node_to_ranks: each node of the run to the world ranks on it (a
            scheduler preemption takes the whole gang).
        reason: why, in words (``"preempted for job_x (priority 5 > 0)"``); tandem only.
    """

    deadline_ms: int | None
    preempted_node_to_ranks: dict[str, list[int]]
    reason: str = ""

    @property
    def preempted_node_ids(self) -> list[str]:
        """Preempted node ids, sorted."""
        return sorted(self.preempted_node_to_ranks)

    @property
    def preempted_ranks(self) -> list[int]:
        """Every affected rank, sorted."""
        return sorted({r for ranks in self.preempted_node_to_ranks.values() for r in ranks})


class PreemptionError(TrainingFailedError):
    """A run was preempted more often than ``FailureConfig(max_preemption_failures=...)``
    allows. ``preemption_info`` is the last preemption; ``drain_timed_out`` says whether
    the workers were stopped at the deadline (True) or had checkpointed before it."""

    def __init__(self, preemption_info: PreemptionInfo, drain_timed_out: bool = False,
                 message: str | None = None) -> None:
        self.preemption_info = preemption_info
        self.drain_timed_out = drain_timed_out
        super().__init__(message or (
            f"Training was interrupted by preemption (preempted_ranks="
            f"{preemption_info.preempted_ranks}, drain_timed_out={drain_timed_out})."))

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (self.__class__, (self.preemption_info, self.drain_timed_out, str(self)))
