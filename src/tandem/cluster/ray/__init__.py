"""``RayCluster``: gangs placed with Ray placement groups, workers run as Ray actors.

Users provision the Ray cluster (``ray start``, the cluster launcher, KubeRay); tandem only
connects to it. Each job gets one placement group (``PACK`` by default), created when the
job is admitted and removed when it ends, so a pending job holds nothing. Each worker is a
``_TandemWorker`` actor on its bundle's node; it runs the same cloudpickled task a local
worker runs and talks to the driver over a TCP connection (frames from ``_wire``), so
reports reach the controller with the latency of one socket write. The connection is
authenticated in both directions (an HMAC challenge with a per-session key, which the actor
receives in its call's arguments) before anything on it is unpickled. The actor's output is
streamed into the worker's log file on the driver.

The placement group is the reservation; the actors themselves ask Ray for no resources and
are pinned to their bundle's node by node affinity. Removing a group would kill the actors
scheduled *in* it; pinned this way they outlive it, so a job can give its resources back
while it keeps running (a tuning trial lending its slot to the train job it waits on), as on
one machine. Each actor is killed as soon as its task returns. GPU bundles learn which
devices Ray assigned them from a short task run in the bundle (``CUDA_VISIBLE_DEVICES``).

The parts, one file each:

- ``_cluster.py``: ``RayCluster`` itself (resources, admission, workers, shutdown);
- ``_connect.py``: importing Ray and connecting to the cluster;
- ``_placement.py``: placement groups, rank order by node, per-node feasibility;
- ``_autoscaler.py``: the demand of waiting gangs, told to Ray's autoscaler;
- ``_gpus.py``: which devices Ray gave each GPU bundle;
- ``_io.py``: the driver's TCP I/O thread and its worker handles (``RayWorker``), on the
  I/O base the local cluster uses too (``tandem.cluster._wire.IOThread``).

Requires ``pip install 'tandem-ml[ray]'`` and tandem installed on every node.
"""

from tandem.cluster.ray._cluster import RayCluster
from tandem.cluster.ray._io import RayWorker

__all__ = ["RayCluster", "RayWorker"]
