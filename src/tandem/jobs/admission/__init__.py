"""Admission policies: which queued jobs start, wait (and why) or yield.

``FifoGangPolicy`` is the default (gang scheduling in priority-then-submission order with
backfill); ``FairSharePolicy`` adds per-owner quotas and dominant-resource fair share;
``PriorityPreemptionPolicy`` adds preemption of lower-priority jobs with a checkpoint.
See docs/scheduling.md.
"""

from __future__ import annotations

from tandem.jobs.admission.base import (
    DEFAULT_OWNER,
    AdmissionDecision,
    AdmissionPolicy,
    Capacity,
    Preempt,
    QueuedJob,
    Quota,
    QuotaExceededError,
    Quotas,
    RunningJob,
    RunningSet,
    RunningView,
    Start,
    Wait,
    demand,
)
from tandem.jobs.admission.capacity import ClusterCapacity
from tandem.jobs.admission.fair import FairSharePolicy, dominant_share
from tandem.jobs.admission.fifo import FifoGangPolicy
from tandem.jobs.admission.priority import PriorityPreemptionPolicy, work_lost

__all__ = [
    "DEFAULT_OWNER",
    "AdmissionDecision",
    "AdmissionPolicy",
    "Capacity",
    "ClusterCapacity",
    "FairSharePolicy",
    "FifoGangPolicy",
    "Preempt",
    "PriorityPreemptionPolicy",
    "QueuedJob",
    "Quota",
    "QuotaExceededError",
    "Quotas",
    "RunningJob",
    "RunningSet",
    "RunningView",
    "Start",
    "Wait",
    "demand",
    "dominant_share",
    "make_policy",
    "work_lost",
]


def make_policy(name: str, **kwargs: object) -> AdmissionPolicy:
    """A policy by name: ``"fifo"``, ``"fair"`` or ``"priority"`` (server flags use it)."""
    classes: dict[str, type[AdmissionPolicy]] = {
        "fifo": FifoGangPolicy, "fair": FairSharePolicy, "priority": PriorityPreemptionPolicy}
    cls = classes.get(name)
    if cls is None:
        from tandem._core.errors import ConfigError

        raise ConfigError(f"Unknown scheduling policy {name!r}; use one of {sorted(classes)}.")
    return cls(**kwargs)
