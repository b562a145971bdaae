"""The process-wide job service: created on first use, or by ``tandem.init``."""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable

from tandem._core.records import record
from tandem.cluster.base import Cluster
from tandem.jobs.client.discovery import (
    ADDRESS_ENV,
    env_address,
    find_local_server,
    server_file_path,
    wants_embedded,
)
from tandem.jobs.contract import JobService
from tandem.jobs.handle import JobHandle

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
    if service is not None:
        _note_service(service)


def get_service(
    create: bool = True, cluster_factory: Callable[[], Cluster] | None = None
) -> JobService:
    """The process-wide job service: a ``RemoteJobService`` when ``tandem.init(address=...)``
    was called or ``$TANDEM_ADDRESS`` names a server; else, as ``ray.init()`` attaches to a
    running local cluster, the train server running on this machine (``~/.tandem/
    server.json``, if it answers); else the embedded ``LocalJobService``, started on first
    use over this machine's resources (``TANDEM_ADDRESS=local`` forces it). The choice made
    on its own is said in one line on stderr. Inside a worker process: a proxy to the
    driver's service (nested jobs). Each meets ``tandem.jobs.contract.JobService``."""
    global _service
    if _process_override is not None:
        return _process_override
    created = None
    with _lock:
        if _service is None:
            created = _service = _choose_service(create, cluster_factory)
        service = _service
    if created is not None:
        _note_service(created)  # a zygote started early is ended if jobs go elsewhere
    return service


def _choose_service(create: bool, cluster_factory: Callable[[], Cluster] | None) -> JobService:
    """``get_service``'s choice of a new service (under ``_lock``)."""
    if not create:
        raise RuntimeError("tandem is not initialised")
    if cluster_factory is None and env_address() is not None:
        from tandem.jobs.client.remote import RemoteJobService

        return RemoteJobService()
    if cluster_factory is None and not wants_embedded():
        found = find_local_server()
        if found is not None:
            from tandem.jobs.client.remote import RemoteJobService

            service = RemoteJobService(found.url, token=found.token)
            _say(f"tandem: sending jobs to the train server running on this machine "
                 f"at {found.url} ({server_file_path()}); {ADDRESS_ENV}=local runs "
                 f"them in this process instead")
            return service
        _say(f"tandem: no train server is running on this machine; running jobs in "
             f"this process (`tandem server start` starts one; {ADDRESS_ENV}=local "
             f"skips this check)")
    if cluster_factory is None:
        from tandem.cluster.local import LocalCluster

        cluster: Cluster = LocalCluster()
    else:
        cluster = cluster_factory()
    from tandem.jobs.service import LocalJobService

    return LocalJobService(cluster)


def _note_service(service: JobService) -> None:
    """The process's job service was just chosen: a zygote started early
    (``tandem.jobs.early``) is ended unless the service runs workers on a local cluster (it
    would wait unused, ~700 MB with torch, until exit)."""
    local = sys.modules.get("tandem.cluster.local")
    if local is None:
        return  # nothing imported it, so nothing was started early
    if isinstance(getattr(service, "cluster", None), local.LocalCluster):
        return
    local.discard_early_zygote()


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


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
    local = sys.modules.get("tandem.jobs.service")  # not loaded: none was made here
    if local is not None and isinstance(service, local.LocalJobService):
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


@record
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
