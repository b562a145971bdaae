"""``ClusterCapacity``: a real ``Cluster`` seen as a policy's ``Capacity``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tandem.cluster.base import Cluster
from tandem.jobs.admission.base import RunningJob, demand


class ClusterCapacity:
    """Places gangs on the cluster itself; ``would_fit`` compares totals (free now plus
    what the yielding jobs hold), which is exact on one machine and an estimate across
    several (the service then waits for the freed resources and places for real)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._total = cluster.resources()
        # an autoscaling cluster (RayCluster(autoscaling=True)) learns what to add from the
        # gangs that failed to place, so policies try to place a gang even when today's free
        # totals say it cannot fit
        self.grows = bool(getattr(cluster, "autoscaling", False))

    def total(self) -> Mapping[str, float]:
        return self._total

    def free(self) -> Mapping[str, float]:
        return self.cluster.available()

    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str) -> object | None:
        return self.cluster.place(bundles, strategy)

    def release(self, placement: Any) -> None:
        self.cluster.release(placement)

    def would_fit(self, bundles: Sequence[Mapping[str, float]], strategy: str,
                  freeing: Sequence[RunningJob]) -> bool:
        free = dict(self.cluster.available())
        for r in freeing:
            for k, v in r.holds.items():
                free[k] = free.get(k, 0.0) + v
        return all(v <= free.get(k, 0.0) + 1e-9 for k, v in demand(bundles).items())
