"""``tandem.init`` / ``tandem.shutdown``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.cluster.base import validate_bundle


def init(
    address: str | None = None,
    *,
    num_cpus: float | None = None,
    num_gpus: float | None = None,
    resources: Mapping[str, float] | None = None,
    memory: float | None = None,
    token: str | None = None,
    cluster: str = "local",
    ray_address: str | None = None,
    ignore_reinit_error: bool = False,
    runtime_env: Mapping[str, object] | None = None,
    configure_logging: bool = True,
    logging_level: int | str = "info",
    logging_format: str | None = None,
    log_to_driver: bool | None = None,
    include_dashboard: bool | None = None,
    local_mode: bool = False,
    warm_workers: int | None = None,
    warm_pool_mb: float | None = None,
    owner: str | None = None,
    priority: int | None = None,
    scheduling: object = None,
    quotas: Mapping[str, object] | None = None,
    labels: Mapping[str, str] | None = None,
    object_store_memory: int | None = None,
    dashboard_host: str = "127.0.0.1",
    dashboard_port: int | None = None,
    job_config: object = None,
    logging_config: object = None,
    namespace: str | None = None,
    enable_resource_isolation: bool = False,
    cgroup_path: str | None = None,
    system_reserved_cpu: float | None = None,
    system_reserved_memory: int | None = None,
    proxy_server_url: str | None = None,
    **ray_kwargs: object,
) -> None:
    """Starts tandem's job service in this process, with the resources you declare.

    Args:
        address: a train server to submit jobs to (``host:port``, or ``"auto"`` for the local
            server in ``~/.tandem/server.json``); see ``tandem server start``. ``"local"``
            (or None) runs jobs in this process.
        token: the server's token (default ``$TANDEM_TOKEN``, else the local server's file).
        runtime_env: for jobs sent to a server: ``{"working_dir": ".", "env_vars": {...}}``
            uploads that folder (``.gitignore`` honoured) so your own modules import there.
            Without ``working_dir``, the folder of the script you run is sent (capped);
            ``{"working_dir": None}`` sends nothing.
        num_cpus, num_gpus, memory, resources: the logical resources of the embedded local
            cluster, as ``ray.init(num_cpus=...)`` declares them (default: this machine's).
        cluster: ``"local"`` (processes on this machine) or ``"ray"`` (a Ray cluster).
        ray_address: the Ray cluster for ``cluster="ray"`` (``"auto"`` or ``host:port``).
        configure_logging, logging_level, logging_format: as in ``ray.init``: with
            ``configure_logging`` (default) the ``tandem`` logger gets a console handler at
            ``logging_level`` (default ``"info"``) in ``logging_format``; False leaves
            logging to you.
        log_to_driver: as in ``ray.init``: False never echoes workers' output here (it
            stays in each run's logs, ``tandem jobs logs``); True echoes it, tuning trials'
            too; None keeps the defaults (a trainer's ``fit()`` echoes, a Tuner does at
            ``RunConfig(verbose=2)``).
        include_dashboard: None or False (tandem starts no dashboard in your process);
            True is refused with where the dashboard is (``tandem server start``).
        local_mode: False only (Ray deprecated it; tandem runs workers as processes).
        warm_workers: most worker processes the local cluster keeps started and waiting
            for a job (default 4; each leaves after 30 s without one); 0 starts every worker
            when its job starts. tandem's own (docs/warm_workers.md).
        warm_pool_mb: most memory (MiB of PSS) the warm workers and the zygote they fork
            from hold together (default 500, or ``$TANDEM_WARM_POOL_MB``; a train server
            reads that variable). Past it the pool learns no more imports and keeps fewer
            warm workers. tandem's own (docs/warm_workers.md).
        owner, priority: tandem only: the owner and queue priority of this process's jobs
            when their ``RunConfig`` names none (default ``"default"`` and 0).
        scheduling: tandem only, embedded service: the admission policy, ``"fifo"``
            (default: gang scheduling in priority order with backfill), ``"fair"`` (quotas
            and dominant-resource fair share among owners) or ``"priority"`` (that, plus
            preemption of lower-priority runs with a checkpoint), or an
            ``AdmissionPolicy``. See docs/scheduling.md.
        quotas: tandem only, embedded service: ``{owner: {"cpus": 8, "gpus": 2, "memory":
            64e9, "queued_jobs": 100}}`` (owner ``"*"``: everyone else); needs
            ``scheduling="fair"`` or ``"priority"``.
    Other ``ray.init`` keywords are refused with what to do instead.
    """
    from tandem.jobs import runtime
    from tandem.jobs.service import LocalJobService

    ray_only = {"labels": labels, "object_store_memory": object_store_memory,
             "dashboard_port": dashboard_port, "job_config": job_config, "namespace": namespace,
             "cgroup_path": cgroup_path, "system_reserved_cpu": system_reserved_cpu,
             "system_reserved_memory": system_reserved_memory,
             "proxy_server_url": proxy_server_url}
    refused = {k: v for k, v in ray_only.items() if v is not None}
    if dashboard_host != "127.0.0.1":
        refused["dashboard_host"] = dashboard_host
    if enable_resource_isolation is not False:
        refused["enable_resource_isolation"] = enable_resource_isolation
    _check_ray_keywords({**refused, **ray_kwargs}, include_dashboard=include_dashboard,
                        local_mode=local_mode, log_to_driver=log_to_driver)
    if logging_config is not None:
        logging_level = _from_logging_config(logging_config, logging_level)
    level = _logging_level(logging_level)
    if isinstance(address, str) and address.strip().lower() == "local":
        address = None  # as TANDEM_ADDRESS=local: this process
    if runtime.current_service() is not None:
        if ignore_reinit_error:
            return
        raise ConfigError(
            "tandem.init() was called, but tandem is already running in this process (an "
            "earlier init() or fit() started it). Call tandem.shutdown() first, or pass "
            "ignore_reinit_error=True."
        )
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus), ("memory", memory)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value < 0):
            raise ConfigError(f"tandem.init({name}={value!r}): give a number >= 0.")
    if warm_workers is not None and (isinstance(warm_workers, bool)
                                     or not isinstance(warm_workers, int) or warm_workers < 0):
        raise ConfigError(f"tandem.init(warm_workers={warm_workers!r}): give a whole number "
                          f">= 0 (0 starts every worker when its job starts).")
    if warm_pool_mb is not None and (isinstance(warm_pool_mb, bool)
                                     or not isinstance(warm_pool_mb, (int, float))
                                     or not warm_pool_mb > 0):
        raise ConfigError(f"tandem.init(warm_pool_mb={warm_pool_mb!r}): give a number of MiB "
                          f"> 0 (default 500), the most memory the warm workers and the "
                          f"process they fork from hold together.")
    if resources is not None:
        validate_bundle(resources, "tandem.init(resources)")
    policy = _scheduling_policy(scheduling, quotas)
    if owner is not None and (not isinstance(owner, str) or not owner.strip()):
        raise ConfigError(f"tandem.init(owner={owner!r}): give a non-empty name.")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ConfigError(f"tandem.init(priority={priority!r}): give an int (higher first).")
    if configure_logging:
        _configure_logging(level, logging_format)
    runtime.set_log_to_driver(log_to_driver)
    runtime.set_job_defaults(runtime.JobDefaults(owner=owner, priority=priority))
    if address is None and runtime_env is not None:
        # runtime_env is for a train server: $TANDEM_ADDRESS names it, as the error below says
        env_address = os.environ.get("TANDEM_ADDRESS", "").strip()
        if env_address and env_address != "local":
            address = env_address
    if address is not None:
        given = [n for n, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus),
                                ("memory", memory), ("resources", resources),
                                ("warm_workers", warm_workers),
                                ("warm_pool_mb", warm_pool_mb), ("scheduling", scheduling),
                                ("quotas", quotas)) if v is not None]
        if given:
            raise ConfigError(
                f"tandem.init(address={address!r}, {', '.join(given)}=...): the resources and "
                f"scheduling of a train server are set when it starts (`tandem server start "
                f"--num-cpus ...`); drop {', '.join(given)} here."
            )
        from tandem.jobs.client import RemoteJobService

        service = RemoteJobService(address, token=token, runtime_env=runtime_env)
        try:
            service.health()  # fail here, with the address tried, not at the first fit()
        except BaseException:
            service.shutdown()
            raise
        runtime.set_service(service)
        return
    if runtime_env is not None:
        raise ConfigError(
            "tandem.init(runtime_env=...) applies to jobs sent to a train server; give "
            "address= (or set TANDEM_ADDRESS) too, or drop runtime_env to train in this process."
        )
    if cluster not in ("local", "ray"):
        raise ConfigError(f"tandem.init(cluster={cluster!r}): use 'local' or 'ray'.")
    if cluster == "local" and ray_address is not None:
        raise ConfigError(
            f"tandem.init(ray_address={ray_address!r}) needs cluster='ray' too: "
            f"tandem.init(cluster='ray', ray_address={ray_address!r})."
        )
    from tandem.cluster import make_cluster

    c: Any = make_cluster(cluster, ray_address if cluster == "ray" else None,
                          num_cpus=num_cpus, num_gpus=num_gpus, memory=memory,
                          resources=dict(resources) if resources is not None else None,
                          warm_workers=warm_workers, warm_pool_mb=warm_pool_mb)
    runtime.set_service(LocalJobService(c, scheduler=policy, default_owner=owner or "default"))


def _scheduling_policy(scheduling: object, quotas: Mapping[str, object] | None) -> Any:
    """The embedded service's admission policy from ``tandem.init(scheduling=, quotas=)``."""
    from tandem.jobs.admission import AdmissionPolicy, FairSharePolicy, make_policy

    if scheduling is None and quotas is None:
        return None
    if isinstance(scheduling, AdmissionPolicy):
        if quotas is not None:
            raise ConfigError("tandem.init(scheduling=<policy object>, quotas=...): give the "
                              "quotas to the policy object itself.")
        return scheduling
    if scheduling is not None and not isinstance(scheduling, str):
        raise ConfigError(f"tandem.init(scheduling={scheduling!r}): use 'fifo', 'fair', "
                          f"'priority' or an AdmissionPolicy.")
    name = scheduling or "fair"
    if quotas is not None and not isinstance(quotas, Mapping):
        raise ConfigError(f"tandem.init(quotas={quotas!r}): give a dict {{owner: {{'cpus': 8, "
                          f"'gpus': 1, 'memory': 64e9, 'queued_jobs': 100}}}}.")
    if name == "fifo":
        if quotas is not None:
            raise ConfigError("tandem.init(scheduling='fifo', quotas=...): the FIFO policy has "
                              "no quotas; use scheduling='fair' or 'priority'.")
        return make_policy("fifo")
    policy = make_policy(name, **({"quotas": dict(quotas)} if quotas is not None else {}))
    assert isinstance(policy, FairSharePolicy) or hasattr(policy, "set_quota")
    return policy


_RAY_ONLY: dict[str, str] = {
    "object_store_memory": "tandem has no object store: workers read data from your "
                           "datasets or storage; declare memory with memory=",
    "namespace": "tandem has no named actors; drop it",
    "dashboard_host": "the dashboard is served by `tandem server start --host ...`",
    "dashboard_port": "the dashboard is served by `tandem server start --port ...`",
    "enable_resource_isolation": "tandem reserves no cgroups for system processes; leave "
                                 "it False and declare the workers' share with num_cpus=",
    "cgroup_path": "tandem reserves no cgroups for system processes (no resource isolation)",
    "system_reserved_cpu": "tandem reserves no cgroups for system processes; declare fewer "
                           "num_cpus= to leave some for the system",
    "system_reserved_memory": "tandem reserves no cgroups for system processes; declare "
                              "less memory= to leave some for the system",
    "proxy_server_url": "Ray Client's proxy does not exist here; give address= of a tandem "
                        "train server instead",
    "job_config": "give runtime_env= (with address=) for jobs sent to a train server",
    "labels": "declare custom resources with resources={...}",
    "_temp_dir": "tandem writes runs under RunConfig(storage_path=...)",
    "_system_config": "drop it; tandem has no Ray system config",
}


def _check_ray_keywords(extra: Mapping[str, object], *, include_dashboard: bool | None,
                        local_mode: bool, log_to_driver: bool | None) -> None:
    for key, value in extra.items():
        hint = _RAY_ONLY.get(key)
        if hint is None:
            raise ConfigError(
                f"tandem.init({key}={value!r}): unknown keyword. tandem.init takes address, "
                f"num_cpus, num_gpus, memory, resources, token, cluster, ray_address, "
                f"ignore_reinit_error, runtime_env, owner, priority, scheduling, quotas and "
                f"ray.init's configure_logging, "
                f"logging_level, logging_format, log_to_driver, include_dashboard, local_mode."
            )
        raise ConfigError(f"tandem.init({key}={value!r}) is a ray.init option with no "
                          f"equivalent here: {hint}.")
    if include_dashboard:
        raise ConfigError(
            "tandem.init(include_dashboard=True): tandem starts no dashboard inside your "
            "process; run `tandem server start` (dashboard at its address) or `tandem "
            "dashboard PATH` for results on disk, and drop include_dashboard."
        )
    if local_mode:
        raise ConfigError(
            "tandem.init(local_mode=True): Ray deprecated local mode and tandem has none; "
            "workers are processes. To debug, call your train function directly, or use "
            "ScalingConfig(num_workers=1); drop local_mode."
        )
    if log_to_driver is not None and not isinstance(log_to_driver, bool):
        raise ConfigError(f"tandem.init(log_to_driver={log_to_driver!r}): use True or False.")


def _from_logging_config(config: object, default: int | str) -> int | str:
    """``ray.init(logging_config=ray.LoggingConfig(log_level=..., encoding="TEXT"))``: its
    ``log_level`` sets the ``tandem`` logger's level; JSON encoding and extra attributes
    are refused (tandem's console handler writes text)."""
    encoding = getattr(config, "encoding", "TEXT")
    attrs = getattr(config, "additional_log_standard_attrs", None)
    if not hasattr(config, "log_level") or str(encoding).upper() != "TEXT" or attrs:
        raise ConfigError(
            f"tandem.init(logging_config={config!r}): tandem reads its log_level (text "
            f"encoding only, no additional_log_standard_attrs). Pass "
            f"ray.LoggingConfig(log_level='INFO') or use logging_level= and logging_format=."
        )
    return config.log_level if config.log_level is not None else default


def _logging_level(level: int | str) -> int:
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    if isinstance(level, str):
        got = logging.getLevelName(level.upper())
        if isinstance(got, int):
            return got
    raise ConfigError(
        f"tandem.init(logging_level={level!r}): use a logging level such as logging.INFO, "
        f"'info', 'debug' or 'warning'."
    )


_HANDLER_NAME = "tandem.init"
DEFAULT_LOGGING_FORMAT = "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"


def _configure_logging(level: int, fmt: str | None) -> None:
    """As ``ray.init(configure_logging=True)`` does for the ``ray`` logger: the ``tandem``
    logger at ``level`` with one console handler (replaced, not stacked, on a second call);
    where the program already configured the root logger, its handlers are used instead,
    unless a ``logging_format`` is given."""
    log = logging.getLogger("tandem")
    log.setLevel(level)
    for h in list(log.handlers):
        if h.get_name() == _HANDLER_NAME:
            log.removeHandler(h)
    if logging.getLogger().handlers and fmt is None:
        return  # the program configured logging itself: tandem's records reach its handlers
    handler = logging.StreamHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(fmt or DEFAULT_LOGGING_FORMAT))
    log.addHandler(handler)
    log.propagate = not fmt and not logging.getLogger().handlers


def is_initialized() -> bool:
    from tandem.jobs import runtime

    return runtime.current_service() is not None


def shutdown() -> None:
    """Stops every job and worker process tandem started in this process."""
    from tandem.jobs import runtime

    runtime.shutdown_service()
    runtime.set_log_to_driver(None)
    from tandem.cluster.local import discard_early_zygote

    discard_early_zygote()  # started by ``import tandem.train.tensorflow``, never used
