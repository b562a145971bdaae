"""Admission: which queued jobs start, which wait (and why), which running ones yield.

A policy *decides*; the job service (or the scheduler simulation) *acts*, as with
``FailurePolicy``. ``AdmissionPolicy.make_decision(queue, running, capacity, now)`` reads
the queue and the running jobs through small read-only protocols, asks ``capacity`` to
place gangs (a scratch reservation the caller owns), and returns a list of decisions:

- ``Start(job, placement)``: the gang is placed; the caller starts it (or releases the
  placement).
- ``Preempt(job, for_job, reason)``: a running job must yield: the caller asks it to
  checkpoint, stops it after a grace period and re-queues it.
- ``Wait(job, reason)``: the job stays queued; ``reason`` is what a user is shown
  (``"waits: alice's quota CPU 8/8"``).

The same objects run in the service (over the real cluster) and in
``benchmarks/sched_sim.py`` (over a simulated cluster and clock), unchanged.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, NamedTuple, Protocol

from tandem._core.errors import ConfigError, ResourcesUnavailableError
from tandem._core.records import record

DEFAULT_OWNER = "default"
#: The resources a quota can limit, as ``Quota`` names them and as bundles name them.
QUOTA_RESOURCES = (("cpus", "CPU"), ("gpus", "GPU"), ("memory", "memory"))


class QuotaExceededError(ResourcesUnavailableError):
    """A submission past its owner's ``Quota(queued_jobs=...)``."""


class QueuedJob(Protocol):
    """What a policy reads of a queued job (read-only)."""

    @property
    def job_id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def seq(self) -> int:
        """Submission order (a re-queued job keeps its number)."""
        ...
    @property
    def submitted_at(self) -> float:
        """Clock time the job entered the queue."""
        ...
    @property
    def bundles(self) -> Sequence[Mapping[str, float]]: ...
    @property
    def demand(self) -> Mapping[str, float]:
        """The gang's resources summed over its bundles (``demand(bundles)``, kept)."""
        ...
    @property
    def strategy(self) -> str: ...


class RunningJob(Protocol):
    """What a policy reads of a running job (read-only)."""

    @property
    def job_id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def bundles(self) -> Sequence[Mapping[str, float]]: ...
    @property
    def started_at(self) -> float:
        """Clock time the current gang started."""
        ...
    @property
    def last_checkpoint_at(self) -> float | None:
        """Clock time of its latest committed checkpoint (None: none yet)."""
        ...
    @property
    def holds(self) -> Mapping[str, float]:
        """The resources it holds now (summed over its gang; empty if it lent them)."""
        ...
    @property
    def preemptible(self) -> bool:
        """Whether it can be asked to checkpoint and yield (a train run can; a served
        model cannot)."""
        ...
    @property
    def preempting(self) -> bool:
        """Already asked to yield (its resources are about to be freed)."""
        ...


class RunningView(Protocol):
    """The running jobs, with what each owner holds kept up to date by the caller (so a
    policy never sums the whole cluster per decision), and grouped in *classes*
    ``(priority, bundle size)`` (bundle size: GPUs, else CPUs, of a gang's first bundle) so
    a preemption search reads only the classes it needs."""

    def jobs(self) -> Iterable[RunningJob]: ...

    def usage(self, owner: str) -> Mapping[str, float]:
        """What ``owner``'s running jobs hold together."""
        ...

    def classes(self) -> Iterable[tuple[int, float]]:
        """The ``(priority, bundle size)`` classes that have running jobs."""
        ...

    def jobs_in(self, cls: tuple[int, float]) -> Iterable[RunningJob]: ...

    def class_usage(self, cls: tuple[int, float]) -> Mapping[str, float]:
        """What the class's jobs hold together."""
        ...


