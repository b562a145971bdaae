"""The process-wide job service: created on first use, or by ``tandem.init``."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from tandem.cluster.base import Cluster
from tandem.jobs.client import ADDRESS_ENV
from tandem.jobs.handle import JobHandle
from tandem.jobs.service import LocalJobService

_lock = threading.Lock()
_service: LocalJobService | None = None


_process_override: Any = None


def set_process_service(service: Any) -> None:
    """Inside a worker process: route every ``get_service()`` to the driver (set by train)."""
    global _process_override
    _process_override = service


def set_service(service: Any) -> None:
    global _service
    with _lock:
        _service = service


def get_service(create: bool = True, cluster_factory: Any = None) -> Any:
    """The process-wide job service: a ``RemoteJobService`` when ``tandem.init(address=...)``
    was called or ``$TANDEM_ADDRESS`` is set, else the embedded ``LocalJobService``, started
    on first use over this machine's resources. Inside a worker process: a proxy to the
    driver's service (nested jobs)."""
    global _service
    if _process_override is not None:
        return _process_override
    with _lock:
        if _service is None:
            if not create:
                raise RuntimeError("tandem is not initialised")
            if cluster_factory is None and os.environ.get(ADDRESS_ENV):
                from tandem.jobs.client import RemoteJobService

                _service = RemoteJobService()  # type: ignore[assignment]
                return _service
            if cluster_factory is None:
                from tandem.cluster.local import LocalCluster

                cluster: Cluster = LocalCluster()
            else:
                cluster = cluster_factory()
            _service = LocalJobService(cluster)
        return _service


def current_service() -> Any:
    return _service


def shutdown_service() -> None:
    """Stops every job, then the cluster's processes. Safe to call twice."""
    global _service
    with _lock:
        service, _service = _service, None
    if service is None:
        return
    service.shutdown()
    shut = getattr(service.cluster, "shutdown", None)
    if shut is not None:
        shut()


def get(job_id: str) -> JobHandle:
    service = get_service()
    return JobHandle(service.get(job_id), service)


def list_jobs() -> list[JobHandle]:
    service = get_service()
    return [JobHandle(j, service) for j in service.list()]


atexit.register(shutdown_service)


_log_to_driver: bool | None = None


def set_log_to_driver(value: bool | None) -> None:
    """``tandem.init(log_to_driver=...)``: False never echoes workers' output on this
    console; True echoes it for tuning trials too; None keeps each entry point's default."""
    global _log_to_driver
    _log_to_driver = value


def log_to_driver() -> bool | None:
    return _log_to_driver
