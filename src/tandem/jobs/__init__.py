"""The job service: every training run is a job, gang-scheduled onto a cluster."""

from __future__ import annotations

from tandem.jobs.handle import JobHandle
from tandem.jobs.runtime import get, get_service, list_jobs, set_service, shutdown_service
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobSpec, JobStatus

__all__ = [
    "JobContext",
    "JobHandle",
    "JobOutcome",
    "JobRunner",
    "JobSpec",
    "JobStatus",
    "get",
    "get_service",
    "list_jobs",
    "set_service",
    "shutdown_service",
]

list = list_jobs
