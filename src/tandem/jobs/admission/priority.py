"""``PriorityPreemptionPolicy``: fair share and quotas, plus preemption for priority.

Admission is ``FairSharePolicy``'s. Then, for the highest-priority job that waits for
resources (not for its quota), the policy looks for running jobs of *lower* priority that
can yield (``preemptible``, not already yielding, running at least ``min_run_s``) and picks
victims in this order:

1. lowest priority first;
2. then jobs whose bundles are at least as large as the waiting job's (each frees a slot
   one of its bundles fits in, so fewer victims make room for a big gang);
3. then the least work lost: the time since the victim's latest checkpoint (since its start
   without one) times the GPUs (else CPUs) it holds;
4. then the youngest (latest started).

It takes victims in that order until the waiting gang would fit, then drops every victim the
gang would fit without (latest taken first), so the set is small. If even all candidates
would not make room (by their totals), or the gang still does not fit after
``MAX_EXACT_CHECKS`` placement checks (fragmentation), nobody is preempted. The same
budget bounds the pruning (so a decision stays well under a millisecond on 1,000 nodes). While earlier victims are still yielding and
their resources would be enough, no new ones are chosen. Victims are asked to checkpoint
(``train.get_preemption_info()``), stopped after their grace period and re-queued with their
place (priority, submission order) kept.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from tandem.jobs.admission.base import (
    AdmissionDecision,
    AdmissionPolicy,
    Capacity,
    Preempt,
    QueuedJob,
    Quota,
    Quotas,
    RunningJob,
    RunningView,
    Wait,
    bundle_size,
)
from tandem.jobs.admission.fair import FairSharePolicy


def _covers(free: Mapping[str, float], need: Mapping[str, float]) -> bool:
    return all(v <= free.get(k, 0.0) + 1e-9 for k, v in need.items())


def _add(into: dict[str, float], amounts: Mapping[str, float]) -> None:
    for k, v in amounts.items():
        into[k] = into.get(k, 0.0) + v


def work_lost(job: RunningJob, now: float) -> float:
    """Resource-seconds since ``job``'s latest checkpoint (its start, without one)."""
    since = job.last_checkpoint_at if job.last_checkpoint_at is not None else job.started_at
    size = job.holds.get("GPU", 0.0) or job.holds.get("CPU", 0.0) or 1.0
    return max(0.0, now - since) * size


