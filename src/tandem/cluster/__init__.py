"""Where workers run: ``LocalCluster`` (processes on this machine) or ``RayCluster``."""

from tandem.cluster.base import Cluster, Placement, WorkerProcess, WorkerSpec
from tandem.cluster.local import LocalCluster

__all__ = ["Cluster", "LocalCluster", "Placement", "WorkerProcess", "WorkerSpec"]
