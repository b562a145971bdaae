"""``RayCluster``: gangs placed with Ray placement groups, workers run as Ray actors.

Users provision the Ray cluster (``ray start``, the cluster launcher, KubeRay); tandem only
connects to it. Each job gets one placement group (``PACK`` by default), created when the
job is admitted and removed when it ends, so a pending job holds nothing. Each worker is a
``_TandemWorker`` actor on its bundle's node; it runs the same cloudpickled task a local
worker runs and talks to the driver over a TCP connection (frames from ``_wire``), so
reports reach the controller with the latency of one socket write. The actor's output is
streamed into the worker's log file on the driver.

The placement group is the reservation; the actors themselves ask Ray for no resources and
are pinned to their bundle's node by node affinity. Removing a group would kill the actors
scheduled *in* it; pinned this way they outlive it, so a job can give its resources back
while it keeps running (a tuning trial lending its slot to the train job it waits on), as on
one machine. Each actor is killed as soon as its task returns. GPU bundles learn which
devices Ray assigned them from a short task run in the bundle (``CUDA_VISIBLE_DEVICES``).

Requires ``pip install 'tandem-ml[ray]'`` and tandem installed on every node.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import queue
import secrets
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from tandem._core.errors import ConfigError, ResourcesUnavailableError, TandemError
from tandem.cluster import _wire
from tandem.cluster.base import (
    STANDARD_RESOURCES,
    Bundle,
    Cluster,
    Placement,
    Sink,
    WorkerProcess,
    WorkerSpec,
    _fmt,
)

logger = logging.getLogger(__name__)

_KILLED = -int(signal.SIGKILL)
_HIDDEN_PREFIXES = ("node:", "bundle_group_", "object_store_memory")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise TandemError(
            "The Ray backend needs Ray: pip install 'tandem-ml[ray]' (ray==2.60.0)."
        ) from e
    return ray


def _visible(resources: dict[str, float]) -> dict[str, float]:
    """Ray's resource view without its internal node/bundle bookkeeping resources."""
    return {k: float(v) for k, v in resources.items() if not k.startswith(_HIDDEN_PREFIXES)}


class _PGHandle:
    """What ``Placement.handle`` holds: the placement group, rank -> bundle index order, and
    each slot's ``CUDA_VISIBLE_DEVICES`` (learnt when its workers first start)."""

    __slots__ = ("devices", "order", "pg")

    def __init__(self, pg: Any, order: tuple[int, ...]) -> None:
        self.pg = pg
        self.order = order
        self.devices: tuple[str, ...] | None = None


