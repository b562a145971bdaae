"""``make_cluster``: build the cluster a job service runs on, by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.cluster.base import Cluster

KINDS = ("local", "ray")


def make_cluster(
    kind: str = "local",
    ray_address: str | None = None,
    *,
    num_cpus: float | None = None,
    num_gpus: float | None = None,
    memory: float | None = None,
    resources: Mapping[str, float] | None = None,
    warm_workers: int | None = None,
    warm_pool_mb: float | None = None,
    **ray_options: Any,
) -> Cluster:
    """Returns a ``LocalCluster`` or a ``RayCluster``.

    Args:
        kind: ``"local"`` (processes on this machine) or ``"ray"``.
        ray_address: for ``"ray"``: ``"auto"`` (default) or ``"host:port"``; giving it with
            ``kind="local"`` selects Ray too (``tandem server start --ray-address ADDR``).
        num_cpus, num_gpus, memory, resources: the local cluster's logical resources. A Ray
            cluster's resources are Ray's own; these are refused with ``kind="ray"``.
        warm_workers: for ``"local"``: most warm workers kept ready
            (``WarmPoolConfig.max_workers``; default 4, 0 = none).
        warm_pool_mb: for ``"local"``: most memory (MiB of PSS) the zygote and the warm
            workers hold (``WarmPoolConfig.max_pss_mb``; default 500).
        ray_options: passed to ``RayCluster`` (``runtime_env``, ``autoscaling``, ...).

    Raises:
        ConfigError: an unknown kind, or local-only options given for Ray.
    """
    if ray_address is not None and kind == "local":
        kind = "ray"
    if kind == "local":
        if ray_options:
            raise ConfigError(
                f"make_cluster(kind='local') got Ray options {sorted(ray_options)}; use "
                f"kind='ray' or drop them."
            )
        from tandem.cluster._pool import WarmPoolConfig
        from tandem.cluster.local import LocalCluster

        bounds: dict[str, Any] = {}
        if warm_workers is not None:
            bounds["max_workers"] = warm_workers
        if warm_pool_mb is not None:
            bounds["max_pss_mb"] = warm_pool_mb
        pool = WarmPoolConfig(**bounds) if bounds else None
        return LocalCluster(num_cpus=num_cpus, num_gpus=num_gpus, memory=memory,
                            resources=dict(resources or {}), warm_pool=pool)
    if kind == "ray":
        given = [n for n, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus),
                                ("memory", memory), ("resources", resources),
                                ("warm_workers", warm_workers),
                                ("warm_pool_mb", warm_pool_mb)) if v is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} configure the local cluster; on Ray the "
                f"cluster's resources are Ray's own (set them with `ray start --num-cpus ...`). "
                f"Drop {', '.join(given)}, or use cluster='local'."
            )
        from tandem.cluster.ray import RayCluster

        return RayCluster(ray_address or "auto", **ray_options)
    raise ConfigError(f"cluster={kind!r} is not known: use one of {', '.join(KINDS)}.")