def bundle_size(bundles: Sequence[Mapping[str, float]]) -> float:
    """A gang's bundle size: GPUs, else CPUs, of its first bundle (a gang's bundles are
    alike)."""
    if not bundles:
        return 0.0
    b = bundles[0]
    return b.get("GPU", 0.0) or b.get("CPU", 0.0)


class RunningSet:
    """A ``RunningView`` kept incrementally: ``add`` when a job starts, ``remove`` when it
    ends (``holds``, ``owner``, ``priority`` and ``bundles`` must not change in between)."""

    def __init__(self, jobs: Iterable[RunningJob] = ()) -> None:
        self._jobs: dict[str, RunningJob] = {}
        self._usage: dict[str, dict[str, float]] = {}
        self._classes: dict[tuple[int, float], dict[str, RunningJob]] = {}
        self._class_usage: dict[tuple[int, float], dict[str, float]] = {}
        self._class_of: dict[str, tuple[int, float]] = {}
        for j in jobs:
            self.add(j)

    def add(self, job: RunningJob) -> None:
        self._jobs[job.job_id] = job
        holds = job.holds
        _add_into(self._usage.setdefault(job.owner, {}), holds, 1.0)
        cls = (job.priority, bundle_size(job.bundles))
        self._class_of[job.job_id] = cls
        self._classes.setdefault(cls, {})[job.job_id] = job
        _add_into(self._class_usage.setdefault(cls, {}), holds, 1.0)

    def remove(self, job: RunningJob) -> None:
        if self._jobs.pop(job.job_id, None) is None:
            return
        holds = job.holds
        _drop(self._usage, job.owner, holds)
        cls = self._class_of.pop(job.job_id)
        members = self._classes[cls]
        del members[job.job_id]
        if not members:
            del self._classes[cls]
        _drop(self._class_usage, cls, holds)

    def jobs(self) -> Iterable[RunningJob]:
        return self._jobs.values()

    def usage(self, owner: str) -> Mapping[str, float]:
        return self._usage.get(owner, {})

    def classes(self) -> Iterable[tuple[int, float]]:
        return self._classes.keys()

    def jobs_in(self, cls: tuple[int, float]) -> Iterable[RunningJob]:
        return self._classes.get(cls, {}).values()

    def class_usage(self, cls: tuple[int, float]) -> Mapping[str, float]:
        return self._class_usage.get(cls, {})

    def __len__(self) -> int:
        return len(self._jobs)


def _add_into(into: dict[str, float], amounts: Mapping[str, float], sign: float) -> None:
    for k, v in amounts.items():
        into[k] = into.get(k, 0.0) + sign * v


def _drop(table: dict[Any, dict[str, float]], key: object, amounts: Mapping[str, float]) -> None:
    u = table.get(key, {})
    _add_into(u, amounts, -1.0)
    for k in [k for k, v in u.items() if abs(v) < 1e-9]:
        del u[k]
    if not u:
        table.pop(key, None)


class Capacity(Protocol):
    """What a policy may ask of the cluster during one decision.

    ``place`` reserves at once (all bundles or none); a placement the policy does not turn
    into a ``Start`` must be given back with ``release`` before ``make_decision`` returns.
    """

    def total(self) -> Mapping[str, float]:
        """The cluster's total resources."""
        ...

    def free(self) -> Mapping[str, float]:
        """What is not held (by running jobs or by reservations made in this decision)."""
        ...

    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str) -> object | None:
        """Reserves the gang now, or returns None when it does not fit."""
        ...

    def release(self, placement: object) -> None:
        """Gives a reservation of this decision back."""
        ...

    def would_fit(self, bundles: Sequence[Mapping[str, float]], strategy: str,
                  freeing: Sequence[RunningJob]) -> bool:
        """Whether the gang would fit if the ``freeing`` jobs' resources were free too."""
        ...


# Decisions are immutable named tuples rather than frozen dataclasses: a policy makes one
# per queued job it looks at, and a NamedTuple is several times cheaper to build.
class Start(NamedTuple):
    """Start ``job`` on ``placement`` (reserved by ``Capacity.place``)."""

    job: Any
    placement: Any


