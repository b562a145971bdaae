"""``FairSharePolicy``: quotas per owner, and dominant-resource fair share among equals.

Jobs of a higher priority are considered first. Among jobs of one priority, the next job
considered is the first queued job of the owner whose *dominant share* is lowest: the
largest fraction of any one resource (CPU, GPU, memory) of the cluster that the owner's
running jobs hold (DRF, Ghodsi et al., NSDI 2011). A job that would take its owner past a
``Quota`` waits, with the reason shown (``"waits: alice's quota CPU 8/8"``), and never
holds the line for others. Backfill and the hold after ``reserve_after_s`` work as in
``FifoGangPolicy``.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from tandem._core.errors import ConfigError
from tandem.jobs.admission.base import (
    AdmissionDecision,
    AdmissionPolicy,
    Capacity,
    QueuedJob,
    Quota,
    QuotaExceededError,
    Quotas,
    RunningView,
    Start,
    Wait,
    group_quota_block,
    quota_block,
    try_place,
)


def dominant_share(used: Mapping[str, float], total: Mapping[str, float]) -> float:
    """The largest fraction of any one resource of ``total`` that ``used`` holds."""
    share = 0.0
    for k, v in used.items():
        t = total.get(k, 0.0)
        if t > 0 and v > 0:
            share = max(share, v / t)
    return share


class FairSharePolicy(AdmissionPolicy):
    """Args:
        quotas: ``Quotas`` (by owner, and a default), or a dict ``{owner: Quota | dict}``.
        reserve_after_s, backfill_window: as in ``FifoGangPolicy``.
    """

    name = "fair"

    def __init__(self, quotas: Quotas | Mapping[str, Quota | Mapping[str, Any]] | None = None,
                 reserve_after_s: float = 30.0, backfill_window: int | None = None) -> None:
        if reserve_after_s < 0:
            raise ValueError(f"reserve_after_s={reserve_after_s!r}: give seconds >= 0.")
        if backfill_window is not None and backfill_window < 1:
            raise ValueError(f"backfill_window={backfill_window!r}: give None or >= 1.")
        self.quotas = as_quotas(quotas)
        self.reserve_after_s = reserve_after_s
        self.backfill_window = backfill_window

    def set_quota(self, owner: str | None, quota: Quota | None) -> None:
        """Sets (or with None removes) ``owner``'s quota; ``owner=None`` sets the default."""
        if owner is None:
            self.quotas.default = quota
        elif quota is None:
            self.quotas.by_owner.pop(owner, None)
        else:
            self.quotas.by_owner[owner] = quota

    def set_group_quota(self, group: str, quota: Quota | None) -> None:
        """Sets (or with None removes) the quota of ``group`` (its members together)."""
        if quota is None:
            self.quotas.by_group.pop(group, None)
        else:
            self.quotas.by_group[group] = quota

    def set_group(self, owner: str, group: str | None) -> None:
        """Puts ``owner`` in ``group`` (None: in none); an owner is in one group at most."""
        if group is None:
            self.quotas.group_of.pop(owner, None)
        else:
            self.quotas.group_of[owner] = group

    def check_submit(self, job: QueuedJob, queue: Sequence[QueuedJob]) -> None:
        quota = self.quotas.of(job.owner)
        if quota is not None and quota.queued_jobs is not None:
            queued = sum(1 for j in queue if j.owner == job.owner)
            if queued >= quota.queued_jobs:
                raise QuotaExceededError(
                    f"{job.owner} has {queued} job(s) queued and {job.owner}'s quota allows "
                    f"queued_jobs={quota.queued_jobs}: wait until some start, stop some "
                    f"(`tandem jobs stop ID`), or have the quota raised."
                )
        group = self.quotas.group(job.owner)
        gq = self.quotas.by_group.get(group) if group is not None else None
        if gq is not None and gq.queued_jobs is not None:
            queued = sum(1 for j in queue if self.quotas.group(j.owner) == group)
            if queued >= gq.queued_jobs:
                raise QuotaExceededError(
                    f"group {group} has {queued} job(s) queued and group {group}'s quota "
                    f"allows queued_jobs={gq.queued_jobs} ({job.owner} is in group {group}): "
                    f"wait until some start, stop some (`tandem jobs stop ID`), or have the "
                    f"group's quota raised (`tandem quotas set --group {group} ...`)."
                )

    def make_decision(self, queue: Sequence[QueuedJob], running: RunningView,
                      capacity: Capacity, now: float) -> list[AdmissionDecision]:
        out: list[AdmissionDecision] = []
        total = capacity.total()
        free = dict(capacity.free())
        used: dict[str, dict[str, float]] = {}
        window = self.backfill_window
        jobs = queue if window is None else queue[:window]
        # queue order is priority-major: one level at a time
        i, n = 0, len(jobs)
        while i < n:
            level = jobs[i].priority
            by_owner: dict[str, deque[QueuedJob]] = {}
            while i < n and jobs[i].priority == level:
                by_owner.setdefault(jobs[i].owner, deque()).append(jobs[i])
                i += 1
            held = self._admit_level(by_owner, used, running, total, free, capacity, now, out)
            if held is not None:
                behind = f"waits behind {held.job_id} (held for it)"
                out.extend(Wait(other, behind, "behind") for other in jobs[i:])
                break
        return out

    def _admit_level(self, by_owner: dict[str, deque[QueuedJob]],
                     used: dict[str, dict[str, float]], running: RunningView,
                     total: Mapping[str, float], free: dict[str, float], capacity: Capacity,
                     now: float, out: list[AdmissionDecision]) -> QueuedJob | None:
        """Admits one priority level by DRF — across groups first, then across the owners
        of a group (an owner in no group is a group of its own); returns the job the queue
        holds for, if any."""
        quotas = self.quotas
        grouped = bool(quotas.group_of)
        gused: dict[str, dict[str, float]] = {}

        def group_usage(group: str) -> dict[str, float]:
            u = gused.get(group)
            if u is None:
                u = gused[group] = {}
                for member in quotas.members(group):
                    for k, v in used.setdefault(member, dict(running.usage(member))).items():
                        u[k] = u.get(k, 0.0) + v
            return u

        def entry(owner: str) -> tuple[float, float, int, str]:
            """The heap entry: (group's share, owner's share, head job's seq, owner)."""
            own = dominant_share(used[owner], total)
            group = quotas.group(owner) if grouped else None
            outer = own if group is None else dominant_share(group_usage(group), total)
            return (outer, own, by_owner[owner][0].seq, owner)

        for owner in by_owner:
            used.setdefault(owner, dict(running.usage(owner)))
        heap = [entry(owner) for owner in by_owner]
        heapq.heapify(heap)
        while heap:
            stale = heapq.heappop(heap)
            owner = stale[3]
            if grouped:  # a member of its group started a job since: its key grew
                fresh = entry(owner)
                if fresh > stale and heap and fresh > heap[0]:
                    heapq.heappush(heap, fresh)
                    continue
            q = by_owner[owner]
            job = q.popleft()
            u = used[owner]
            need = job.demand
            over = quota_block(job, need, quotas.of(owner), u) if quotas else None
            group = quotas.group(owner) if grouped else None
            if over is None and group is not None and group in quotas.by_group:
                over = group_quota_block(group, need, quotas.by_group[group],
                                         group_usage(group))
            if over is not None:
                out.append(Wait(job, over, "quota"))
            else:
                elastic = getattr(job, "min_bundles", None)
                placement, why = try_place(capacity, job, free)
                if placement is not None:
                    out.append(Start(job, placement))
                    if elastic:  # it may have got fewer bundles than it asked for
                        free.update(capacity.free())
                    gu = group_usage(group) if group is not None else None
                    for k, v in need.items():
                        if not elastic:
                            free[k] = free.get(k, 0.0) - v
                        u[k] = u.get(k, 0.0) + v
                        if gu is not None:
                            gu[k] = gu.get(k, 0.0) + v
                else:
                    if now - job.submitted_at >= self.reserve_after_s:
                        out.append(Wait(job, f"waits: next to start, the queue holds for it "
                                             f"({why})"))
                        behind = f"waits behind {job.job_id} (held for it)"
                        for rest in by_owner.values():
                            out.extend(Wait(o, behind, "behind") for o in rest)
                            rest.clear()
                        return job
                    out.append(Wait(job, f"waits: resources ({why})"))
            if q:
                heapq.heappush(heap, entry(owner))
        return None

    def describe(self) -> dict[str, object]:
        out = {"policy": self.name, "reserve_after_s": self.reserve_after_s,
               "quotas": {o: q.as_dict() for o, q in self.quotas.by_owner.items()},
               "default_quota": self.quotas.default.as_dict() if self.quotas.default else None}
        if self.quotas.by_group or self.quotas.group_of:
            out["group_quotas"] = {g: q.as_dict() for g, q in self.quotas.by_group.items()}
            out["groups"] = dict(self.quotas.group_of)
        return out


