"""What the dashboard keeps in memory on the server: the global event stream, each live
job's progress, and the cluster's capacity and allocation over time.

The job store keeps jobs, reports and per-worker usage, but not the cluster's allocation
over time nor a cross-job event stream; ``DashboardLive`` records both itself, in memory,
with bounded history: one sample a second for the last hour and one every 30 s for the
last day (about 6,500 samples). A restarted server starts a new history.

It subscribes to the job service (``service.subscribe``) like the server core does, and
pushes to each open ``/api/dashboard/events`` stream: ``job`` (a state change, at once),
``progress`` (iteration and main metric of jobs that reported, at most twice a second) and
``cluster`` (allocation now, once a second).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    RankReported,
    Reported,
    StatusChanged,
)
from tandem.jobs.scheduler import GangScheduler
from tandem.jobs.service import Job
from tandem.jobs.spec import JobStatus
from tandem.server.context import ServerContext
from tandem.server.vocabulary import shown_job_state

logger = logging.getLogger(__name__)

#: Keys of a report that are bookkeeping, not something to plot as "the" metric.
BOOKKEEPING = frozenset({
    "training_iteration", "time_total_s", "time_this_iter_s", "timestamp", "time_since_restore",
    "iterations_since_restore", "epoch", "step", "iteration", "trial_id", "done", "pid",
    "node_ip", "hostname", "date", "checkpoint_dir_name", "should_checkpoint", "config",
})
#: Preferred main metrics, in order; otherwise the first numeric key reported.
PREFERRED = ("loss", "val_loss", "valid_loss", "mean_loss", "accuracy", "val_accuracy",
             "score", "mean_accuracy", "reward")
SPARK_POINTS = 60
PROGRESS_KEPT = 5000
FINE_S, FINE_N = 1.0, 3600
COARSE_S, COARSE_N = 30.0, 2880


def main_metric(row: Mapping[str, object]) -> str | None:
    """The key the jobs view shows for a run: a loss or accuracy if reported, else the
    first numeric key that is not bookkeeping."""
    for k in PREFERRED:
        if _num(row.get(k)) is not None:
            return k
    for k, v in row.items():
        if k not in BOOKKEEPING and _num(v) is not None:
            return k
    return None


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass
class Progress:
    """A job's progress as the jobs view shows it."""

    iteration: int = 0
    epoch: int | None = None
    metric: str | None = None
    value: float | None = None
    spark: deque = field(default_factory=lambda: deque(maxlen=SPARK_POINTS))
    updated: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)  # the latest report as it came

    def add(self, rows: Sequence[dict[str, object]]) -> None:
        if rows:
            self.last = dict(rows[-1])
        for row in rows:
            it = row.get("training_iteration")
            self.iteration = int(it) if isinstance(it, (int, float)) else self.iteration + 1
            ep = row.get("epoch")
            if isinstance(ep, (int, float)) and not isinstance(ep, bool):
                self.epoch = int(ep)
            if self.metric is None:
                self.metric = main_metric(row)
            v = _num(row.get(self.metric)) if self.metric else None
            if v is not None:
                self.value = v
                self.spark.append(v)
        self.updated = time.time()

    def as_dict(self) -> dict[str, object]:
        return {"iteration": self.iteration, "epoch": self.epoch, "metric": self.metric,
                "value": self.value,
                "spark": list(self.spark)}