class RayWorker(_wire.SocketWorker, WorkerProcess):
    """The driver's handle on one ``_TandemWorker`` actor."""

    def __init__(self, io: _RayIO, spec: WorkerSpec, node_id: str, node_ip: str, sink: Sink,
                 objects: Any) -> None:
        self._init_endpoint(spec, node_id, node_ip, sink)
        self._io = io
        self._objects = objects  # keeps Ray handles (dataset iterators) alive with the worker
        self._state: list | None = None
        self._log: Any = None
        self.actor: Any = None
        self.ref: Any = None
        self.placement_id = ""
        self.on_exit: Any = None
        # I/O-thread state
        self._eof_sent = False
        self._exited = False
        self._pending_exit: int | None = None
        self.exitcode: int | None = None

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        if self.actor is not None:
            ray = _import_ray()
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - already dead, or Ray is shutting down
                pass
        self._io.post(("kill", self))

    def _write_log(self, data: bytes) -> None:
        try:
            if self._log is None:
                self._log = open(self.log_path, "ab", buffering=0)  # noqa: SIM115
            self._log.write(data)
        except OSError:
            pass

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
            self._log = None


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
        ray = _import_ray()
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=address or "auto", namespace=namespace, log_to_driver=False,
                         logging_level=logging.WARNING)
            except ConnectionError as e:
                raise ConfigError(
                    f"tandem could not connect to a Ray cluster at ray_address={address!r}: "
                    f"{e}. Start one first (`ray start --head`, the Ray cluster launcher or "
                    f"KubeRay) and pass its address, e.g. 'auto' on a node of the cluster or "
                    f"'HEAD_IP:6379'."
                ) from e
            self._owns_ray = True
        else:
            _warn_if_other_cluster(ray, address)
        self.address = address
        self.runtime_env = runtime_env
        self.autoscaling = autoscaling
        self.poll_interval_s = poll_interval_s
        self.place_timeout_s = place_timeout_s
        self._lock = threading.Lock()
        self._pgs: dict[str, Any] = {}
        self._ids = itertools.count()
        self._uid = secrets.token_hex(3)
        self._io: _RayIO | None = None
        self._io_lock = threading.Lock()
        self._actor_cls: Any = None
        self._probe: Any = None  # the remote function that reads a GPU bundle's devices
        self._node_ips: dict[str, str] = {}
        # autoscaling: gangs that did not fit, by the id of their bundle tuple (the job's),
        # with when they last asked; what Ray's autoscaler was last asked for
        self._demand: dict[int, tuple[float, list[dict[str, float]]]] = {}
        self._demand_sent: list[dict[str, float]] = []
        self._demand_thread: threading.Thread | None = None
        self._send_lock = threading.Lock()

    # -- resources ---------------------------------------------------------------------
    def resources(self) -> dict[str, float]:
        return _visible(_import_ray().cluster_resources())

    def available(self) -> dict[str, float]:
        return _visible(_import_ray().available_resources())

    def _alive_nodes(self) -> list[dict]:
        nodes = [n for n in _import_ray().nodes() if n.get("Alive")]
        for n in nodes:
            self._node_ips[n["NodeID"]] = n["NodeManagerAddress"]
        return nodes

    def check_feasible(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> None:
        if self.autoscaling:
            return
        super().check_feasible(bundles, strategy)

    def _check_bundle_shapes(self, bundles: Sequence[Bundle], strategy: str) -> None:
        nodes = [_visible(n.get("Resources") or {}) for n in self._alive_nodes()]

        def fits(bundle: Bundle, node: dict[str, float]) -> bool:
            return all(node.get(k, 0.0) + 1e-9 >= v for k, v in bundle.items())

        def show(node: dict[str, float]) -> str:
            return ", ".join(f"{k}={_fmt(v)}" for k, v in node.items()
                             if k in STANDARD_RESOURCES or not k.startswith("accelerator"))

        for b in bundles:
            if not any(fits(b, n) for n in nodes):
                shape = ", ".join(f"{k}={_fmt(v)}" for k, v in b.items())
                largest = "; ".join(show(n) for n in nodes) or "no alive node"
                raise ResourcesUnavailableError(
                    f"A worker asks for {{{shape}}}, but no single node of the Ray cluster has "
                    f"that much (a worker runs on one node). Nodes: {largest}. Ask for less "
                    f"per worker (ScalingConfig(resources_per_worker=...)), or add bigger "
                    f"nodes; on an autoscaling cluster use RayCluster(autoscaling=True)."
                )
        if strategy == "STRICT_SPREAD" and len(bundles) > 1:
            usable = sum(1 for n in nodes if fits(bundles[0], n))
            if usable < len(bundles):
                raise ResourcesUnavailableError(
                    f"placement_strategy='STRICT_SPREAD' puts each of the {len(bundles)} "
                    f"workers on its own node, but only {usable} node(s) of the Ray cluster "
                    f"can hold one. Use 'SPREAD' or 'PACK', or fewer workers."
                )
        if strategy == "STRICT_PACK":
            need: dict[str, float] = {}
            for b in bundles:
                for k, v in b.items():
                    need[k] = need.get(k, 0.0) + v
            if not any(fits(need, n) for n in nodes):
                raise ResourcesUnavailableError(
                    f"placement_strategy='STRICT_PACK' puts all {len(bundles)} workers on one "
                    f"node, but no node of the Ray cluster has "
                    f"{', '.join(f'{k}={_fmt(v)}' for k, v in need.items())}. Use 'PACK' to "
                    f"let the gang span nodes."
                )

    # -- placement ---------------------------------------------------------------------
    def place(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> Placement | None:
        _import_ray()
        from ray.util.placement_group import placement_group, placement_group_table

        ray_bundles = [_ray_bundle(b) for b in bundles]
        need: dict[str, float] = {}
        for b in ray_bundles:
            for k, v in b.items():
                need[k] = need.get(k, 0.0) + v
        avail = self.available()
        if any(avail.get(k, 0.0) + 1e-9 < v for k, v in need.items()):
            self._wants(bundles, ray_bundles)
            return None  # cannot fit now: hold nothing
        name = f"tandem_{self._uid}_{next(self._ids)}"
        pg = placement_group(ray_bundles, strategy=strategy, name=name)
        if not pg.wait(timeout_seconds=self.place_timeout_s):
            _remove_pg(pg)  # Ray's view moved on (or fragmentation): try again later
            self._wants(bundles, ray_bundles)
            return None
        self._wants(bundles, None)
        table = placement_group_table(pg)
        b2n = table.get("bundles_to_node_id") or {}
        node_of = [b2n.get(i, "") for i in range(len(bundles))]
        ips = self._node_ips
        if any(n not in ips for n in node_of):
            self._alive_nodes()
        order = _group_by_node(node_of, bundles)
        pid = pg.id.hex()
        with self._lock:
            self._pgs[pid] = pg
        return Placement(
            placement_id=pid,
            bundles=tuple(dict(bundles[i]) for i in order),
            node_ids=tuple(node_of[i] for i in order),
            node_ips=tuple(ips.get(node_of[i], "") for i in order),
            gpu_ids=tuple(() for _ in order),  # Ray's device ids: see _learn_devices
            strategy=strategy,
            handle=_PGHandle(pg, order),
        )

    # -- autoscaling -------------------------------------------------------------------
    def _wants(self, bundles: Sequence[Bundle], ray_bundles: list[dict] | None) -> None:
        """Records (or, with None, clears) the demand of a gang that did not fit, and tells
        Ray's autoscaler. A job asks again at every scheduling round while it waits; one
        that stopped asking (placed, cancelled) is dropped after ``_DEMAND_TTL_S``."""
        if not self.autoscaling:
            return
        with self._lock:
            if ray_bundles is None:
                if self._demand.pop(id(bundles), None) is None:
                    return
            else:
                self._demand[id(bundles)] = (time.monotonic(), ray_bundles)
                if self._demand_thread is None:
                    self._demand_thread = threading.Thread(
                        target=self._expire_demand, name="tandem-ray-demand", daemon=True)
                    self._demand_thread.start()
        self._send_demand()

    _DEMAND_TTL_S = 5.0

    def _send_demand(self) -> None:
        with self._send_lock:  # one request at a time: the last one sent is the latest
            with self._lock:
                cutoff = time.monotonic() - max(self._DEMAND_TTL_S, 4 * self.poll_interval_s)
                for key in [k for k, (t, _) in self._demand.items() if t < cutoff]:
                    del self._demand[key]
                wanted = [b for _, bs in self._demand.values() for b in bs]
                if wanted == self._demand_sent:
                    return
                self._demand_sent = wanted
            try:
                from ray.autoscaler.sdk import request_resources

                request_resources(bundles=wanted)
            except Exception as e:  # noqa: BLE001 - a hint to the autoscaler, never fatal
                logger.warning("could not ask Ray's autoscaler for %s: %s", wanted, e)

    def _expire_demand(self) -> None:
        while True:
            time.sleep(1.0)
            self._send_demand()
            with self._lock:
                if not self._demand and not self._demand_sent:
                    self._demand_thread = None
                    return

    def release(self, placement: Placement) -> None:
        """Removes the placement group. Workers still running keep running (they are not
        scheduled in the group): a job lending its resources to a nested job goes on."""
        with self._lock:
            pg = self._pgs.pop(placement.placement_id, None)
        if pg is not None:
            _remove_pg(pg)

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

        handle: _PGHandle | None = placement.handle
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
            if not _reachable(node["NodeManagerAddress"], node.get("NodeManagerPort")):
                return False
        return True

    # -- workers -----------------------------------------------------------------------
    def start_workers(
        self, placement: Placement, specs: Sequence[WorkerSpec], tasks: Sequence[bytes], sink: Sink
    ) -> list[WorkerProcess]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._learn_devices(placement)
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
                "token": io.token,
                "env": env,
                "cwd": spec.cwd or os.getcwd(),
                "sys_path": list(sys.path),
                "argv": list(sys.argv),
            }
            worker.actor = cls.options(**opts).remote()
            worker.ref = worker.actor.run.remote(run_spec, task, objects)
            worker.ref.future().add_done_callback(
                lambda fut, w=worker: io.post(("exit", w, _exit_code(w, fut)))
            )
            workers.append(worker)
        return workers

    def worker_env(self, placement: Placement, index: int) -> dict[str, str]:
        bundle = placement.bundles[index]
        threads = max(1, int(math.floor(bundle.get("CPU", 1.0) + 1e-9)))
        handle: _PGHandle | None = placement.handle
        devices = handle.devices if handle is not None and handle.devices else None
        return {
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "TANDEM_NUM_THREADS": str(threads),
            "CUDA_VISIBLE_DEVICES": devices[index] if devices else "",
        }

    def _learn_devices(self, placement: Placement) -> None:
        """Asks Ray which GPUs it gave each GPU bundle: a task taking the bundle's GPUs
        reports the ``CUDA_VISIBLE_DEVICES`` Ray set for it (Ray fixes a bundle's device
        instances when it reserves the group)."""
        handle: _PGHandle | None = placement.handle
        if handle is None or handle.devices is not None:
            return
        if not any(b.get("GPU") for b in placement.bundles):
            handle.devices = ()
            return
        ray = _import_ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self._probe is None:
            self._probe = ray.remote(_visible_devices)
        probe = self._probe
        refs = {
            i: probe.options(
                num_cpus=0, num_gpus=b["GPU"],
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    handle.pg, placement_group_bundle_index=handle.order[i]),
            ).remote()
            for i, b in enumerate(placement.bundles) if b.get("GPU")
        }
        found = dict(zip(refs, ray.get(list(refs.values()), timeout=60)))
        handle.devices = tuple(found.get(i, "") for i in range(len(placement.bundles)))

    def _actor_class(self) -> Any:
        if self._actor_cls is None:
            ray = _import_ray()
            from tandem.cluster._ray_worker import _TandemWorker

            self._actor_cls = ray.remote(_TandemWorker)
        return self._actor_cls

    def _io_thread(self) -> _RayIO:
        with self._io_lock:
            if self._io is None or not self._io.alive:
                ray = _import_ray()
                self._io = _RayIO(ray.util.get_node_ip_address())
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
            self._demand.clear()
        self._send_demand()  # withdraws what the autoscaler was asked for
        for pg in pgs:
            _remove_pg(pg)
        if self._owns_ray:
            ray = _import_ray()
            if ray.is_initialized():
                ray.shutdown()
            self._owns_ray = False
            self._actor_cls = None
            self._probe = None


