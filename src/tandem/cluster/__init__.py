"""Where workers run: ``LocalCluster`` (processes on this machine) or ``RayCluster``.

Names are imported when first used (``tandem._core.lazy``): the zygote and the workers
import ``tandem.cluster._wire`` without paying for the cluster code; ``RayCluster`` needs
Ray, an optional dependency."""

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem.cluster._factory import make_cluster
    from tandem.cluster.base import Cluster, Placement, WorkerProcess, WorkerSpec
    from tandem.cluster.local import LocalCluster
    from tandem.cluster.ray import RayCluster

__all__ = ["Cluster", "LocalCluster", "Placement", "RayCluster", "WorkerProcess", "WorkerSpec",
           "make_cluster"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "make_cluster": "._factory",
    "Cluster": ".base",
    "Placement": ".base",
    "WorkerProcess": ".base",
    "WorkerSpec": ".base",
    "LocalCluster": ".local",
    "RayCluster": ".ray",
})
