"""``tandem.init`` / ``tandem.shutdown``."""

from __future__ import annotations

from typing import Any, Mapping

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
) -> None:
    """Starts tandem's job service in this process, with the resources you declare.

    Args:
        address: a train server to submit jobs to (``host:port``); see ``tandem server start``.
        num_cpus, num_gpus, memory, resources: the logical resources of the embedded local
            cluster, as ``ray.init(num_cpus=...)`` declares them (default: this machine's).
        cluster: ``"local"`` (processes on this machine) or ``"ray"`` (a Ray cluster).
        ray_address: the Ray cluster for ``cluster="ray"`` (``"auto"`` or ``host:port``).
    """
    from tandem.jobs import runtime
    from tandem.jobs.service import LocalJobService

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
    if resources is not None:
        validate_bundle(resources, "tandem.init(resources)")
    if address is not None:
        raise ConfigError(
            f"tandem.init(address={address!r}): submitting to a train server is not available "
            f"in this version yet; leave address unset to use the embedded job service."
        )
    if cluster == "local":
        from tandem.cluster.local import LocalCluster

        c: Any = LocalCluster(num_cpus=num_cpus, num_gpus=num_gpus, memory=memory,
                              resources=dict(resources or {}))
    elif cluster == "ray":
        raise ConfigError(
            "tandem.init(cluster='ray') is not available in this version yet; use "
            "cluster='local'."
        )
    else:
        raise ConfigError(f"tandem.init(cluster={cluster!r}): use 'local' or 'ray'.")
    runtime.set_service(LocalJobService(c))


def is_initialized() -> bool:
    from tandem.jobs import runtime

    return runtime.current_service() is not None


def shutdown() -> None:
    """Stops every job and worker process tandem started in this process."""
    from tandem.jobs import runtime

    runtime.shutdown_service()