class PriorityPreemptionPolicy(AdmissionPolicy):
    """Args:
        quotas, reserve_after_s, backfill_window: as in ``FairSharePolicy``.
        min_run_s: a job runs at least this long before it may be preempted (no thrash).
        search_interval_s: after a search found no set of victims that makes room for a
            job, the next search for it waits this long (sim time or real time).

    Between decisions the policy remembers, by job id, the victims each waiting job is
    owed (while they yield it does not scan the cluster again) and when a search last found
    none; both are dropped when the job is considered afresh.
    """

    name = "priority"
    MAX_EXACT_CHECKS = 16
    CANDIDATES_PER_CLASS = 256

    def __init__(self, quotas: Quotas | Mapping[str, Quota | Mapping[str, Any]] | None = None,
                 reserve_after_s: float = 30.0, backfill_window: int | None = None,
                 min_run_s: float = 0.0, search_interval_s: float = 10.0) -> None:
        if min_run_s < 0:
            raise ValueError(f"min_run_s={min_run_s!r}: give seconds >= 0.")
        if search_interval_s < 0:
            raise ValueError(f"search_interval_s={search_interval_s!r}: give seconds >= 0.")
        self.admit = FairSharePolicy(quotas, reserve_after_s, backfill_window)
        self.min_run_s = min_run_s
        self.search_interval_s = search_interval_s
        # Bookkeeping between decisions (job ids only; see the class docstring):
        self._yielding_for: dict[str, list[RunningJob]] = {}  # waiting job -> its victims
        self._no_room_at: dict[str, float] = {}  # waiting job -> when a search found none

    @property
    def quotas(self) -> Quotas:
        return self.admit.quotas

    def set_quota(self, owner: str | None, quota: Quota | None) -> None:
        self.admit.set_quota(owner, quota)

    def set_group_quota(self, group: str, quota: Quota | None) -> None:
        self.admit.set_group_quota(group, quota)

    def set_group(self, owner: str, group: str | None) -> None:
        self.admit.set_group(owner, group)

    def check_submit(self, job: QueuedJob, queue: Sequence[QueuedJob]) -> None:
        self.admit.check_submit(job, queue)

    def make_decision(self, queue: Sequence[QueuedJob], running: RunningView,
                      capacity: Capacity, now: float) -> list[AdmissionDecision]:
        out = self.admit.make_decision(queue, running, capacity, now)
        blocked = next((d for d in out if isinstance(d, Wait) and d.kind == "resources"), None)
        if blocked is None:
            return out
        job = blocked.job
        earlier = self._yielding_for.get(job.job_id)
        if earlier and all(v.preempting and v.holds for v in earlier):
            # its victims are still yielding: nothing new to decide (no scan of the cluster)
            names = ", ".join(v.job_id for v in earlier)
            out[out.index(blocked)] = Wait(job, f"waits: {names} yield(s) to make room",
                                           "preempting")
            return out
        self._yielding_for.pop(job.job_id, None)
        failed_at = self._no_room_at.get(job.job_id)
        if failed_at is not None and now - failed_at < self.search_interval_s:
            return out  # searched lately and no set of victims made room
        victims, note = self._victims(job, running, capacity, now)
        if len(self._yielding_for) > 1000 or len(self._no_room_at) > 1000:
            self._yielding_for.clear()  # jobs that started or left long ago
            self._no_room_at.clear()
        if victims is None:
            self._no_room_at[job.job_id] = now
            return out
        self._no_room_at.pop(job.job_id, None)
        if victims:
            self._yielding_for[job.job_id] = list(victims)
        i = out.index(blocked)
        out[i] = Wait(job, note, "preempting")
        for v in victims:
            out.append(Preempt(v, job, f"preempted for {job.job_id} (priority "
                                       f"{job.priority} > {v.priority})"))
        return out

    def _victims(self, job: QueuedJob, running: RunningView, capacity: Capacity,
                 now: float) -> tuple[list[RunningJob] | None, str]:
        lower = [c for c in running.classes() if c[0] < job.priority]
        if not lower:
            return None, ""
        free = dict(capacity.free())
        most = dict(free)
        for c in lower:
            _add(most, running.class_usage(c))
        if not _covers(most, job.demand):
            return None, ""  # even every lower-priority job would not make room
        big = bundle_size(job.bundles)
        yielding: list[RunningJob] = []
        chosen: list[RunningJob] = []
        exact_checks = 0
        # Classes in victim order (priority, then bundles that fit the waiting job's); the
        # costly part of the key (work lost) is computed only in the classes reached, for
        # at most CANDIDATES_PER_CLASS jobs each.
        for cls in sorted(lower, key=lambda c: (c[0], c[1] < big)):
            keyed: list[tuple[float, float, int, RunningJob]] = []
            for r in running.jobs_in(cls):
                if r.preempting:
                    yielding.append(r)
                    _add(free, r.holds)
                elif r.preemptible and now - r.started_at >= self.min_run_s:
                    keyed.append((work_lost(r, now), -r.started_at, len(keyed), r))
                    if len(keyed) >= self.CANDIDATES_PER_CLASS:
                        break
            if yielding and not chosen and _covers(free, job.demand) and \
                    capacity.would_fit(job.bundles, job.strategy, yielding):
                names = ", ".join(r.job_id for r in yielding)
                return [], f"waits: {names} yield(s) to make room"
            heapq.heapify(keyed)
            while keyed:
                r = heapq.heappop(keyed)[-1]
                chosen.append(r)
                _add(free, r.holds)
                # the exact (placement) check only once the totals would do; a gang that
                # fragmentation keeps out after a few tries is left to wait
                if _covers(free, job.demand):
                    if capacity.would_fit(job.bundles, job.strategy, yielding + chosen):
                        break
                    exact_checks += 1
                    if exact_checks >= self.MAX_EXACT_CHECKS:
                        return None, ""
            else:
                continue
            break
        else:
            return None, ""
        for r in list(reversed(chosen[:-1])):
            if exact_checks >= self.MAX_EXACT_CHECKS:
                break  # keep the set as it is: it makes room, only maybe not the smallest
            exact_checks += 1
            rest = [c for c in chosen if c is not r]
            if capacity.would_fit(job.bundles, job.strategy, yielding + rest):
                chosen = rest
        names = ", ".join(r.job_id for r in chosen)
        return chosen, f"waits: preempting {names} to make room"

    def describe(self) -> dict[str, object]:
        d = self.admit.describe()
        d.update(policy=self.name, min_run_s=self.min_run_s)
        return d
