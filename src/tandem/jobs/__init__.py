"""The job service: every training run is a job, gang-scheduled onto a cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem.jobs.handle import JobHandle
    from tandem.jobs.runtime import get, get_service, list_jobs, set_service, shutdown_service
    from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobSpec, JobStatus

    list = list_jobs

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
# ``tandem.jobs.list`` is ``list_jobs`` (below); ``list`` stays the builtin inside this module

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "JobHandle": "tandem.jobs.handle",
    "get": "tandem.jobs.runtime",
    "get_service": "tandem.jobs.runtime",
    "list_jobs": "tandem.jobs.runtime",
    "set_service": "tandem.jobs.runtime",
    "shutdown_service": "tandem.jobs.runtime",
    "JobContext": "tandem.jobs.spec",
    "JobOutcome": "tandem.jobs.spec",
    "JobRunner": "tandem.jobs.spec",
    "JobSpec": "tandem.jobs.spec",
    "JobStatus": "tandem.jobs.spec",
    "list": "tandem.jobs.runtime:list_jobs",
})
