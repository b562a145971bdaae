"""``LocalCluster``: worker processes on this machine, forked from a warm zygote.

Resources are logical, as in Ray: the cluster counts CPUs, GPUs and memory (detected, or
declared with ``tandem.init(num_cpus=...)``) plus custom resources, and reserves them per
gang. Each worker gets ``CUDA_VISIBLE_DEVICES`` for its GPUs and a thread count that
follows its CPU share, so two workers do not fight over cores.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import math
import os
import queue
import re
import select
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import Any, TypeAlias

from tandem._core.errors import ResourcesUnavailableError, TandemError
from tandem.cluster import _wire, warm_host
from tandem.cluster._pool import WarmPoolConfig, WarmPoolPolicy
from tandem.cluster.base import (
    CLEAN_REUSE_PREFIX,
    Bundle,
    Cluster,
    Placement,
    Sink,
    WorkerProcess,
    WorkerSpec,
    _fmt,
)

logger = logging.getLogger(__name__)

#: Most modules the zygote imports because jobs did (``_IOThread.learn``).
MAX_LEARNED_MODULES = 20_000

NODE_ID = "local"
NODE_IP = "127.0.0.1"


def detect_gpus() -> list[int]:
    """GPU indices visible to this process, without importing torch or CUDA."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return list(range(len(ids)))
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"nvidia(\d+)", n)))


def _visible_device_names() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in detect_gpus()]
    return [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]


class LocalWorker(_wire.SocketWorker, WorkerProcess):
    def __init__(self, cluster: LocalCluster, spec: WorkerSpec, task: bytes, sink: Sink) -> None:
        self._init_endpoint(spec, NODE_ID, NODE_IP, sink)
        self._cluster = cluster
        self._task = task
        self._connected = False
        self.exitcode: int | None = None
        self.reuse_key = spec.reuse_key
        self.modules = frozenset(spec.preload)

    def kill(self) -> None:
        with self._send_lock:
            if self._killed:
                return
            self._killed = True
        self._cluster._kill(self)


