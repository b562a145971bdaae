"""A simulated cluster and jobs for admission policies: no processes, no real time.

``SimCluster`` implements ``tandem.jobs.admission.Capacity`` over ``num_nodes`` identical
nodes; it places each bundle on the node with the fewest free GPUs that can hold it (best
fit, so whole nodes stay free for large gangs) in O(GPUs per node) per bundle. ``SimJob``
is both a ``QueuedJob`` and a ``RunningJob``. The unit tests of the policies and
``benchmarks/sched_sim.py`` (1,000 nodes x 8 GPUs) use them; the policies run unchanged.
The placement strategy is not modelled (every gang is placed as ``PACK``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tandem.jobs.admission.base import RunningJob, demand

SimPlacement = list[tuple[int, float, float]]  # (node, GPUs, CPUs) per bundle


@dataclass(eq=False)
class SimJob:
    """A job of the simulation (``QueuedJob`` and ``RunningJob`` at once)."""

    job_id: str
    bundles: Sequence[Mapping[str, float]]
    owner: str = "default"
    priority: int = 0
    seq: int = 0
    submitted_at: float = 0.0
    strategy: str = "PACK"
    duration_s: float = 0.0
    """Work the job needs (seconds on its whole gang)."""
    preemptible: bool = True
    saves_on_request: bool = True
    """Checkpoints when asked (``get_preemption_info``); otherwise it loses the work since
    its last periodic checkpoint."""
    checkpoint_every_s: float = 1800.0
    started_at: float = 0.0
    last_checkpoint_at: float | None = None
    preempting: bool = False
    placement: Any = None
    done_s: float = 0.0  # work saved in checkpoints so far
    epoch: int = 0  # bumps at every start/stop, so stale events are dropped
    first_start: float | None = None
    end: float | None = None
    run_s: float = 0.0
    preemptions: int = 0
    demand: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.demand = demand(self.bundles)

    @property
    def holds(self) -> Mapping[str, float]:
        return self.demand if self.placement is not None else {}


class SimCluster:
    """``num_nodes`` nodes with ``gpus``, ``cpus`` each (a ``Capacity``)."""

    def __init__(self, num_nodes: int, gpus: int = 8, cpus: float = 96.0) -> None:
        self.num_nodes, self.gpus, self.cpus = num_nodes, gpus, cpus
        self.free_gpu = [float(gpus)] * num_nodes
        self.free_cpu = [float(cpus)] * num_nodes
        # nodes by whole free GPUs (buckets 0..gpus), for best fit in O(gpus)
        self._bucket: list[dict[int, None]] = [{} for _ in range(gpus + 1)]
        for n in range(num_nodes):
            self._bucket[gpus][n] = None
        self._total = {"GPU": float(gpus * num_nodes), "CPU": float(cpus * num_nodes)}
        self._free = dict(self._total)

    # -- Capacity -------------------------------------------------------------------------
    def total(self) -> Mapping[str, float]:
        return self._total

    def free(self) -> Mapping[str, float]:
        return self._free

    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str) -> SimPlacement | None:
        need = demand(bundles)
        if any(v > self._free.get(k, 0.0) + 1e-9 for k, v in need.items()):
            return None
        placed: SimPlacement = []
        for b in bundles:
            node = self._pick(b.get("GPU", 0.0), b.get("CPU", 0.0))
            if node is None:
                self.release(placed)
                return None
            self._take(node, b.get("GPU", 0.0), b.get("CPU", 0.0))
            placed.append((node, b.get("GPU", 0.0), b.get("CPU", 0.0)))
        return placed

    def release(self, placement: Any) -> None:
        for node, g, c in placement:
            self._take(node, -g, -c)

    def would_fit(self, bundles: Sequence[Mapping[str, float]], strategy: str,
                  freeing: Sequence[RunningJob]) -> bool:
        need = demand(bundles)
        extra: dict[str, float] = {}
        for r in freeing:
            for k, v in r.holds.items():
                extra[k] = extra.get(k, 0.0) + v
        if any(v > self._free.get(k, 0.0) + extra.get(k, 0.0) + 1e-9 for k, v in need.items()):
            return False
        # Nodes the freeing jobs hold get their resources back in an overlay; the gang is
        # then placed (best fit, largest bundles first) on the overlay and the free nodes,
        # without touching the cluster: O(bundles x overlay).
        over: dict[int, list[float]] = {}
        for r in freeing:
            for node, g, c in getattr(r, "placement", None) or ():
                o = over.get(node)
                if o is None:
                    o = over[node] = [self.free_gpu[node], self.free_cpu[node]]
                o[0] += g
                o[1] += c
        for b in sorted(bundles, key=lambda b: -b.get("GPU", 0.0)):
            g, c = b.get("GPU", 0.0), b.get("CPU", 0.0)
            best = None
            for node, (fg, fc) in over.items():
                if fg >= g - 1e-9 and fc >= c - 1e-9 and (best is None or fg < over[best][0]):
                    best = node
            if best is None:
                best = self._pick(g, c, exclude=over)
                if best is None:
                    return False
                over[best] = [self.free_gpu[best], self.free_cpu[best]]
            over[best][0] -= g
            over[best][1] -= c
        return True

    # -- internals ------------------------------------------------------------------------
    def _pick(self, g: float, c: float, exclude: Mapping[int, object] | None = None) -> int | None:
        start = int(-(-g // 1))  # whole GPUs needed (a fraction needs a node with one free)
        for level in range(start, self.gpus + 1):
            for node in self._bucket[level]:
                if (self.free_gpu[node] >= g - 1e-9 and self.free_cpu[node] >= c - 1e-9
                        and (exclude is None or node not in exclude)):
                    return node
        return None

    def _take(self, node: int, g: float, c: float) -> None:
        before = int(self.free_gpu[node] + 1e-9)
        self.free_gpu[node] -= g
        self.free_cpu[node] -= c
        after = int(self.free_gpu[node] + 1e-9)
        if after != before:
            del self._bucket[before][node]
            self._bucket[after][node] = None
        self._free["GPU"] -= g
        self._free["CPU"] -= c