class Wait(NamedTuple):
    """``job`` stays queued; ``reason`` says why, in words a user is shown. ``kind``:
    ``"resources"`` (does not fit now), ``"quota"`` (its owner's quota), ``"behind"`` (the
    queue holds for a job ahead), ``"preempting"`` (lower-priority jobs yield to it)."""

    job: Any
    reason: str
    kind: str = "resources"


class Preempt(NamedTuple):
    """Ask running ``job`` to checkpoint and yield its resources to ``for_job``."""

    job: Any
    for_job: Any
    reason: str


AdmissionDecision = Start | Wait | Preempt


@record
class Quota:
    """Limits on what one owner may hold at once, and queue.

    Args:
        cpus, gpus, memory: the most of each resource (memory in bytes) the owner's
            running jobs may hold together; None: no limit.
        queued_jobs: the most jobs the owner may have waiting; a submission past it is
            refused at once (with ``QuotaExceededError``).
    """

    cpus: float | None = None
    gpus: float | None = None
    memory: float | None = None
    queued_jobs: int | None = None

    def __post_init__(self) -> None:
        for name in ("cpus", "gpus", "memory", "queued_jobs"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
                raise ConfigError(f"Quota({name}={v!r}) is invalid: give a number >= 0, or None "
                                  f"for no limit.")
            if name == "queued_jobs" and not float(v).is_integer():
                raise ConfigError(f"Quota(queued_jobs={v!r}) is invalid: give a whole number.")

    def limits(self) -> dict[str, float]:
        """The resource limits as bundle keys (``{"CPU": 8.0}``)."""
        out = {}
        for attr, key in QUOTA_RESOURCES:
            v = getattr(self, attr)
            if v is not None:
                out[key] = float(v)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Quota:
        """From ``{"cpus": 8, "gpus": 2, "memory": 64e9, "queued_jobs": 100}``."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"A quota is a dict such as {{'cpus': 8, 'gpus': 2}}, got {d!r}.")
        known = {"cpus", "gpus", "memory", "queued_jobs"}
        bad = sorted(set(d) - known)
        if bad:
            raise ConfigError(f"Quota {dict(d)!r} has unknown key(s) {bad}; use "
                              f"{sorted(known)}.")
        return cls(**dict(d))

    def as_dict(self) -> dict[str, float | int]:
        return {k: v for k, v in (("cpus", self.cpus), ("gpus", self.gpus),
                                  ("memory", self.memory), ("queued_jobs", self.queued_jobs))
                if v is not None}


@record(frozen=False)
class Quotas:
    """Quotas by owner; ``default`` applies to owners without their own (None: no limit).

    Owners may belong to a group (``group_of``: owner -> group, one group per owner); a
    group's quota (``by_group``) limits what its members hold and queue *together*, beside
    each member's own quota."""

    by_owner: dict[str, Quota] = field(default_factory=dict)
    default: Quota | None = None
    by_group: dict[str, Quota] = field(default_factory=dict)
    group_of: dict[str, str] = field(default_factory=dict)

    def of(self, owner: str) -> Quota | None:
        return self.by_owner.get(owner, self.default)

    def group(self, owner: str) -> str | None:
        """The group ``owner`` belongs to, or None."""
        return self.group_of.get(owner) if self.group_of else None

    def members(self, group: str) -> list[str]:
        return [o for o, g in self.group_of.items() if g == group]

    def __bool__(self) -> bool:
        return bool(self.by_owner) or self.default is not None or bool(self.by_group)


def demand(bundles: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """A gang's resources summed over its bundles."""
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            if v:
                out[k] = out.get(k, 0.0) + v
    return out


def fmt_amount(key: str, v: float) -> str:
    if key == "memory":
        return f"{v / 1e9:g}GB"
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def quota_block(job: QueuedJob, need: Mapping[str, float], quota: Quota | None,
                used: Mapping[str, float]) -> str | None:
    """Why ``job`` would go over its owner's quota if it started now, or None."""
    return _over_quota(f"{job.owner}'s", need, quota, used)


def group_quota_block(group: str, need: Mapping[str, float], quota: Quota | None,
                      used: Mapping[str, float]) -> str | None:
    """Why a job would take its owner's ``group`` over the group's quota, or None."""
    return _over_quota(f"group {group}'s", need, quota, used)


def _over_quota(whose: str, need: Mapping[str, float], quota: Quota | None,
                used: Mapping[str, float]) -> str | None:
    if quota is None:
        return None
    for key, limit in quota.limits().items():
        want = need.get(key, 0.0)
        if want and used.get(key, 0.0) + want > limit + 1e-9:
            name = "CPU" if key == "CPU" else ("GPU" if key == "GPU" else "memory")
            return (f"waits: {whose} quota {name} {fmt_amount(key, used.get(key, 0.0))}"
                    f"/{fmt_amount(key, limit)} (this job needs {fmt_amount(key, want)} more)")
    return None


def place_gang(capacity: Capacity, job: QueuedJob) -> object | None:
    """Places ``job``'s whole gang; an elastic job (``min_bundles``, optional attribute)
    gets the most of its bundles that fit, down to ``min_bundles``."""
    placement = capacity.place(job.bundles, job.strategy)
    low = getattr(job, "min_bundles", None)
    if placement is not None or not low:
        return placement
    for k in range(len(job.bundles) - 1, low - 1, -1):
        placement = capacity.place(job.bundles[:k], job.strategy)
        if placement is not None:
            return placement
    return None


def try_place(capacity: Capacity, job: QueuedJob,
              free: Mapping[str, float]) -> tuple[Any | None, str]:
    """Places ``job``'s gang if ``free`` (what the cluster has left in this decision) allows:
    ``(placement, "")``, or ``(None, why it waits)``. An elastic job, or a cluster that
    grows, is tried on the cluster itself whatever ``free`` says."""
    elastic = getattr(job, "min_bundles", None)
    short = (None if elastic or getattr(capacity, "grows", False)
             else short_of(job.demand, free))
    placement = None if short is not None else place_gang(capacity, job)
    if placement is not None:
        return placement, ""
    return None, short or "the gang does not fit on the free nodes"


def short_of(need: Mapping[str, float], free: Mapping[str, float]) -> str | None:
    """The first resource the cluster has too little of for ``need`` (in words), or None."""
    for key, want in need.items():
        have = free.get(key, 0.0)
        if want > have + 1e-9:
            return f"{key} {fmt_amount(key, want)} needed, {fmt_amount(key, have)} free"
    return None


class AdmissionPolicy(ABC):
    """Decides which queued jobs start, which wait and which running ones yield.

    Contract: ``make_decision`` is called by the job service under its lock (or by the
    simulation), every time the queue or the cluster changes; it must not block, must not
    change the jobs, and must return every placement it made either in a ``Start`` or back
    through ``capacity.release``. It may keep its own bookkeeping between calls (e.g. which
    jobs yield to which), updated only from its arguments. Not thread-safe.
    """

    name: str = "admission"

    @abstractmethod
    def make_decision(self, queue: Sequence[QueuedJob], running: RunningView,
                      capacity: Capacity, now: float) -> list[AdmissionDecision]:
        """Returns decisions for this moment; jobs not named keep their last reason.

        ``queue`` is in queue order: priority (higher first), then ``seq``."""

    def check_submit(self, job: QueuedJob, queue: Sequence[QueuedJob]) -> None:
        """Called by the service before queuing ``job``: raises ``QuotaExceededError`` when
        its owner may not queue more. The default accepts everything."""

    def describe(self) -> dict[str, object]:
        """What the dashboard / ``/api/cluster`` shows of the policy."""
        return {"policy": self.name}
