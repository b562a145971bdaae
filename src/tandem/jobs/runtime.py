"""The process-wide job service: created on first use, or by ``tandem.init``."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tandem.cluster.base import Cluster
from tandem.jobs.client.discovery import ADDRESS_ENV
from tandem.jobs.contract import JobService
from tandem.jobs.handle import JobHandle
from tandem.jobs.service import LocalJobService

_lock = threading.Lock()
_service: JobService | None = None


_process_override: JobService | None = None


def set_process_service(service: JobService | None) -> None:
    """Inside a worker process: route every ``get_service()`` to the driver (set by train)."""
    global _process_override
    _process_override = service


def set_service(service: JobService | None) -> None:
    global _service
    with _lock:
        _service = service


def get_service(
    create: bool = True, cluster_factory: Callable[[], Cluster] | None = None
) -> JobService:
    """The process-wide job service: a ``RemoteJobService`` when ``tandem.init(address=...)``
    was called or ``$TANDEM_ADDRESS`` is set, else the embedded ``LocalJobService``, started
    on first use over this machine's resources. Inside a worker process: a proxy to the
    driver's service (nested jobs). Each meets ``tandem.jobs.contract.JobService``."""
    global _service
    if _process_override is not None:
        return _process_override
    with _lock:
        if _service is None:
            if not create:
                raise RuntimeError("tandem is not initialised")
            if cluster_factory is None and os.environ.get(ADDRESS_ENV):
                from tandem.jobs.client.remote import RemoteJobService

                _service = RemoteJobService()
                return _service
            if cluster_factory is None:
                from tandem.cluster.local import LocalCluster

                cluster: Cluster = LocalCluster()
            else:
                cluster = cluster_factory()
            _service = LocalJobService(cluster)
        return _service


def current_service() -> JobService | None:
    return _service


def shutdown_service() -> None:
    """Stops every job, then the cluster's processes. Safe to call twice."""
    global _service, _job_defaults
    with _lock:
        service, _service = _service, None
        _job_defaults = JobDefaults()
    if service is None:
        return
    service.shutdown()
    if isinstance(service, LocalJobService):
        service.cluster.shutdown()


def get(job_id: str) -> JobHandle:
    return JobHandle(get_service().get(job_id))


def list_jobs() -> list[JobHandle]:
    return [JobHandle(j) for j in get_service().list()]


atexit.register(shutdown_service)


_log_to_driver: bool | None = None


def set_log_to_driver(value: bool | None) -> None:
    """``tandem.init(log_to_driver=...)``: False never echoes workers' output on this
    console; True echoes it for tuning trials too; None keeps each entry point's default."""
    global _log_to_driver
    _log_to_driver = value


def log_to_driver() -> bool | None:
    return _log_to_driver


@dataclass(frozen=True)
class JobDefaults:
    """``tandem.init(owner=..., priority=...)``: what a job gets when its ``RunConfig``
    names no owner / priority (None: the service's default owner, priority 0)."""

    owner: str | None = None
    priority: int | None = None


_job_defaults = JobDefaults()


def set_job_defaults(defaults: JobDefaults) -> None:
    global _job_defaults
    _job_defaults = defaults


def job_defaults() -> JobDefaults:
    return _job_defaults