class LocalCluster(Cluster):
    """Processes on this machine.

    Args:
        num_cpus: logical CPUs to schedule (default: this machine's count).
        num_gpus: GPUs to schedule (default: the GPUs visible to this process).
        memory: bytes of memory to schedule (default: this machine's total).
        resources: custom resources, e.g. ``{"accelerator_x": 2}``.
        warm_pool: bounds of the warm workers kept ready (``WarmPoolConfig``; default up to
            4, each gone after 30 s without a job); ``WarmPoolConfig(max_workers=0)`` forks
            every worker when its gang starts. See ``tandem.cluster._pool``.
    """

    def __init__(
        self,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        resources: dict[str, float] | None = None,
        warm_pool: WarmPoolConfig | None = None,
    ) -> None:
        self.warm_pool = warm_pool if warm_pool is not None else WarmPoolConfig()
        gpus = detect_gpus()
        self._gpu_names = _visible_device_names()
        ngpu = len(gpus) if num_gpus is None else int(num_gpus)
        self._total: dict[str, float] = {
            "CPU": float(num_cpus if num_cpus is not None else (os.cpu_count() or 1)),
            "GPU": float(ngpu),
            "memory": float(memory if memory is not None else _total_memory()),
        }
        for key, value in (resources or {}).items():
            self._total[key] = float(value)
        self._avail = dict(self._total)
        self._gpu_free = [1.0] * ngpu  # capacity left on each GPU (fractions allowed)
        self._placements: dict[str, list[list[tuple[int, float]]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._io: _IOThread | None = None
        self._io_lock = threading.Lock()

    # -- resources ---------------------------------------------------------------------
    def resources(self) -> dict[str, float]:
        return dict(self._total)

    def available(self) -> dict[str, float]:
        with self._lock:
            return dict(self._avail)

    def _check_bundle_shapes(self, bundles: Sequence[Bundle], strategy: str) -> None:
        if strategy == "STRICT_SPREAD" and len(bundles) > 1:
            raise ResourcesUnavailableError(
                f"placement_strategy='STRICT_SPREAD' needs {len(bundles)} nodes, but a "
                f"LocalCluster is one node. Use 'PACK' or 'SPREAD', or run on a Ray cluster."
            )
        for b in bundles:
            g = b.get("GPU", 0.0)
            if g > 1 and g > len(self._gpu_free):
                raise ResourcesUnavailableError(
                    f"A worker asks for GPU={_fmt(g)} but this machine has "
                    f"{len(self._gpu_free)} GPU(s)."
                )

    def place(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> Placement | None:
        with self._lock:
            need: dict[str, float] = {}
            for b in bundles:
                for k, v in b.items():
                    need[k] = need.get(k, 0.0) + v
            if any(self._avail.get(k, 0.0) + 1e-9 < v for k, v in need.items()):
                return None
            gpu_free = list(self._gpu_free)
            assignment: list[list[tuple[int, float]]] = []
            for b in bundles:
                got = _assign_gpus(gpu_free, b.get("GPU", 0.0))
                if got is None:
                    return None
                assignment.append(got)
            self._gpu_free = gpu_free
            for k, v in need.items():
                self._avail[k] -= v
            pid = f"pg_{next(self._ids)}"
            self._placements[pid] = assignment
        return Placement(
            placement_id=pid,
            bundles=tuple(dict(b) for b in bundles),
            node_ids=(NODE_ID,) * len(bundles),
            node_ips=(NODE_IP,) * len(bundles),
            gpu_ids=tuple(tuple(i for i, _ in a) for a in assignment),
            strategy=strategy,
        )

    def release(self, placement: Placement) -> None:
        with self._lock:
            assignment = self._placements.pop(placement.placement_id, None)
            if assignment is None:
                return
            for b in placement.bundles:
                for k, v in b.items():
                    self._avail[k] = min(self._total.get(k, 0.0), self._avail.get(k, 0.0) + v)
            for a in assignment:
                for i, amount in a:
                    self._gpu_free[i] = min(1.0, self._gpu_free[i] + amount)

    # -- processes ---------------------------------------------------------------------
    def prewarm(self, preload: Sequence[str] = ()) -> None:
        self._io_thread().preload(tuple(preload))

    def warming(self) -> bool:
        """Whether the worker launcher is still importing what ``prewarm`` asked for."""
        io = self._io
        return io is not None and io.alive and io.preloads_out > 0

    def start_workers(
        self, placement: Placement, specs: Sequence[WorkerSpec], tasks: Sequence[bytes], sink: Sink
    ) -> list[WorkerProcess]:
        io = self._io_thread()
        io.note_demand(len(specs))
        workers: list[WorkerProcess] = []
        for spec, task in zip(specs, tasks):
            env = dict(self.worker_env(placement, spec.bundle_index))
            env.update(spec.env)
            reuse = None
            if spec.reuse_key is not None:  # same job kind and resource shape only
                shape = sorted((k, env.get(k, "")) for k in ("CUDA_VISIBLE_DEVICES",
                                                              "TANDEM_NUM_THREADS"))
                reuse = f"{spec.reuse_key}|{shape}"
            spec = WorkerSpec(
                spec.worker_id, spec.bundle_index, spec.log_path, env, spec.cwd, spec.preload,
                reuse_key=reuse,
            )
            worker = LocalWorker(self, spec, task, sink)
            io.start_worker(worker, spec)
            workers.append(worker)
        io.refill()
        return workers

    def worker_env(self, placement: Placement, index: int) -> dict[str, str]:
        bundle = placement.bundles[index]
        threads = max(1, math.floor(bundle.get("CPU", 1.0) + 1e-9))
        gpus = placement.gpu_ids[index]
        names = [self._gpu_names[i] if i < len(self._gpu_names) else str(i) for i in gpus]
        return {
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "TANDEM_NUM_THREADS": str(threads),
            "CUDA_VISIBLE_DEVICES": ",".join(names),
        }

    def _kill(self, worker: LocalWorker) -> None:
        io = self._io
        if io is not None:
            io.kill(worker)

    def _io_thread(self) -> _IOThread:
        with self._io_lock:
            if self._io is None or not self._io.alive:
                self._io = _IOThread(self.warm_pool)
                self._io.start()
            return self._io

    def live_worker_pids(self) -> list[int]:
        io = self._io
        return io.live_pids() if io is not None else []

    def warm_worker_pids(self) -> list[int]:
        """The warm workers waiting for a job now (``tandem.cluster._pool``)."""
        io = self._io
        return io.warm_pids() if io is not None else []

    def launcher_pss_bytes(self) -> int:
        """Memory held for starting workers fast: the proportional set size (shared pages
        split among the processes sharing them) of the zygote and the idle warm workers.
        0 before the first job; Linux only (0 elsewhere)."""
        io = self._io
        return io.pool_memory()[0] if io is not None else 0

    def warm_pool_info(self) -> dict[str, Any] | None:
        """The warm pool now (``tandem status``, a train server's ``/api/cluster``): its
        memory (``pss_mb``, as measured after its last change) against its bound
        (``max_pss_mb``), the warm workers waiting, how many modules the zygote learned from
        jobs and whether it still learns. None before the first job."""
        io = self._io
        if io is None:
            return None
        if io.pss_bytes == 0:
            io.pss_bytes = io.pool_memory()[0]
        return {**io.info(), "max_workers": self.warm_pool.max_workers}

    def shutdown(self) -> None:
        """Kills every worker and the zygote. The cluster may be used again afterwards."""
        with self._io_lock:
            io, self._io = self._io, None
        if io is not None:
            io.stop()


def _wait_exit(proc: ZygoteProcess, timeout_s: float) -> None:
    """``proc.wait(timeout_s)``, woken the moment the process exits: ``Popen.wait`` with a
    timeout polls, sleeping up to 50 ms between looks, which a program's exit (the zygote's,
    at ``tandem.shutdown()``) would wait out. Linux's ``pidfd_open`` where there is one."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or reaped already
        proc.wait(timeout=timeout_s)
        return
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    proc.wait(timeout=0)  # reaps it; TimeoutExpired if it still runs


def _total_memory() -> int:
    """This machine's memory in bytes, as ``psutil.virtual_memory().total`` gives it (Linux:
    ``MemTotal`` of /proc/meminfo), without importing psutil (issue 25: the cold start)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    return int(psutil.virtual_memory().total)


def _assign_gpus(free: list[float], amount: float) -> list[tuple[int, float]] | None:
    """Picks GPUs for one bundle, mutating ``free``; None if it cannot be satisfied."""
    if amount <= 0:
        return []
    if amount <= 1:
        # Best fit: the fullest GPU that still has room, so fractions pack together.
        candidates = [i for i, f in enumerate(free) if f + 1e-9 >= amount]
        if not candidates:
            return None
        i = min(candidates, key=lambda j: free[j])
        free[i] -= amount
        return [(i, amount)]
    whole = [i for i, f in enumerate(free) if f >= 1 - 1e-9][: int(amount)]
    if len(whole) < int(amount):
        return None
    for i in whole:
        free[i] = 0.0
    return [(i, 1.0) for i in whole]


class _Warm:
    """A warm worker: forked ahead of demand, then connected and waiting for a job."""

    __slots__ = ("conn", "generation", "modules", "pid", "retire_on_hello", "reuse_key", "since",
                 "state", "warm_id")

    def __init__(self, warm_id: str, modules: frozenset[str], reuse_key: str | None = None,
                 generation: int = 0) -> None:
        self.warm_id = warm_id
        # how many rounds of learned imports the zygote had when it forked this one: a gang
        # takes the newest, and a newer one that connects retires an older idle one
        self.generation = generation
        # set: a worker that ran a task of this kind and went back to the pool; it runs
        # only tasks of the same kind (TuneConfig(reuse_actors=True))
        self.reuse_key = reuse_key
        self.modules = modules  # what the zygote had imported when it forked this one
        self.pid: int | None = None
        self.conn: socket.socket | None = None
        self.state: list | None = None
        self.since = 0.0
        self.retire_on_hello = False


# -- a zygote started before its cluster (``start_zygote_early``) ------------------------
_early_lock = threading.Lock()
#: (process, os.environ when it started, the modules it was told to import, how many
#: "preload" messages it was sent: each is answered once, read only after adoption)
_early: tuple[ZygoteProcess, dict[str, str], tuple[str, ...], int] | None = None


#: A zygote: a process this one spawned, or one a warm host forked for it (``_host``).
ZygoteProcess: TypeAlias = "subprocess.Popen[bytes] | warm_host.HostZygote"


def _spawn_zygote() -> ZygoteProcess:
    """A per-driver zygote from a running warm host whose imports are valid for this
    process (``tandem warm start``), else a fresh one of this process's own."""
    host = warm_host.connect()
    if host is not None:
        return host
    return subprocess.Popen(
        [sys.executable, "-m", "tandem.cluster._zygote"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        close_fds=True,
    )


def in_worker_process() -> bool:
    """True in a zygote or a worker process (where no cluster of this process's own starts)."""
    worker_main = sys.modules.get("tandem.cluster._worker_main")
    return bool(getattr(worker_main, "IN_WORKER_PROCESS", False))


#: Seconds a zygote started early waits for its cluster before it is ended (its memory,
#: ~700 MB with torch, given back): ``$TANDEM_EARLY_IDLE_S`` (default 120).
EARLY_IDLE_ENV = "TANDEM_EARLY_IDLE_S"
EARLY_IDLE_S = 120.0


def _early_idle_s() -> float:
    raw = os.environ.get(EARLY_IDLE_ENV, "").strip()
    try:
        value = float(raw) if raw else EARLY_IDLE_S
    except ValueError:
        logger.warning("%s=%r is not a number of seconds; using %g", EARLY_IDLE_ENV, raw,
                       EARLY_IDLE_S)
        return EARLY_IDLE_S
    return value if value > 0 and math.isfinite(value) else EARLY_IDLE_S


def start_zygote_early(preload: Sequence[str], replace: bool = False) -> bool:
    """Starts the zygote that the next ``LocalCluster`` of this process will fork its workers
    from, before that cluster exists, and has it import ``preload`` at once: a heavy import
    (torch: 1-3 s, TensorFlow: 5-20 s) then runs while the program goes on to
    ``tandem.init``, its data and ``fit``. The cluster adopts it when the process
    environment is still the one it started with (else it is killed and a fresh one
    started, so workers never miss a variable). Called again while one waits, it imports
    the modules of ``preload`` it has not imported yet, after the others (``replace=True``:
    a fresh zygote is started instead, for modules that cannot share a process with the
    earlier ones, such as the other Keras). False (nothing started) inside a worker process.
    One never adopted is ended by ``discard_early_zygote`` (``tandem.shutdown``, a job
    service that turns out to be a server or Ray), at exit, and after
    ``$TANDEM_EARLY_IDLE_S`` seconds (default 120) without a cluster adopting it. The
    policy of when to start one is ``tandem.jobs.early.start_early``."""
    global _early
    if in_worker_process():
        return False
    preload = tuple(dict.fromkeys(preload))
    old = None
    with _early_lock:
        if _early is not None and _early[0].poll() is None and not replace:
            proc, env, had, sent = _early
            todo = tuple(m for m in preload if m not in had)
            if not todo:
                return True
            try:
                assert proc.stdin is not None
                proc.stdin.write(_wire.encode(("preload", list(todo))))
                proc.stdin.flush()
            except (OSError, ValueError):
                pass  # it died: started afresh below
            else:
                _early = (proc, env, had + todo, sent + 1)
                logger.debug("the zygote started early also imports %s", todo)
                return True
        if _early is not None and _early[2] == preload and _early[0].poll() is None:
            return True
        old, _early = _early, None
        proc = _spawn_zygote()
        try:
            assert proc.stdin is not None
            proc.stdin.write(_wire.encode(("preload", list(preload))))
            proc.stdin.flush()
        except (OSError, ValueError):
            _end(proc)
            return False
        _early = (proc, dict(os.environ), preload, 1)
        timer = threading.Timer(_early_idle_s(), _end_if_idle, (proc,))
        timer.daemon = True
        timer.name = "tandem-early-zygote-idle"
        timer.start()
    if old is not None:
        _end(old[0])
    logger.debug("started a zygote early, importing %s", preload)
    return True


def _end_if_idle(proc: ZygoteProcess) -> None:
    """The early zygote ``proc`` waited its idle time: ended if no cluster adopted it."""
    global _early
    with _early_lock:
        if _early is None or _early[0] is not proc:
            return  # adopted, replaced or discarded meanwhile
        _early = None
    logger.debug("ending the zygote started early: no cluster used it within %g s",
                 _early_idle_s())
    _end(proc)


def early_zygote_pid() -> int | None:
    """The pid of the zygote started early and not adopted yet, or None."""
    with _early_lock:
        return _early[0].pid if _early is not None else None


def early_zygote_modules() -> tuple[str, ...] | None:
    """What the zygote started early (and not adopted yet) was told to import, or None."""
    with _early_lock:
        return _early[2] if _early is not None else None


def discard_early_zygote() -> None:
    """Ends the zygote ``start_zygote_early`` started, if no cluster adopted it."""
    global _early
    with _early_lock:
        early, _early = _early, None
    if early is not None:
        _end(early[0])


def _adopt_early_zygote() -> tuple[ZygoteProcess, tuple[str, ...], int] | None:
    """The zygote started early, if it is still usable: (process, what it was told to
    import, how many "preload" messages it was sent; none of their answers was read yet)."""
    global _early
    with _early_lock:
        early, _early = _early, None
    if early is None:
        return None
    proc, env, preload, sent = early
    if proc.poll() is not None or env != dict(os.environ):
        logger.debug("not using the zygote started early: %s", "it exited" if
                     proc.poll() is not None else "the environment changed since")
        _end(proc)
        return None
    return proc, preload, sent


def _end(proc: ZygoteProcess) -> None:
    try:
        proc.kill()
    except OSError:
        pass
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    try:
        _wait_exit(proc, 10.0)
    except subprocess.TimeoutExpired:
        pass


atexit.register(discard_early_zygote)


class _IOThread(_wire.IOThread):
    """Owns the zygote, the workers' listening socket, every worker connection and the warm
    workers (``tandem.cluster._pool``).

    Warm workers are handed to gangs on the job threads (``start_worker``) while the I/O
    thread reads their connections; ``_pool_lock`` guards every move of a warm worker
    (pending -> idle -> assigned or retired) and the worker maps, so the I/O thread sees a
    connection either as an idle warm worker or as the job's worker, never half-moved.
    """

    def __init__(self, warm_pool: WarmPoolConfig | None = None) -> None:
        self._dir = tempfile.mkdtemp(prefix="tandem-")
        os.chmod(self._dir, 0o700)
        self.address = os.path.join(self._dir, "workers.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(256)
        super().__init__("tandem-cluster-io", listener)
        early = _adopt_early_zygote()
        self._zygote = early[0] if early is not None else _spawn_zygote()
        assert self._zygote.stdout is not None and self._zygote.stdin is not None
        os.set_blocking(self._zygote.stdout.fileno(), False)
        self._sel.register(self._zygote.stdout, selectors.EVENT_READ, ("zygote", _wire.FrameReader()))
        self._zin_lock = threading.Lock()
        self._tokens = itertools.count()
        self._by_token: dict[int, LocalWorker] = {}
        self._by_pid: dict[int, LocalWorker] = {}
        self._by_id: dict[str, LocalWorker] = {}
        self._preloaded: set[str] = set(early[1]) if early is not None else set()
        self._preload_done: dict[tuple[str, ...], threading.Event] = {}
        # "preload" messages the zygote has not answered yet: an adopted early zygote's
        # too (their "preloaded" answers come first, and must not count as ours)
        self.preloads_out = early[2] if early is not None else 0
        self._policy = WarmPoolPolicy(warm_pool or WarmPoolConfig())
        self._pool_lock = threading.Lock()
        self._warm_ids = itertools.count()
        self._warm_by_token: dict[int, _Warm] = {}
        self._warm_pending: dict[str, _Warm] = {}  # forked, not yet connected
        self._warm_idle: dict[str, _Warm] = {}  # connected, waiting for a job
        self._warm_by_pid: dict[int, _Warm] = {}
        self._generation = 0  # rounds of learned imports sent to the zygote
        self._learning = True  # off once a learned import started a thread in the zygote
        # the pool thread's work: modules to learn, [] to refill after a round was learned
        self._learn_queue: queue.SimpleQueue[list[str] | None] = queue.SimpleQueue()
        self._max_pss = (warm_pool or WarmPoolConfig()).max_pss_mb * 2**20
        self._warm_cap: int | None = None  # most warm workers the memory bound leaves room for
        self._mem_dirty = threading.Event()  # the pool's memory changed: measure it again
        self.pss_bytes = 0  # the pool's memory when last measured (launcher_pss_bytes)
        self._learner = threading.Thread(target=self._learn_loop, daemon=True,
                                         name="tandem-pool")
        self._learner.start()
        self._eof_pids: dict[int, float] = {}  # connection closed: watch for its death
        self.learned: list[str] = []
        self.learn_outstanding = 0  # names sent to the zygote that it has not done yet  # modules the zygote imported because jobs did
        self.warm_used = 0  # gang workers that started warm (for tests and benchmarks)
        self.reused = 0  # workers that went back to the pool after a task (reuse_actors)

    # -- called from other threads ------------------------------------------------------
    def _to_zygote(self, msg: object) -> None:
        data = _wire.encode(msg)
        with self._zin_lock:
            try:
                assert self._zygote.stdin is not None
                self._zygote.stdin.write(data)
                self._zygote.stdin.flush()
            except (BrokenPipeError, OSError, ValueError) as e:
                raise TandemError(
                    "The local worker launcher (zygote process) is gone; "
                    "call tandem.shutdown() and try again."
                ) from e

    def preload(self, modules: tuple[str, ...]) -> None:
        """Asks the zygote to import ``modules`` (non-blocking; forks queue behind it)."""
        todo = tuple(m for m in modules if m not in self._preloaded)
        if todo:
            with self._pool_lock:
                self._preloaded.update(todo)
                self._generation += 1
                stale = list(self._warm_idle.values())
                self._warm_idle.clear()
                for w in self._warm_pending.values():
                    w.retire_on_hello = True  # forked before these imports: not wanted now
            with self._pool_lock:
                self.preloads_out += 1
            self._to_zygote(("preload", list(todo)))
            for w in stale:
                self._retire(w)

    def learn(self, names: list[str]) -> None:
        """Modules a worker imported (``_worker_main.ImportLearner``): the zygote imports
        them and the warm workers forked from then on start with them (the idle ones stay
        usable until newer ones are ready). Called on the I/O thread, so the zygote is told
        from a helper thread: a write to its stdin must never wait on the I/O thread."""
        if not self._learning or self._stopping:
            return
        with self._pool_lock:
            todo = [n for n in dict.fromkeys(names) if n not in self._preloaded]
            if not todo or len(self._preloaded) + len(todo) > MAX_LEARNED_MODULES:
                return
            self._preloaded.update(todo)
            self.learned.extend(todo)
        logger.debug("learning %d modules (round %d): %s ...", len(todo), self._generation,
                     todo[:5])
        self._learn_queue.put(todo)

    def _learn_loop(self) -> None:
        """The pool's helper thread: tells the zygote what to learn, and keeps the pool's
        memory under ``WarmPoolConfig.max_pss_mb`` (measured after it changed, at most
        every 2 s: one measurement reads each process's smaps, ~20 ms for a torch one)."""
        while True:
            try:
                todo: list[str] | None = self._learn_queue.get(timeout=2.0)
            except queue.Empty:
                todo = None if self._stopping else ["__idle__"]
            if todo is None or self._stopping:
                return
            try:
                if todo == []:  # the zygote learned a round: warm workers with it
                    self.refill()
                elif todo != ["__idle__"]:
                    if self.pss_bytes > self._max_pss:
                        continue  # the bound is reached: learn no more
                    with self._pool_lock:
                        self.learn_outstanding += len(todo)
                    self._to_zygote(("learn", todo))
                elif self._mem_dirty.is_set():
                    self._mem_dirty.clear()
                    self.enforce_memory_bound()
            except TandemError:
                return

    def pool_memory(self) -> tuple[int, int, int]:
        """(PSS of the zygote and the idle warm workers together, the warm workers' own
        memory (USS) together, how many warm workers): Linux only, zeros elsewhere."""
        import psutil  # here, not at import: 20 ms of a fresh program's start (issue 25)

        total = own = 0
        warm = self.warm_pids()
        for pid in [self._zygote.pid, *warm]:
            try:
                info = psutil.Process(pid).memory_full_info()
            except psutil.Error:
                continue
            total += int(getattr(info, "pss", 0))
            if pid != self._zygote.pid:
                own += int(getattr(info, "uss", 0))
        return total, own, len(warm)

    def enforce_memory_bound(self) -> None:
        """Measures the pool; past the bound, stops learning imports and lets idle warm
        workers go until the zygote and those left fit (fewer are forked from then on)."""
        total, own, n = self.pool_memory()
        self.pss_bytes = total
        per_warm = own / n if n else 8 * 2**20
        room = self._max_pss - (total - own)  # what the zygote's share leaves
        cap = max(0, int(room // max(per_warm, 1)))
        with self._pool_lock:
            self._warm_cap = cap if total > self._max_pss or self._warm_cap is not None else None
            extra = [w for w in self._warm_idle.values() if w.reuse_key is None]
            extra = extra[:max(0, len(extra) - cap)] if total > self._max_pss else []
            for w in extra:
                del self._warm_idle[w.warm_id]
        if total > self._max_pss and self._learning:
            self._learning = False
            logger.warning(
                "the warm pool holds %.0f MiB (bound %.0f MiB, WarmPoolConfig(max_pss_mb) / "
                "$TANDEM_WARM_POOL_MB): it learns no more imports and keeps %d warm "
                "worker(s)", total / 2**20, self._max_pss / 2**20, cap)
        for w in extra:
            self._retire(w)

    def info(self) -> dict[str, Any]:
        with self._pool_lock:
            idle = len(self._warm_idle)
        return {"pss_mb": round(self.pss_bytes / 2**20, 1),
                "max_pss_mb": round(self._max_pss / 2**20, 1),
                "warm_workers": idle, "learned_modules": len(self.learned),
                "learning": self._learning}

    def note_demand(self, num_workers: int) -> None:
        with self._pool_lock:
            self._policy.on_start(num_workers)

    def start_worker(self, worker: LocalWorker, spec: WorkerSpec) -> None:
        self.preload(spec.preload)
        job = {
            "worker_id": worker.worker_id,
            "log_path": spec.log_path,
            "env": dict(spec.env),
            "cwd": spec.cwd or os.getcwd(),
            "sys_path": list(sys.path),
            "argv": list(sys.argv),
            "reuse": False if spec.reuse_key is None else (
                "clean" if spec.reuse_key.startswith(CLEAN_REUSE_PREFIX) else True),
        }
        with self._pool_lock:
            warm = self._take_warm(frozenset(spec.preload), spec.reuse_key)
            if warm is not None:
                # From here on the I/O thread delivers this connection's frames to the worker.
                assert warm.pid is not None and warm.state is not None
                worker._pid = warm.pid
                worker._conn = warm.conn
                worker._connected = True
                warm.state[1] = worker
                self._by_id[worker.worker_id] = worker
                self._by_pid[warm.pid] = worker
                self.warm_used += 1
        if warm is not None:
            logger.debug("%s starts on warm worker %s (round %d of learned imports)",
                         worker.worker_id, warm.warm_id, warm.generation)
            worker._deliver(("__connected__", warm.pid))
            task, worker._task = worker._task, b""
            worker.send(("assign", job, task))
            if worker._killed:
                _killpg(warm.pid)  # type: ignore[arg-type]
            return
        token = next(self._tokens)
        self._by_token[token] = worker
        self._by_id[worker.worker_id] = worker
        self._to_zygote(
            (
                "fork",
                token,
                {
                    **job,
                    "address": self.address,
                    "authkey": self.authkey,  # through the zygote's stdin pipe only
                },
            )
        )

    # -- warm workers (tandem.cluster._pool) ----------------------------------------------
    def _take_warm(self, preload: frozenset[str], reuse_key: str | None = None) -> _Warm | None:
        """An idle warm worker with every module of ``preload`` imported (under the lock):
        one that ran a task of kind ``reuse_key`` first, else a fresh one; a reused worker
        runs only tasks of its own kind."""
        fresh = None
        newest = -1
        for warm_id, w in self._warm_idle.items():
            if not preload <= w.modules:
                continue
            if reuse_key is not None and w.reuse_key == reuse_key:
                fresh = warm_id
                break
            if w.reuse_key is None and w.generation > newest:
                fresh, newest = warm_id, w.generation
        if fresh is None:
            return None
        w = self._warm_idle.pop(fresh)
        if w.pid is not None:
            self._warm_by_pid.pop(w.pid, None)
        return w

    def refill(self) -> None:
        """Forks warm workers up to the policy's target (they connect on their own)."""
        with self._pool_lock:
            gen = self._generation
            have = sum(1 for w in [*self._warm_idle.values(), *self._warm_pending.values()]
                       if w.generation == gen and w.reuse_key is None)
            target = self._policy.target()
            if self._warm_cap is not None:
                target = min(target, self._warm_cap)
            want = target - have
            modules = frozenset(self._preloaded)
            new = []
            for _ in range(max(0, want)):
                w = _Warm(f"warm-{next(self._warm_ids)}", modules, generation=gen)
                token = next(self._tokens)
                self._warm_pending[w.warm_id] = w
                self._warm_by_token[token] = w
                new.append((token, w))
        for token, w in new:
            self._to_zygote(("fork", token, {"warm_id": w.warm_id, "address": self.address,
                                             "authkey": self.authkey}))

    def _retire(self, w: _Warm) -> None:
        """Tells an idle warm worker to exit (it was taken out of the pool already)."""
        if w.conn is not None:
            _wire.send_frame(w.conn, threading.Lock(), ("retire",))

    def warm_pids(self) -> list[int]:
        with self._pool_lock:
            return [w.pid for w in self._warm_idle.values() if w.pid is not None]

    def _select_timeout(self) -> float:
        return 0.02 if self._eof_pids else 1.0

    def _reap_zombies(self) -> None:
        """A worker whose connection closed: once it is dead (a zombie its parent, the
        zygote, has not reaped yet) its job hears ``__exit__`` with the status Linux keeps
        for the zombie, not only when the zygote gets to it; the zygote may be busy
        importing for seconds (``learn``), and a crashed gang must not wait for that."""
        now = self._policy.now()
        for pid, deadline in list(self._eof_pids.items()):
            code = _zombie_exitcode(pid)
            if code is not None:
                self._exited(pid, code)
            if code is not None or now > deadline or pid not in self._by_pid:
                del self._eof_pids[pid]

    def _exited(self, pid: int, code: int) -> None:
        with self._pool_lock:
            exited = self._by_pid.pop(pid, None)
            warm = self._warm_by_pid.pop(pid, None) if exited is None else None
            if warm is not None:  # a warm worker that never got a job
                self._warm_pending.pop(warm.warm_id, None)
                self._warm_idle.pop(warm.warm_id, None)
        if exited is not None:
            self._by_id.pop(exited.worker_id, None)
            exited.exitcode = code
            if not exited._connected:
                exited._deliver(("__eof__",))  # it died before it ever connected
            exited._deliver(("__exit__", code))

    def _after_select(self) -> None:
        if self._eof_pids:
            self._reap_zombies()
        with self._pool_lock:
            expired = [w for w in self._warm_idle.values() if self._policy.expired(w.since)]
            for w in expired:
                del self._warm_idle[w.warm_id]
        for w in expired:
            self._retire(w)
        if expired:
            self._mem_dirty.set()  # measured again on the pool's thread

    def kill(self, worker: LocalWorker) -> None:
        pid = worker.pid
        if pid is not None:
            _killpg(pid)
        else:
            worker._killed = True  # killed as soon as its pid is known
        conn = worker._conn
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def live_pids(self) -> list[int]:
        return [w.pid for w in list(self._by_pid.values()) if w.pid is not None]

    def stop(self) -> None:
        self._stopping = True
        self._learn_queue.put(None)
        for w in list(self._by_pid.values()):
            _killpg(w.pid)  # type: ignore[arg-type]
        try:
            assert self._zygote.stdin is not None
            self._zygote.stdin.close()  # zygote kills its children and exits on EOF
        except OSError:
            pass
        try:
            _wait_exit(self._zygote, 5.0)
        except subprocess.TimeoutExpired:
            self._zygote.kill()
            self._zygote.wait()
        self.wake()
        self.join(timeout=5)
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- the I/O loop ------------------------------------------------------------------
    def _on_readable(self, kind: str, fileobj: Any, data: Any) -> None:
        if kind == "zygote":
            self._read_zygote(fileobj, data)

    def _read_conn(self, conn: socket.socket, state: list) -> None:
        reader, worker = state
        data = _wire.recv_some(conn)
        if data is None:
            return
        if not data:
            self._sel.unregister(conn)
            conn.close()
            with self._pool_lock:
                worker = state[1]
                if isinstance(worker, _Warm):  # an idle warm worker ended (retired, or died)
                    self._warm_idle.pop(worker.warm_id, None)
                    return
            if worker is not None:
                worker._conn = None
                worker._deliver(("__eof__",))
                if worker.pid is not None:  # see whether it died, without the zygote
                    self._eof_pids[worker.pid] = self._policy.now() + 5.0
            return
        for frame in reader.feed(data):
            if isinstance(worker, _Warm):
                with self._pool_lock:
                    worker = state[1]
                if isinstance(worker, _Warm):
                    continue  # an idle warm worker has nothing to say
            if worker is None:
                if frame[0] == "hello" and frame[1] in self._warm_pending:
                    worker = self._warm_connected(conn, state, frame[1], frame[2])
                    continue
                if frame[0] != "hello" or frame[1] not in self._by_id:
                    self._sel.unregister(conn)
                    conn.close()
                    return
                worker = self._by_id[frame[1]]
                state[1] = worker
                worker._conn = conn
                worker._connected = True
                worker._deliver(("__connected__", frame[2]))
                worker.send(("run", worker._task))
                worker._task = b""
            elif frame[0] == "__imports__":
                self.learn(frame[1])
            elif frame[0] == "__reusable__" and worker.reuse_key is not None:
                worker = self._back_to_pool(conn, state, worker, frame[1])
            else:
                worker._deliver(frame)

    def _back_to_pool(self, conn: socket.socket, state: list, worker: LocalWorker,
                      code: int) -> _Warm | LocalWorker:
        """A worker whose task ended well and that may run the next task of its kind
        (``TuneConfig(reuse_actors=True)``): its job sees it end, its process waits idle in
        the pool for a job with the same ``reuse_key``."""
        assert worker.pid is not None and worker.reuse_key is not None
        with worker._send_lock:
            if worker._killed:
                return worker  # its job stopped it meanwhile: the process is going
            worker._killed = True  # the job's kill() must not reach the pooled process
        w = _Warm(f"reused-{next(self._warm_ids)}", worker.modules, worker.reuse_key)
        w.pid, w.conn, w.state = worker.pid, conn, state
        with self._pool_lock:
            w.since = self._policy.now()
            state[1] = w
            self._by_pid.pop(worker.pid, None)
            self._by_id.pop(worker.worker_id, None)
            self._warm_idle[w.warm_id] = w
            self._warm_by_pid[w.pid] = w
            self.reused += 1
        worker._conn = None
        worker.exitcode = code
        worker._deliver(("__eof__",))
        worker._deliver(("__exit__", code))
        return w

    def _warm_connected(self, conn: socket.socket, state: list, warm_id: str, pid: int) -> _Warm:
        with self._pool_lock:
            w = self._warm_pending.pop(warm_id)
            w.conn, w.state, w.since = conn, state, self._policy.now()
            if w.pid is None:  # its hello overtook the zygote's "forked"
                w.pid = pid
                self._warm_by_pid[pid] = w
            state[1] = w
            self._mem_dirty.set()
            stale = []
            if not w.retire_on_hello:
                self._warm_idle[warm_id] = w
                # once one with the newest learned imports is ready, the older idle ones go
                # (whichever connected first); refill keeps the newest up to the target
                fresh = [o for o in self._warm_idle.values() if o.reuse_key is None]
                newest = max(o.generation for o in fresh)
                stale = [self._warm_idle.pop(o.warm_id) for o in fresh if o.generation < newest]
        for old in stale:
            self._retire(old)
        if w.retire_on_hello:
            self._retire(w)
        return w

    def _read_zygote(self, pipe: Any, reader: _wire.FrameReader) -> None:
        try:
            data = os.read(pipe.fileno(), 1 << 16)
        except BlockingIOError:
            return
        if not data:
            self._sel.unregister(pipe)
            if not self._stopping:
                logger.error("the tandem zygote process exited unexpectedly")
                for w in list(self._by_id.values()):
                    w._deliver(("__exit__", None))
                self._by_id.clear()
            self._stopping = True
            return
        for msg in reader.feed(data):
            kind = msg[0]
            if kind == "forked":
                with self._pool_lock:
                    warm = self._warm_by_token.pop(msg[1], None)
                    if warm is not None:
                        if warm.pid is None:  # (else its hello came first and set it)
                            warm.pid = msg[2]
                            if warm.warm_id in self._warm_pending or \
                                    warm.warm_id in self._warm_idle:
                                self._warm_by_pid[msg[2]] = warm
                        continue
                worker = self._by_token.pop(msg[1])
                worker._pid = msg[2]
                self._by_pid[msg[2]] = worker
                if worker._killed:
                    _killpg(msg[2])
            elif kind == "exit":
                self._eof_pids.pop(msg[1], None)
                self._exited(msg[1], msg[2])
            elif kind == "learned":
                self._mem_dirty.set()
                logger.debug("the zygote went through %d learned modules", msg[1])
                with self._pool_lock:
                    self._generation += 1  # warm workers forked from now on have them
                    self.learn_outstanding -= msg[1]
                self._learn_queue.put([])  # refill, on the pool's thread
                if not msg[2]:
                    continue
                self._learning = False
                logger.info("stopped learning worker imports: %s", msg[2])  # nothing to act on
            elif kind == "preloaded":
                with self._pool_lock:
                    self.preloads_out = max(0, self.preloads_out - 1)
                if not msg[2]:
                    self._mem_dirty.set()
                    continue
                logger.warning("could not preload %s in worker processes: %s", msg[1], msg[2])


def _zombie_exitcode(pid: int) -> int | None:
    """The exit code (negative: the signal) of ``pid`` if it is a zombie, else None
    (alive, already reaped, or not Linux): ``/proc/PID/stat``'s state and exit status."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ", from the state on
    if not fields or fields[0] not in (b"Z", b"X") or len(fields) < 50:
        return None
    try:
        return os.waitstatus_to_exitcode(int(fields[49]))  # field 52: exit_code
    except ValueError:
        return None


def _killpg(pid: int) -> None:
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
