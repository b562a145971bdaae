"""The gang scheduler: the default admission policy, under its historical name.

``GangScheduler`` is ``FifoGangPolicy`` (tandem.jobs.admission.fifo) with a clock and the
``select(pending, cluster)`` call older code uses: jobs are considered by priority (higher
first), then by submission order; a job starts only when its whole gang can be placed; a
smaller job behind a blocked one may start ahead of it when it fits (backfill) until the
blocked job has waited ``reserve_after_s``. Other policies (quotas, fair share, priority
preemption) are in ``tandem.jobs.admission``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tandem._core.clock import Clock, RealClock
from tandem._core.records import record
from tandem.cluster.base import Cluster, Placement
from tandem.jobs.admission import ClusterCapacity, FifoGangPolicy, RunningSet, Start
from tandem.jobs.admission.base import QueuedJob

__all__ = ["GangScheduler", "QueuedJob", "StartDecision"]


@record
class StartDecision:
    job: Any
    placement: Placement


class GangScheduler(FifoGangPolicy):
    """``FifoGangPolicy`` with a clock. Holds no state but its settings; not thread-safe by
    itself (the service calls it under its lock)."""

    def __init__(self, clock: Clock | None = None, reserve_after_s: float = 30.0) -> None:
        super().__init__(reserve_after_s=reserve_after_s)
        self.clock = clock or RealClock()

    def select(self, pending: Sequence[object], cluster: Cluster) -> list[StartDecision]:
        """Places what fits now, in order; returns the jobs to start with their placements.

        The caller owns the placements returned (it must start the jobs or release them).
        """
        decisions = self.make_decision(self.order(pending), RunningSet(), ClusterCapacity(cluster),
                                       self.clock.now())
        return [StartDecision(d.job, d.placement) for d in decisions if isinstance(d, Start)]
