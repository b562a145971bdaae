"""``ServeRunner``: a served model as a long-running job on the job service.

The job's gang is one bundle per replica, so replicas hold their resources like any job's
workers. ``prepare`` (at submission) reserves the route on the process's serving front
(``_shared``: one loop thread, one HTTP server per address, shared by the deployments of
this process; a port in use by another program, or a route served already, is refused
then); ``run`` starts one replica process per bundle through the cluster, routes the
prefix to this model's app and restarts a replica that dies, until the job is stopped.
The front publishes a report when the set of ready replicas changes: ``url``,
``replicas_ready``, ``restarts`` (what ``ServeHandle`` and ``tandem jobs show`` read).

Replicas start warm (docs/warm_workers.md): the launcher imports the model's framework
(read from its ``model.pkl`` without unpickling it: torch for a ``TorchModel``, xgboost,
lightgbm, scikit-learn) and tandem's replica code ahead of the fork, and a registered
version's replica goes back to the warm pool when its deployment stops, holding the loaded
model, so the next deployment of that version starts on it (same process, same weights).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import tempfile
import threading
import time
from typing import Any

import cloudpickle

from tandem.cluster.base import Cluster, WorkerSpec
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobStatus
from tandem.model._early import serve_imports
from tandem.model.serve._errors import ServeError
from tandem.model.serve._front import Front, ServeApp
from tandem.model.serve._replica import ReplicaTask
from tandem.model.serve._settings import ServeSettings
from tandem.model.serve._shared import Listener, bind_socket, front

__all__ = ["ServeError", "ServeRunner", "bind_socket", "serve_imports"]


class ServeRunner(JobRunner):
    """Runs one served model (see the module docstring). Built by ``model.serve``."""

    def __init__(self, name: str, version: int | None, config: dict[str, Any], location: str,
                 settings: ServeSettings, owns_location: bool = False) -> None:
        self.name = name
        self.owns_location = owns_location
        self.version = version
        self.config = config
        self.location = location
        self.settings = settings
        self.prefix = settings.prefix_for(name)
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._listener: Listener | None = None
        self._stop = threading.Event()
        self._fatal: str | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._front: Front | None = None
        self._ctx: JobContext | None = None
        self._pids: dict[int, int] = {}
        self._restarts = 0
        self._failures_before_ready: dict[int, int] = {}
        self._log_dir: str | None = None
        self._routed = False  # the HTTP route answers: replicas may be reported ready
        self.url: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: self.__dict__[k] for k in
                ("name", "version", "config", "location", "settings", "prefix",
                 "owns_location")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- JobRunner -------------------------------------------------------------------------
    def prepare(self, cluster: Cluster) -> None:
        if self._listener is None:
            self._listener = front().reserve(self.settings.host, self.settings.port,
                                             self.prefix, f"serve:{self._what()}")
        # the replicas fork from a launcher that imported the model's framework once
        cluster.prewarm(self._preload())

    def discard(self) -> None:
        """Stopped before it ran (still pending): the route ``prepare`` reserved is free."""
        listener, self._listener = self._listener, None
        if listener is not None:
            front().release(listener, self.prefix)
        if self.owns_location:
            shutil.rmtree(self.location, ignore_errors=True)

    def stop(self) -> None:
        self._stop.set()

    def worker_pids(self) -> dict[int, int]:
        return dict(self._pids)

    def on_requeue(self, checkpoint_path: str | None) -> None:
        """A served model re-queued by a restarted train server serves again."""

    def run(self, ctx: JobContext) -> JobOutcome:
        self._ctx = ctx
        if self._listener is None:
            self._listener = front().reserve(self.settings.host, self.settings.port,
                                             self.prefix, f"serve:{self._what()}")
        listener = self._listener
        host = listener.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{shown}:{listener.port}{self.prefix}"
        self._log_dir = tempfile.mkdtemp(prefix=f"tandem-serve-{ctx.job_id}-")
        ctx.set_log_paths({i: self._log_path(i) for i in range(self.settings.num_replicas)})
        loop = front().loop
        self._loop = loop
        serving = None
        try:
            batcher = asyncio.run_coroutine_threadsafe(self._make_front(), loop).result()
            self._front = batcher
            for i in range(self.settings.num_replicas):
                self._start_replica(i)
            serving = self._start_http(listener)
            ctx.set_status(JobStatus.RUNNING)
            loop.call_soon_threadsafe(self._on_routed)
            while not self._stop.wait(0.2) and not ctx.stop_event.is_set():
                if self._fatal is not None:
                    break
                if serving.done():  # the HTTP server ended on its own
                    exc = serving.exception()
                    self._fatal = f"the HTTP server stopped: {exc!r}"
                    break
                if batcher.task.done():  # no request would reach a replica again
                    self._fatal = f"its request dispatcher stopped: {_task_error(batcher.task)}"
                    break
        finally:
            asked_to_stop = self._stop.is_set() or ctx.stop_event.is_set()
            self._shutdown(loop)
        if self._fatal is not None and not asked_to_stop:
            return JobOutcome(JobStatus.FAILED, error=ServeError(
                f"serving {self._what()} failed: {self._fatal}"))
        return JobOutcome(JobStatus.STOPPED)

    # -- internals --------------------------------------------------------------------------
    def _what(self) -> str:
        return f"{self.name}@{self.version}" if self.version is not None else self.name

    def _log_path(self, i: int) -> str:
        assert self._log_dir is not None
        return os.path.join(self._log_dir, f"replica_{i}.log")

    def _preload(self) -> tuple[str, ...]:
        got = self.__dict__.get("_imports")
        if got is None:
            got = self.__dict__["_imports"] = (*serve_imports(self.location),
                                               "tandem.model.serve._replica")
        return tuple(got)

    def _reuse_key(self) -> str | None:
        """Replicas of a registered version (immutable) may serve it again from the pool."""
        if self.owns_location or self.version is None:
            return None
        return f"serve|{self.location}|{self._what()}"

    async def _make_front(self) -> Front:
        s = self.settings
        return Front(asyncio.get_running_loop(), s.num_replicas, s.max_batch_size,
                     s.batch_wait_ms, s.request_timeout_s, s.max_queued_requests,
                     self._on_replica_event)

    def _start_replica(self, index: int) -> None:
        ctx, front, loop = self._ctx, self._front, self._loop
        assert ctx is not None and front is not None and loop is not None
        with self._lock:
            if self._stop.is_set():
                return
            generation = front.replicas[index].generation
            reuse = self._reuse_key()
            spec = WorkerSpec(worker_id=f"{ctx.job_id}-replica{index}-g{generation}",
                              bundle_index=index, log_path=self._log_path(index),
                              preload=self._preload(), reuse_key=reuse)
            gpus = float(ctx.placement.bundles[index].get("GPU", 0.0))
            task = cloudpickle.dumps(ReplicaTask(self.location, self._what(),
                                                 keep=reuse is not None, gpus=gpus))

            # The front must know the worker before its first frame: a warm replica (its
            # model kept) can answer "ready" before start_workers returns here, and an
            # attach after that frame would mark it not ready again. Whichever comes first,
            # the first frame or the return, attaches it (once, in the loop's order).
            attached: list[object] = []
            attach_lock = threading.Lock()

            def attach(worker: object, _i: int = index, _g: int = generation) -> None:
                with attach_lock:
                    if attached:
                        return
                    attached.append(worker)
                    self._workers_by_index[_i] = worker
                    loop.call_soon_threadsafe(front.attach, _i, worker, _g)

            def sink(worker: object, frame: Any, _i: int = index, _g: int = generation) -> None:
                if frame[0] == "hello":
                    return
                attach(worker)
                loop.call_soon_threadsafe(front.on_frame, _i, _g, frame)

            workers = ctx.cluster.start_workers(ctx.placement, [spec], [task], sink)
            attach(workers[0])

    @property
    def _workers_by_index(self) -> dict[int, Any]:
        d = self.__dict__.get("_workers")
        if d is None:
            d = self.__dict__["_workers"] = {}
        return d

    def _on_replica_event(self, index: int, generation: int, what: str | None) -> None:
        """On the loop: a replica became ready, failed to load, or died."""
        front = self._front
        assert front is not None
        rep = front.replicas[index]
        if what == "ready":
            self._failures_before_ready[index] = 0
            if rep.pid:
                self._pids[index] = rep.pid
            self._publish()
            return
        self._pids.pop(index, None)
        if self._fatal is not None:
            return  # the job is ending with the first reason
        # Dying before ready counts against max_restarts (a model that cannot load, or
        # crashes its process while loading); dying after it was ready never does.
        n = self._failures_before_ready.get(index, 0) + 1
        self._failures_before_ready[index] = n
        fatal = what is not None and what.startswith("fatal:")
        if n > self.settings.max_restarts:
            self._fatal = (f"replica {index} could not load the model ({n} tries):\n{what[6:]}"
                           if fatal and what is not None else
                           f"replica {index} died {n} times before it was ready; its output "
                           f"is in {self._log_path(index)}")
            return
        if fatal:
            rep.generation += 1
        if self._stop.is_set():
            return
        old = self._workers_by_index.get(index)
        if old is not None:
            old.kill()
        self._restarts += 1
        rep.restarts += 1
        self._publish()
        threading.Thread(target=self._restart, args=(index,), daemon=True,
                         name="tandem-serve-restart").start()

    def _restart(self, index: int) -> None:
        time.sleep(min(0.1 * self._restarts, 2.0))
        try:
            self._start_replica(index)
        except Exception as e:  # noqa: BLE001
            self._fatal = f"replica {index} could not be restarted: {type(e).__name__}: {e}"

    def _on_routed(self) -> None:
        """On the loop, once the HTTP server routes this model's prefix."""
        self._routed = True
        self._publish()

    def _publish(self) -> None:
        """Publishes the replicas' state (``ServeHandle.status()``, ``model.serve``'s wait).
        Only on the loop, where the front's replica state changes: a report is one moment
        of it, reports are in the order of those moments, and a replica counts as ready
        with its pid. It is ready once the HTTP route answers too (a warm replica can be
        ready before ``run`` routes the prefix: ``serve`` must not return before then)."""
        ctx, front = self._ctx, self._front
        if ctx is None or front is None or self._stop.is_set():
            return
        ready = [r for r in front.replicas if r.ready]
        ctx.publish([{"url": self.url, "replicas": self.settings.num_replicas,
                      "replicas_ready": len(ready) if self._routed else 0,
                      "restarts": self._restarts, "model": self._what(),
                      "pids": {r.index: r.pid for r in ready if r.pid is not None}}])

    def info(self) -> dict[str, Any]:
        front = self._front
        return {"name": self.name, "version": self.version, "config": self.config,
                "route_prefix": self.prefix or "/",
                "replicas": self.settings.num_replicas,
                "replicas_ready": front.ready_count() if front is not None else 0,
                "max_batch_size": self.settings.max_batch_size,
                "batch_wait_ms": self.settings.batch_wait_ms,
                "input_shape": front.item_shape if front is not None else None,
                "replica_devices": [r.device for r in front.replicas] if front else [],
                "replicas_warm": sum(r.warm for r in front.replicas) if front else 0,
                "requests": front.answered if front is not None else 0,
                "batches": front.batches if front is not None else 0,
                "largest_batch": front.largest_batch if front is not None else 0}

    def _start_http(self, listener: Listener) -> concurrent.futures.Future[None]:
        """Routes this model's prefix on the shared listener (which starts its HTTP server
        if it has none); returns the server's future."""
        app = ServeApp(self.prefix, self.info, lambda: self._front,
                       self.settings.max_request_bytes,
                       api_key=self.settings.api_key if self.settings.needs_key else None)
        return front().attach(listener, self.prefix, app)

    def _shutdown(self, loop: asyncio.AbstractEventLoop) -> None:
        self._stop.set()
        batcher = self._front
        if batcher is not None:  # waiting requests are answered (503) first: the HTTP
            loop.call_soon_threadsafe(batcher.close)  # server's stop waits for them
        if self._listener is not None:  # the route answers no more (the port is free
            front().release(self._listener, self.prefix)  # once no other model uses it)
            self._listener = None
        with self._lock:
            workers = list(self._workers_by_index.values())
        for w in workers:
            w.send(("stop",))
        deadline = time.monotonic() + 2.0
        for w in workers:
            while getattr(w, "exitcode", 0) is None and time.monotonic() < deadline:
                time.sleep(0.01)
            w.kill()
        self._pids.clear()
        if self.owns_location:
            shutil.rmtree(self.location, ignore_errors=True)
        if self._log_dir is not None and not os.listdir(self._log_dir):
            os.rmdir(self._log_dir)


def _task_error(task: asyncio.Task[None]) -> str:
    """What ended a finished task of the front's loop (read from the job's thread)."""
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return f"{type(exc).__name__}: {exc}" if exc is not None else "it returned"
