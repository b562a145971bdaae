"""``FifoGangPolicy``: today's gang scheduler (the default).

Jobs are considered in queue order (priority, then submission). A job starts when its whole
gang can be placed. A smaller job behind a blocked one may start ahead of it when it fits
(backfill) until the blocked job has waited ``reserve_after_s``; from then on nothing behind
it starts until it has, so a large job is never starved. No quotas, no preemption.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tandem.jobs.admission.base import (
    AdmissionDecision,
    AdmissionPolicy,
    Capacity,
    QueuedJob,
    RunningView,
    Start,
    Wait,
    try_place,
)


class FifoGangPolicy(AdmissionPolicy):
    """Args:
        reserve_after_s: how long a blocked job lets smaller ones pass it (backfill) before
            the queue holds the line for it.
        backfill_window: the most queued jobs one decision looks at (None: all of them;
            the rest wait with their last reason, as Slurm's ``bf_max_job_test``).
    """

    name = "fifo"

    def __init__(self, reserve_after_s: float = 30.0, backfill_window: int | None = None) -> None:
        if reserve_after_s < 0:
            raise ValueError(f"reserve_after_s={reserve_after_s!r}: give seconds >= 0.")
        if backfill_window is not None and backfill_window < 1:
            raise ValueError(f"backfill_window={backfill_window!r}: give None or >= 1.")
        self.reserve_after_s = reserve_after_s
        self.backfill_window = backfill_window

    @staticmethod
    def order(jobs: Sequence[object]) -> list[Any]:
        """Queue order: priority (higher first), then submission."""
        return sorted(jobs, key=lambda j: (-j.priority, j.seq))

    def make_decision(self, queue: Sequence[QueuedJob], running: RunningView,
                      capacity: Capacity, now: float) -> list[AdmissionDecision]:
        out: list[AdmissionDecision] = []
        free = dict(capacity.free())
        window = self.backfill_window
        for i, job in enumerate(queue):
            if window is not None and i >= window:
                break
            need = job.demand
            placement, why = try_place(capacity, job, free)
            if placement is not None:
                out.append(Start(job, placement))
                if getattr(job, "min_bundles", None):  # it may have got fewer bundles
                    free = dict(capacity.free())
                    continue
                for k, v in need.items():
                    free[k] = free.get(k, 0.0) - v
                continue
            if now - job.submitted_at >= self.reserve_after_s:
                out.append(Wait(job, f"waits: next to start, the queue holds for it ({why})"))
                behind = f"waits behind {job.job_id} (held for it)"
                for other in queue[i + 1:] if window is None else queue[i + 1:window]:
                    out.append(Wait(other, behind, "behind"))
                break
            out.append(Wait(job, f"waits: resources ({why})"))
        return out

    def describe(self) -> dict[str, object]:
        return {"policy": self.name, "reserve_after_s": self.reserve_after_s}