def _ray_bundle(bundle: Bundle) -> dict[str, float]:
    out = {k: float(v) for k, v in bundle.items() if v}
    return out or {"CPU": 0.01}  # Ray refuses empty bundles


def _group_by_node(node_of: list[str], bundles: Sequence[Bundle]) -> tuple[int, ...]:
    """Rank order over bundle indices: ranks on one node are contiguous, nodes in order of
    their first bundle. Only identical bundles are reordered (a rank keeps its shape)."""
    if any(dict(b) != dict(bundles[0]) for b in bundles):
        return tuple(range(len(bundles)))
    first: dict[str, int] = {}
    for i, n in enumerate(node_of):
        first.setdefault(n, i)
    return tuple(sorted(range(len(node_of)), key=lambda i: (first[node_of[i]], i)))


def _warn_if_other_cluster(ray: Any, address: str | None) -> None:
    """This process is already connected to Ray: say so if ``address`` names another one."""
    if not address or address == "auto" or address.startswith("ray://"):
        return
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - an older or client-mode connection: nothing to compare
        return
    if not current or _same_endpoint(ray, current, address):
        return
    logger.warning(
        "tandem uses this process's Ray connection (cluster at %s), not "
        "ray_address=%r: a process talks to one Ray cluster. To use %s, call "
        "ray.shutdown() first or run the script in a fresh process.",
        current, address, address)


