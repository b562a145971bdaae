"""Gang planning: which rank runs where, and what it is told about its neighbours.

Pure functions over a placement's node list, so they are unit-tested without processes.
Rank ``r`` runs on bundle ``r`` (a cluster that reorders bundles, such as ``RayCluster``
grouping them by node, does so in the ``Placement`` it returns). Local ranks and node ranks
follow node *ids*, not IPs: several Ray nodes may share one host and each is its own node
to the workers. Whether a gang's files are all on one machine follows *hosts* (IPs): nodes
on one host share its filesystem.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.train.api.checkpoint import _is_url

SHARED_STORAGE_ENV = "TANDEM_STORAGE_IS_SHARED"


@record
class RankPlan:
    """Where one rank runs and what it learns about its place in the gang."""

    world_rank: int
    bundle_index: int
    node_id: str
    node_ip: str
    node_rank: int
    """Index of the rank's node, nodes numbered in order of their first rank."""
    local_rank: int
    """Index of the rank among the ranks on its node."""
    local_world_size: int
    """How many ranks run on the rank's node."""


def plan_gang(node_ids: Sequence[str], node_ips: Sequence[str]) -> tuple[RankPlan, ...]:
    """One ``RankPlan`` per bundle of a placement (``node_ids[i]`` holds bundle ``i``).

    Raises:
        ValueError: ``node_ids`` and ``node_ips`` differ in length.
    """
    if len(node_ids) != len(node_ips):
        raise ValueError(f"{len(node_ids)} node ids but {len(node_ips)} node IPs")
    node_rank: dict[str, int] = {}
    local_count: dict[str, int] = {}
    locals_: list[int] = []
    for node in node_ids:
        node_rank.setdefault(node, len(node_rank))
        locals_.append(local_count.get(node, 0))
        local_count[node] = locals_[-1] + 1
    return tuple(
        RankPlan(world_rank=r, bundle_index=r, node_id=node, node_ip=node_ips[r],
                 node_rank=node_rank[node], local_rank=locals_[r],
                 local_world_size=local_count[node])
        for r, node in enumerate(node_ids)
    )


def with_local_ranks(envs: Sequence[Mapping[str, str]],
                     plan: Sequence[RankPlan]) -> list[Mapping[str, str]]:
    """A backend's per-rank environment with ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` taken
    from the plan (by node id), where the backend sets them at all."""
    out: list[Mapping[str, str]] = []
    for env, p in zip(envs, plan):
        if "LOCAL_RANK" in env:
            env = {**env, "LOCAL_RANK": str(p.local_rank),
                   "LOCAL_WORLD_SIZE": str(p.local_world_size)}
        out.append(env)
    return out


def hosts(node_ips: Sequence[str]) -> int:
    """How many machines a placement spans. A node whose address is unknown (``""``)
    counts as a machine of its own: it cannot be shown to share a filesystem."""
    known = {ip for ip in node_ips if ip}
    return len(known) + sum(1 for ip in node_ips if not ip)


def storage_is_shared_by_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user declared the storage path a shared filesystem
    (``TANDEM_STORAGE_IS_SHARED=1``)."""
    env = os.environ if environ is None else environ
    return env.get(SHARED_STORAGE_ENV, "") not in ("", "0")


def storage_refusal(*, storage_path: str, node_ips: Sequence[str], run_name: str,
                    num_workers: int, declared_shared: bool) -> ConfigError | None:
    """The error that refuses a gang whose workers cannot all write the run's storage, or
    None when they can: the gang is on one host (nodes on one host share its
    filesystem), the storage is a remote URL, or the user declared the path shared."""
    n_hosts = hosts(node_ips)
    if n_hosts <= 1 or declared_shared:
        return None
    if _is_url(storage_path) and not storage_path.startswith(("file://", "local://")):
        return None
    return ConfigError(
        f"Run {run_name}: its {num_workers} workers were placed on {n_hosts} machines "
        f"({', '.join(sorted({ip or '?' for ip in node_ips}))}), but RunConfig(storage_path="
        f"{storage_path!r}) is a path on this machine, which the other machines cannot write "
        f"checkpoints to. Use shared storage: an fsspec URL such as 's3://bucket/runs' or "
        f"'gs://bucket/runs', or a shared filesystem (NFS) mounted at the same path on "
        f"every node - then set {SHARED_STORAGE_ENV}=1 to say so. Or keep the gang "
        f"on one node with ScalingConfig(placement_strategy='STRICT_PACK')."
    )


def elastic_target(current: int, max_workers: int, spare: int) -> int:
    """An elastic gang's next size: as big as the spare room allows, at most
    ``max_workers`` (the decision; the controller carries it out at a checkpoint)."""
    return max(current, min(max_workers, current + max(0, spare)))
