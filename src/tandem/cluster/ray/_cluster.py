"""``RayCluster``: the ``Cluster`` on Ray (see the package docstring for how it works)."""

from __future__ import annotations

import itertools
import logging
import math
import os
import secrets
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from tandem.cluster.base import Bundle, Cluster, Placement, Sink, WorkerProcess, WorkerSpec
from tandem.cluster.ray._autoscaler import AutoscalerDemand
from tandem.cluster.ray._connect import connect, import_ray
from tandem.cluster.ray._gpus import GpuProbe
from tandem.cluster.ray._io import RayIO, RayWorker, exit_code
from tandem.cluster.ray._placement import (
    PGHandle,
    check_bundle_shapes,
    group_by_node,
    ray_bundle,
    reachable,
    remove_pg,
    total,
    visible,
)

logger = logging.getLogger(__name__)


class RayCluster(Cluster):
    """Jobs on a Ray cluster: one placement group per gang, one actor per worker.

    Args:
        address: the Ray cluster, ``"auto"`` (the one ``ray start`` runs on this machine)
            or ``"host:port"`` / ``"ray://..."``. Ignored when this process is already
            connected to Ray (``ray.is_initialized()``): that connection is used (with a
            warning if ``address`` names another cluster).
        runtime_env: a Ray runtime environment for the worker actors (e.g. a
            ``working_dir`` with your code when the nodes do not have it).
        autoscaling: the Ray cluster grows on demand (autoscaler, KubeRay): do not refuse
            jobs larger than today's nodes, and ask Ray's autoscaler for the gangs of the
            jobs waiting for room (``ray.autoscaler.sdk.request_resources``; a pending job
            still holds no placement group).
        poll_interval_s: how often pending jobs are tried again (Ray capacity changes as
            nodes come and go, which the job service cannot see otherwise).
        place_timeout_s: how long ``place`` waits for a placement group Ray accepted
            before giving up for now (it is then removed; the job stays pending).
        namespace: the Ray namespace when tandem connects (default ``"tandem"``).
    """

    needs_polling = True
    supports_ray_objects = True

    def __init__(
        self,
        address: str | None = "auto",
        *,
        runtime_env: dict | None = None,
        autoscaling: bool = False,
        poll_interval_s: float = 0.5,
        place_timeout_s: float = 2.0,
        namespace: str | None = "tandem",
    ) -> None:
        self._owns_ray = connect(address, namespace)
        self.address = address
        self.runtime_env = runtime_env
        self.autoscaling = autoscaling
        self.poll_interval_s = poll_interval_s
        self.place_timeout_s = place_timeout_s
        self._lock = threading.Lock()
        self._pgs: dict[str, Any] = {}
        self._released: list[tuple[float, dict[str, float]]] = []
        self._ids = itertools.count()
        self._uid = secrets.token_hex(3)
        self._io: RayIO | None = None
        self._io_lock = threading.Lock()
        self._actor_cls: Any = None
        self._gpus = GpuProbe()
        self._node_ips: dict[str, str] = {}
        self._demand = AutoscalerDemand(poll_interval_s) if autoscaling else None

    # -- resources ---------------------------------------------------------------------
    def resources(self) -> dict[str, float]:
        return visible(import_ray().cluster_resources())

    def available(self) -> dict[str, float]:
        return visible(import_ray().available_resources())

    def _alive_nodes(self) -> list[dict]:
        nodes = [n for n in import_ray().nodes() if n.get("Alive")]
        for n in nodes:
            self._node_ips[n["NodeID"]] = n["NodeManagerAddress"]
        return nodes

    def check_feasible(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> None:
        if self.autoscaling:
            return
        super().check_feasible(bundles, strategy)

    def _check_bundle_shapes(self, bundles: Sequence[Bundle], strategy: str) -> None:
        nodes = [visible(n.get("Resources") or {}) for n in self._alive_nodes()]
        check_bundle_shapes(nodes, bundles, strategy)

    # -- placement ---------------------------------------------------------------------
    def place(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> Placement | None:
        import_ray()
        from ray.util.placement_group import placement_group, placement_group_table

        ray_bundles = [ray_bundle(b) for b in bundles]
        need = total(ray_bundles)
        avail = self._available_with_released()
        if any(avail.get(k, 0.0) + 1e-9 < v for k, v in need.items()):
            self._wants(bundles, ray_bundles)
            return None  # cannot fit now: hold nothing
        name = f"tandem_{self._uid}_{next(self._ids)}"
        pg = placement_group(ray_bundles, strategy=strategy, name=name)
        if not pg.wait(timeout_seconds=self.place_timeout_s):
            remove_pg(pg)  # Ray's view moved on (or fragmentation): try again later
            self._wants(bundles, ray_bundles)
            return None
        self._wants(bundles, None)
        table = placement_group_table(pg)
        b2n = table.get("bundles_to_node_id") or {}
        node_of = [b2n.get(i, "") for i in range(len(bundles))]
        ips = self._node_ips
        if any(n not in ips for n in node_of):
            self._alive_nodes()
        order = group_by_node(node_of, bundles)
        pid = pg.id.hex()
        with self._lock:
            self._pgs[pid] = pg
        return Placement(
            placement_id=pid,
            bundles=tuple(dict(bundles[i]) for i in order),
            node_ids=tuple(node_of[i] for i in order),
            node_ips=tuple(ips.get(node_of[i], "") for i in order),
            gpu_ids=tuple(() for _ in order),  # Ray's device ids: see _gpus.py
            strategy=strategy,
            handle=PGHandle(pg, order),
        )

    # -- autoscaling -------------------------------------------------------------------
    def _wants(self, bundles: Sequence[Bundle], ray_bundles: list[dict] | None) -> None:
        """Records (or, with None, clears) the demand of a gang that did not fit, for Ray's
        autoscaler (``autoscaling=True`` only)."""
        if self._demand is None:
            return
        if ray_bundles is None:
            self._demand.placed(id(bundles))
        else:
            self._demand.want(id(bundles), ray_bundles)

    def release(self, placement: Placement) -> None:
        """Removes the placement group. Workers still running keep running (they are not
        scheduled in the group): a job lending its resources to a nested job goes on."""
        with self._lock:
            pg = self._pgs.pop(placement.placement_id, None)
            if pg is not None:
                self._released.append(
                    (time.monotonic(), total([ray_bundle(b) for b in placement.bundles])))
        if pg is not None:
            remove_pg(pg)

    def _available_with_released(self) -> dict[str, float]:
        """Ray's free resources plus those of the groups removed in the last
        ``place_timeout_s``: Ray's view trails a removal, and a gang re-placed right after
        its own group was given back (an elastic resize) must not be refused for it. An
        overestimate only costs a placement group that does not fit within the timeout."""
        avail = self.available()
        cutoff = time.monotonic() - self.place_timeout_s
        with self._lock:
            self._released = [(t, r) for t, r in self._released if t >= cutoff]
            credits = [r for _, r in self._released]
        for resources in credits:
            for k, v in resources.items():
                avail[k] = avail.get(k, 0.0) + v
        return avail

    @staticmethod
    def _on_worker_exit(worker: RayWorker) -> None:
        """Called on the I/O thread once a worker's task has returned: ends its actor.

        Gracefully (``__ray_terminate__``, as Ray ends an actor whose handles are gone):
        ``ray.kill`` would make Ray print a "worker died" error on the user's console."""
        if worker.actor is not None and not worker._killed and (worker.exitcode or 0) >= 0:
            # (an actor that died needs no ending, and a call to it would fail unheard)
            try:
                worker.actor.__ray_terminate__.remote()
            except Exception:  # noqa: BLE001, S110 - already dead, or Ray is shutting down
                pass

    def placement_alive(self, placement: Placement) -> bool:
        """False when a node of the placement died (the gang must be placed anew)."""
        from ray.util.placement_group import placement_group_table

        handle: PGHandle | None = placement.handle
        if handle is None:
            return True
        try:
            table = placement_group_table(handle.pg)
        except Exception:  # noqa: BLE001 - Ray lost it: as good as dead
            return False
        if table.get("state") != "CREATED":
            return False
        b2n = table.get("bundles_to_node_id") or {}
        if any(b2n.get(j) != placement.node_ids[i] for i, j in enumerate(handle.order)):
            return False  # Ray moved bundles after a node died: our node addresses are stale
        alive = {n["NodeID"]: n for n in self._alive_nodes()}
        for node_id in set(placement.node_ids):
            node = alive.get(node_id)
            if node is None:
                return False
            # The GCS notices a dead node only after its health checks time out; its raylet
            # refusing connections is a faster, reliable sign.
            if not reachable(node["NodeManagerAddress"], node.get("NodeManagerPort")):
                return False
        return True

    # -- workers -----------------------------------------------------------------------
    def start_workers(
        self, placement: Placement, specs: Sequence[WorkerSpec], tasks: Sequence[bytes], sink: Sink
    ) -> list[WorkerProcess]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._gpus.learn(placement)
        io = self._io_thread()
        cls = self._actor_class()
        workers: list[WorkerProcess] = []
        for spec, task in zip(specs, tasks):
            i = spec.bundle_index
            env = dict(self.worker_env(placement, i))
            env.update(spec.env)
            objects = dict(getattr(spec, "objects", None) or {})
            worker = RayWorker(io, spec, placement.node_ids[i], placement.node_ips[i], sink, objects)
            worker.placement_id = placement.placement_id
            worker.on_exit = self._on_worker_exit
            io.register(worker)
            # The bundle holds the resources; the actor asks for none and is pinned to the
            # bundle's node, so it survives the group's removal (see the module docstring).
            opts: dict[str, Any] = {
                "num_cpus": 0,
                "num_gpus": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(
                    placement.node_ids[i], soft=False
                ),
                "max_restarts": 0,
                "max_task_retries": 0,
            }
            if self.runtime_env:
                opts["runtime_env"] = self.runtime_env
            run_spec = {
                "worker_id": spec.worker_id,
                "address": io.address,
                "authkey": io.authkey,  # via Ray's task arguments, never argv or env
                "env": env,
                "cwd": spec.cwd or os.getcwd(),
                "sys_path": list(sys.path),
                "argv": list(sys.argv),
            }
            worker.actor = cls.options(**opts).remote()
            worker.ref = worker.actor.run.remote(run_spec, task, objects)
            worker.ref.future().add_done_callback(
                lambda fut, w=worker: io.post(("exit", w, exit_code(w, fut)))
            )
            workers.append(worker)
        return workers

    def worker_env(self, placement: Placement, index: int) -> dict[str, str]:
        bundle = placement.bundles[index]
        threads = max(1, math.floor(bundle.get("CPU", 1.0) + 1e-9))
        handle: PGHandle | None = placement.handle
        devices = handle.devices if handle is not None and handle.devices else None
        return {
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "TANDEM_NUM_THREADS": str(threads),
            "CUDA_VISIBLE_DEVICES": devices[index] if devices else "",
        }

    def _actor_class(self) -> Any:
        if self._actor_cls is None:
            ray = import_ray()
            from tandem.cluster._ray_worker import _TandemWorker

            self._actor_cls = ray.remote(_TandemWorker)
        return self._actor_cls

    def _io_thread(self) -> RayIO:
        with self._io_lock:
            if self._io is None or not self._io.alive:
                ray = import_ray()
                self._io = RayIO(ray.util.get_node_ip_address())
                self._io.start()
            return self._io

    def shutdown(self) -> None:
        """Kills every worker actor, removes every placement group, then disconnects from
        Ray if this cluster object connected. May be used again afterwards (reconnects)."""
        with self._io_lock:
            io, self._io = self._io, None
        if io is not None:
            io.stop()
        with self._lock:
            pgs, self._pgs = list(self._pgs.values()), {}
        if self._demand is not None:
            self._demand.withdraw_all()  # withdraws what the autoscaler was asked for
        for pg in pgs:
            remove_pg(pg)
        if self._owns_ray:
            ray = import_ray()
            if ray.is_initialized():
                ray.shutdown()
            self._owns_ray = False
            self._actor_cls = None
            self._gpus.reset()