def _same_endpoint(ray: Any, a: str, b: str) -> bool:
    """Whether two ``host:port`` addresses name the same server (names resolved; loopback
    counts as this node's address)."""
    def norm(addr: str) -> tuple[str, str]:
        host, _, port = addr.rpartition(":")
        try:
            ip = socket.gethostbyname(host.strip("[]"))
        except OSError:
            ip = host
        if ip.startswith("127.") or ip in ("0.0.0.0", "::1", "localhost"):
            ip = ray.util.get_node_ip_address()
        return ip, port

    return norm(a) == norm(b)


def _visible_devices() -> str:
    """Runs as a Ray task inside a GPU bundle: the devices Ray gave it."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def _remove_pg(pg: Any) -> None:
    from ray.util.placement_group import remove_placement_group

    try:
        remove_placement_group(pg)
    except Exception:  # noqa: BLE001, S110 - already removed, or Ray is gone
        pass


def _reachable(host: str, port: Any, timeout_s: float = 1.0) -> bool:
    if not port:
        return True
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def _exit_code(worker: RayWorker, fut: Any) -> int:
    """The worker's exit status from its run() call: its return value, 1 if the actor raised,
    SIGKILL's number (negative) if the actor died (killed, or its node was lost)."""
    try:
        return int(fut.result())
    except Exception as e:  # noqa: BLE001
        ray = _import_ray()
        died = isinstance(e, ray.exceptions.RayActorError)
        if not worker._killed:
            what = "died" if died else "failed"
            worker._io.post(("log", worker, f"\ntandem: the Ray actor of worker {worker.worker_id} "
                                            f"{what}: {type(e).__name__}: {e}\n".encode()))
        return _KILLED if died else 1