def _sum_bundles(bundles: Sequence[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in dict(b).items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def _fmt(x: float) -> str:
    return f"{x:g}" if x < 1e6 else f"{x / 2**30:.1f} GiB"


class _Stream:
    """One open event stream; items arrive on an asyncio queue of its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=2000)
        self.closed = False

    def push(self, item: tuple[str, object]) -> None:
        def put() -> None:
            try:
                self.queue.put_nowait(item)
            except asyncio.QueueFull:  # a reader that does not read: it is dropped
                self.closed = True
        try:
            self.loop.call_soon_threadsafe(put)
        except RuntimeError:
            self.closed = True


class DashboardLive:
    """Thread-safe. ``close()`` stops its sampling thread."""

    def __init__(self, server: ServerContext, interval_s: float = FINE_S) -> None:
        self.server = server
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._streams: set[_Stream] = set()
        self._progress: OrderedDict[str, Progress] = OrderedDict()
        self._dirty: set[str] = set()
        self.fine: deque[dict[str, Any]] = deque(maxlen=FINE_N)
        self.coarse: deque[dict[str, Any]] = deque(maxlen=COARSE_N)
        self._last_coarse = 0.0
        self._stop = threading.Event()
        server.service.subscribe(self._on_job_event)
        self._thread = threading.Thread(target=self._run, name="tandem-dashboard", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    # ------------------------------------------------------------------ events in

    def _tracked(self, job_id: str) -> bool:
        return self.server.hub.num_reports(job_id) is not None

    def _on_job_event(self, job: Job, event: JobEvent) -> None:
        """The job service's subscriber (runs on the job's thread: only quick work)."""
        job_id = job.job_id
        if not self._tracked(job_id):
            return  # a nested job a worker started: not a server job
        match event:
            case StatusChanged(status=status):
                state = shown_job_state(status.value, job.spec.metadata)
                self._broadcast(("job", {"job_id": job_id, "name": job.name, "state": state,
                                         "time": time.time()}))
            case Reported(rows=rows) if rows:
                with self._lock:
                    p = self._progress.get(job_id)
                    if p is None:
                        p = self._progress[job_id] = Progress()
                        while len(self._progress) > PROGRESS_KEPT:
                            self._progress.popitem(last=False)
                    p.add(rows)
                    self._dirty.add(job_id)
            case Reported() | Checkpointed() | RankReported() | Asked():
                pass  # the dashboard shows states and report progress only
            case _:
                assert_never(event)

    def last_report(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            p = self._progress.get(job_id)
            return dict(p.last) if p is not None else {}

    def progress(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            p = self._progress.get(job_id)
            return p.as_dict() if p is not None else None

    # ------------------------------------------------------------------ streams out

    def open_stream(self, loop: asyncio.AbstractEventLoop) -> _Stream:
        s = _Stream(loop)
        with self._lock:
            self._streams.add(s)
        return s

    def close_stream(self, s: _Stream) -> None:
        with self._lock:
            self._streams.discard(s)

    def _broadcast(self, item: tuple[str, object]) -> None:
        with self._lock:
            streams = list(self._streams)
        for s in streams:
            if s.closed:
                self.close_stream(s)
            else:
                s.push(item)

    def _run(self) -> None:
        last_sample = 0.0
        while not self._stop.wait(min(0.5, self.interval_s)):
            try:
                with self._lock:
                    dirty, self._dirty = self._dirty, set()
                    prog = {j: self._progress[j].as_dict() for j in dirty if j in self._progress}
                if prog:
                    self._broadcast(("progress", prog))
                now = time.time()
                if now - last_sample >= self.interval_s:
                    last_sample = now
                    sample = self.sample()
                    self._broadcast(("cluster", sample))
            except Exception:
                logger.exception("dashboard sampling failed")

    # ------------------------------------------------------------------ cluster

    def sample(self) -> dict[str, Any]:
        """Records (and returns) the cluster's capacity and allocation now."""
        cluster = self.server.cluster
        cap = {k: float(v) for k, v in cluster.resources().items()}
        avail = {k: float(v) for k, v in cluster.available().items()}
        alloc = {k: max(0.0, cap[k] - avail.get(k, 0.0)) for k in cap}
        rss = 0
        cpu = 0.0
        gpu_mem = 0
        for samples in dict(getattr(self.server.sampler, "latest", {}) or {}).values():
            for s in samples:
                rss += int(s.rss_bytes or 0)
                cpu += float(s.cpu_percent or 0.0) / 100.0
                gpu_mem += int(s.gpu_mem_bytes or 0)
        s = {"time": time.time(), "capacity": cap, "allocated": alloc,
             "used": {"CPU": round(cpu, 3), "memory": rss, "GPU_memory": gpu_mem}}
        with self._lock:
            self.fine.append(s)
            if s["time"] - self._last_coarse >= COARSE_S:
                self._last_coarse = s["time"]
                self.coarse.append(s)
        return s

    def history(self, since: float | None = None) -> list[dict[str, Any]]:
        """Samples oldest first: coarse ones older than the fine window, then fine ones."""
        with self._lock:
            fine = list(self.fine)
            coarse = list(self.coarse)
        start = fine[0]["time"] if fine else float("inf")
        out = [c for c in coarse if c["time"] < start] + fine
        if since is not None:
            out = [c for c in out if c["time"] > since]
        return out

    def nodes(self) -> list[dict[str, Any]]:
        """Each node's capacity, what tandem's jobs hold on it, and who holds it."""
        cluster = self.server.cluster
        nodes: dict[str, dict[str, Any]] = {}
        ray_nodes = _ray_nodes(cluster)
        if ray_nodes is not None:
            for n in ray_nodes:
                nodes[n["node_id"]] = {**n, "allocated": {}, "holders": []}
        for job in self.server.service.list():
            placement = getattr(job, "placement", None)
            if placement is None or job.status not in (JobStatus.RUNNING, JobStatus.RESTARTING):
                continue
            for i, (node_id, bundle) in enumerate(zip(placement.node_ids, placement.bundles)):
                node = nodes.setdefault(node_id, {
                    "node_id": node_id, "ip": placement.node_ips[i], "capacity": {},
                    "allocated": {}, "holders": []})
                for k, v in bundle.items():
                    node["allocated"][k] = node["allocated"].get(k, 0.0) + float(v)
                node["holders"].append({"job_id": job.job_id, "name": job.name, "rank": i,
                                        "bundle": dict(bundle),
                                        "gpu_ids": list(placement.gpu_ids[i])
                                        if i < len(placement.gpu_ids) else []})
        if ray_nodes is None:
            cap = {k: float(v) for k, v in cluster.resources().items()}
            if not nodes:
                nodes["local"] = {"node_id": "local", "ip": "127.0.0.1", "capacity": cap,
                                  "allocated": {}, "holders": []}
            elif len(nodes) == 1:
                next(iter(nodes.values()))["capacity"] = cap
        return sorted(nodes.values(), key=lambda n: n["node_id"])

    def queue(self) -> list[dict[str, Any]]:
        """Pending jobs in the order the scheduler considers them, each with why it waits."""
        service = self.server.service
        scheduler = getattr(service, "scheduler", None)
        # queued: new jobs, and running ones between placements (preempted, resized,
        # rescheduled after a failure), which wait in the same queue for their next one
        pending = [j for j in service.list() if self._tracked(j.job_id) and (
            j.status is JobStatus.PENDING or (j.status is JobStatus.RESTARTING
                                              and getattr(j, "placement", None) is None))]
        ordered: list[Any] = list(GangScheduler.order(pending)) if pending else []
        avail = {k: float(v) for k, v in self.server.cluster.available().items()}
        reserve = float(getattr(scheduler, "reserve_after_s", 30.0))
        now_mono = service.clock.now() if hasattr(service, "clock") else time.monotonic()
        out = []
        blocker: Any = None
        for pos, job in enumerate(ordered):
            need = _sum_bundles(job.bundles)
            short = {k: {"need": v, "free": avail.get(k, 0.0)}
                     for k, v in need.items() if v > avail.get(k, 0.0) + 1e-9}
            if blocker is not None:
                why = (f"held behind {blocker.job_id} ({blocker.name}), which has waited over "
                       f"{reserve:g} s: nothing passes it until it starts")
            elif short:
                why = "needs " + ", ".join(
                    f"{k} {_fmt(v['need'])} (free {_fmt(v['free'])})" for k, v in short.items())
            else:
                why = ("its resources are free in total but not in the shape it asks "
                       f"({job.strategy}, {len(job.bundles)} bundle(s)); or it starts now")
            policy_why = getattr(job, "wait_reason", None)  # the admission policy's words
            if isinstance(policy_why, str) and not policy_why.startswith(
                    ("waits: resources", "waits behind", "waits: next to start")):
                why = policy_why  # a quota, or lower-priority jobs yielding to it
            if job.status is JobStatus.RESTARTING and getattr(job, "status_reason", None):
                why = f"{job.status_reason} · {why}"  # why it left its placement, first
            out.append({"job_id": job.job_id, "name": job.name, "priority": job.priority,
                        "owner": getattr(job, "owner", "default"),
                        "position": pos + 1, "submitted_at": job.submitted_time,
                        "needs": need, "short": short, "reason": why})
            if blocker is None and now_mono - job.submitted_at >= reserve:
                blocker = job
        return out

    def scheduling(self) -> dict[str, Any]:
        """The admission policy (and its quotas), and what each owner's jobs hold."""
        service = self.server.service
        scheduler = getattr(service, "scheduler", None)
        describe = getattr(scheduler, "describe", None)
        out: dict[str, Any] = dict(describe()) if callable(describe) else {}
        in_use: dict[str, dict[str, float]] = {}
        for job in service.list():
            placement = getattr(job, "placement", None)
            if placement is None or job.status.is_terminal:
                continue
            held = in_use.setdefault(getattr(job, "owner", "default"), {})
            for k, v in _sum_bundles(placement.bundles).items():
                held[k] = held.get(k, 0.0) + v
        out["in_use"] = in_use
        groups = out.get("groups")
        if groups:  # what each group's members hold together (group quotas)
            group_use: dict[str, dict[str, float]] = {}
            for owner, group in groups.items():
                held = group_use.setdefault(group, {})
                for k, v in in_use.get(owner, {}).items():
                    held[k] = held.get(k, 0.0) + v
            out["group_in_use"] = group_use
        return out

    def holders(self) -> list[dict[str, object]]:
        """Running jobs with what they hold and their workers' latest use."""
        latest = dict(getattr(self.server.sampler, "latest", {}) or {})
        from tandem.server.usage import usage_dict

        out = []
        for job in self.server.service.list():
            if job.status not in (JobStatus.RUNNING, JobStatus.RESTARTING):
                continue
            if not self._tracked(job.job_id):
                continue
            placement = getattr(job, "placement", None)
            out.append({
                "job_id": job.job_id, "name": job.name, "state": job.status.value,
                "priority": job.priority, "owner": getattr(job, "owner", "default"),
                "preemptions": getattr(job, "num_preemptions", 0),
                "preempted": getattr(job, "preempt_reason", None),
                "holds": _sum_bundles(placement.bundles) if placement is not None else {},
                "nodes": sorted(set(placement.node_ids)) if placement is not None else [],
                "started_at": job.started_time,
                "usage": [usage_dict(s) for s in latest.get(job.job_id, [])],
            })
        return out


def _ray_nodes(cluster: object) -> list[dict[str, Any]] | None:
    """Ray's alive nodes with their capacity; None for a cluster that is not Ray's."""
    if type(cluster).__name__ != "RayCluster":
        return None
    try:
        import ray

        out = []
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            res = {k: float(v) for k, v in (n.get("Resources") or {}).items()
                   if not k.startswith("node:") and not k.startswith("accelerator_type")
                   and k != "object_store_memory"}
            out.append({"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress", ""),
                        "capacity": res})
        return out
    except Exception:  # noqa: BLE001 - Ray gone: no per-node view
        return None
