"""``tandem.init`` / ``tandem.shutdown``."""

from __future__ import annotations

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
    runtime_env: Mapping[str, Any] | None = None,
) -> None:
    """Starts tandem's job service in this process, with the resources you declare.

    Args:
        address: a train server to submit jobs to (``host:port``, or ``"auto"`` for the local
            server in ``~/.tandem/server.json``); see ``tandem server start``.
        token: the server's token (default ``$TANDEM_TOKEN``, else the local server's file).
        runtime_env: for jobs sent to a server: ``{"working_dir": ".", "env_vars": {...}}``
            uploads that folder (``.gitignore`` honoured) so your own modules import there.
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
        given = [n for n, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus),
                                ("memory", memory), ("resources", resources)) if v is not None]
        if given:
            raise ConfigError(
                f"tandem.init(address={address!r}, {', '.join(given)}=...): the resources of a "
                f"train server are set when it starts (`tandem server start --num-cpus ...`); "
                f"drop {', '.join(given)} here."
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
                          resources=dict(resources) if resources is not None else None)
    runtime.set_service(LocalJobService(c))


def is_initialized() -> bool:
    from tandem.jobs import runtime

    return runtime.current_service() is not None


def shutdown() -> None:
    """Stops every job and worker process tandem started in this process."""
    from tandem.jobs import runtime

    runtime.shutdown_service()