def as_quotas(quotas: Quotas | Mapping[str, Quota | Mapping[str, object]] | None) -> Quotas:
    """``Quotas`` from a ``Quotas``, a dict ``{owner: Quota | dict}`` (key ``"*"``: the
    default; ``"group:NAME"``: group NAME's, whose dict may list its ``"members"``) or
    None."""
    if quotas is None:
        return Quotas()
    if isinstance(quotas, Quotas):
        return quotas
    out = Quotas()
    for owner, q in quotas.items():
        if str(owner).startswith(GROUP_PREFIX):
            group = str(owner)[len(GROUP_PREFIX):]
            members: Any = ()
            if isinstance(q, Mapping) and "members" in q:
                q = dict(q)
                members = q.pop("members")
                if isinstance(members, str) or not all(isinstance(m, str) for m in members):
                    raise ConfigError(f"quotas[{owner!r}]['members'] = {members!r}: give a "
                                      f"list of owner names, e.g. ['alice', 'bob'].")
            out.by_group[group] = q if isinstance(q, Quota) else Quota.from_dict(q)
            for member in members:
                if out.group_of.get(member, group) != group:
                    raise ConfigError(f"{member!r} is a member of group "
                                      f"{out.group_of[member]!r} and of {group!r}: an owner "
                                      f"belongs to one group at most.")
                out.group_of[member] = group
            continue
        quota = q if isinstance(q, Quota) else Quota.from_dict(q)
        if owner == "*":
            out.default = quota
        else:
            out.by_owner[str(owner)] = quota
    return out


#: A key ``"group:ml"`` in a quotas dict is group ``ml``'s quota.
GROUP_PREFIX = "group:"
