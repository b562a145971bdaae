"""Where workers run: ``LocalCluster`` (processes on this machine) or ``RayCluster``."""

from typing import Any

from tandem.cluster._factory import make_cluster
from tandem.cluster.base import Cluster, Placement, WorkerProcess, WorkerSpec
from tandem.cluster.local import LocalCluster

__all__ = ["Cluster", "LocalCluster", "Placement", "RayCluster", "WorkerProcess", "WorkerSpec",
           "make_cluster"]


def __getattr__(name: str) -> Any:
    if name == "RayCluster":  # imported lazily: Ray is an optional dependency
        from tandem.cluster.ray import RayCluster

        return RayCluster
    raise AttributeError(f"module 'tandem.cluster' has no attribute {name!r}")
