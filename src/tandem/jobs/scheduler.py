"""The gang scheduler's policy: which queued jobs start now.

A job starts only when its whole gang can be placed. Jobs are considered by priority
(higher first), then by submission order. A smaller job behind a blocked one may start
ahead of it when it fits (backfill) — until the blocked job has waited ``reserve_after_s``;
from then on nothing behind it starts until it has, so a large job is never starved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tandem._core.clock import Clock, RealClock
from tandem.cluster.base import Cluster, Placement


class QueuedJob(Protocol):
    """What the scheduler reads of a queued job (read-only)."""

    @property
    def priority(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def submitted_at(self) -> float:  # clock time
        ...
    @property
    def bundles(self) -> Sequence[Any]: ...
    @property
    def strategy(self) -> str: ...


@dataclass(frozen=True)
class StartDecision:
    job: Any
    placement: Placement


class GangScheduler:
    """Decides which pending jobs to start. Holds no state but its settings; not thread-safe
    by itself (the service calls it under its lock)."""

    def __init__(self, clock: Clock | None = None, reserve_after_s: float = 30.0) -> None:
        self.clock = clock or RealClock()
        self.reserve_after_s = reserve_after_s

    @staticmethod
    def order(jobs: Sequence[QueuedJob]) -> list[QueuedJob]:
        return sorted(jobs, key=lambda j: (-j.priority, j.seq))

    def select(self, pending: Sequence[QueuedJob], cluster: Cluster) -> list[StartDecision]:
        """Places what fits now, in order; returns the jobs to start with their placements.

        The caller owns the placements returned (it must start the jobs or release them).
        """
        now = self.clock.now()
        starts: list[StartDecision] = []
        for job in self.order(pending):
            placement = cluster.place(job.bundles, job.strategy)
            if placement is not None:
                starts.append(StartDecision(job, placement))
                continue
            if now - job.submitted_at >= self.reserve_after_s:
                break  # this job has waited long enough: hold the line for it
        return starts