class _RayIO(threading.Thread):
    """Owns the TCP listener the worker actors connect to and every worker connection.

    Delivers each worker's frames to its sink in order, then ``("__eof__",)`` and
    ``("__exit__", code)`` exactly once each; ``("__log__", bytes)`` frames are written to
    the worker's log file instead.
    """

    _EXIT_GRACE_S = 2.0  # after the actor's run() ended, how long to wait for its bytes

    def __init__(self, host: str) -> None:
        super().__init__(name="tandem-ray-io", daemon=True)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.bind((host, 0))
        self._listener.listen(1024)
        self._listener.setblocking(False)
        self.address = (host, self._listener.getsockname()[1])
        self.token = secrets.token_hex(16)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, ("listen", None))
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._by_id: dict[str, RayWorker] = {}
        self._timers: dict[RayWorker, float] = {}
        self._stopping = False
        self.alive = True

    # -- other threads -----------------------------------------------------------------
    def register(self, worker: RayWorker) -> None:
        self.post(("register", worker))

    def post(self, cmd: tuple) -> None:
        self._cmds.put(cmd)
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def stop(self) -> None:
        workers = list(self._by_id.values())
        for w in workers:
            w.kill()
        self._stopping = True
        self.post(("stop",))
        self.join(timeout=5)

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._stopping:
                timeout = 1.0
                if self._timers:
                    timeout = max(0.0, min(1.0, min(self._timers.values()) - time.monotonic()))
                for key, _ in self._sel.select(timeout=timeout):
                    kind, data = key.data
                    if kind == "listen":
                        self._accept()
                    elif kind == "conn":
                        self._read_conn(key.fileobj, data)  # type: ignore[arg-type]
                    elif kind == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                self._run_commands()
                now = time.monotonic()
                for w, deadline in list(self._timers.items()):
                    if deadline <= now:
                        self._close_conn(w)
        except Exception:
            logger.exception("tandem Ray I/O thread failed")
        finally:
            self.alive = False
            for w in list(self._by_id.values()):
                self._close_conn(w)
                self._exit(w, _KILLED)
            for key in list(self._sel.get_map().values()):
                try:
                    key.fileobj.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self._sel.close()

    def _run_commands(self) -> None:
        while True:
            try:
                cmd = self._cmds.get_nowait()
            except queue.Empty:
                return
            kind, *args = cmd
            if kind == "register":
                w = args[0]
                self._by_id[w.worker_id] = w
            elif kind == "exit":
                w, code = args
                if w._killed:
                    code = _KILLED
                if w._exited or w._pending_exit is not None:
                    continue
                if w._eof_sent:
                    self._exit(w, code)
                else:
                    # Its last bytes (or even its hello) may still be on the way: wait for
                    # its EOF, a little while at most.
                    w._pending_exit = code
                    self._timers[w] = time.monotonic() + self._EXIT_GRACE_S
            elif kind == "kill":
                w = args[0]
                self._drain(w)
                self._close_conn(w)
                self._exit(w, _KILLED)
            elif kind == "log":
                args[0]._write_log(args[1])

    def _accept(self) -> None:
        _wire.accept_all(self._listener, self._sel, tcp_nodelay=True)

    def _read_conn(self, conn: socket.socket, state: list) -> None:
        reader, worker = state
        data = _wire.recv_some(conn)
        if data is None:
            return
        if not data:
            self._drop(conn)
            if worker is not None:
                self._close_conn(worker)
            return
        try:
            frames = reader.feed(data)
        except Exception:  # noqa: BLE001 - not one of ours
            self._drop(conn)
            return
        for frame in frames:
            if worker is None:
                ok = isinstance(frame, tuple) and len(frame) == 4 and frame[0] == "hello"
                w = self._by_id.get(frame[1]) if ok else None
                if w is None or frame[3] != self.token or w._eof_sent or w._conn is not None:
                    self._drop(conn)
                    return
                worker = state[1] = w
                w._conn = conn
                w._state = state
                w._pid = frame[2]
                w._deliver(("__connected__", frame[2]))
            elif frame[0] == "__log__":
                worker._write_log(frame[1])
            else:
                worker._deliver(frame)

    def _drain(self, w: RayWorker) -> None:
        """Reads what a worker already sent before its connection is cut (kill)."""
        conn, state = w._conn, w._state
        if conn is None or state is None:
            return
        for _ in range(64):
            if w._conn is None:
                return
            try:
                ready = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                ready = b""
            if not ready:
                return  # EOF: _close_conn follows
            self._read_conn(conn, state)

    def _drop(self, conn: socket.socket) -> None:
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _close_conn(self, w: RayWorker) -> None:
        """The worker's connection is over: deliver its EOF (and a pending exit)."""
        conn, w._conn = w._conn, None
        if conn is not None:
            self._drop(conn)
        if not w._eof_sent:
            w._eof_sent = True
            w._deliver(("__eof__",))
        if w._pending_exit is not None:
            self._exit(w, w._pending_exit)

    def _exit(self, w: RayWorker, code: int) -> None:
        self._timers.pop(w, None)
        w._pending_exit = None
        if w._exited:
            return
        w._exited = True
        w.exitcode = code
        w._close_log()
        self._by_id.pop(w.worker_id, None)
        w._deliver(("__exit__", code))
        if w.on_exit is not None:
            try:
                w.on_exit(w)
            except Exception:
                logger.exception("ending a worker's Ray actor failed")
