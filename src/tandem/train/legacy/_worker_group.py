"""``Trainer.to_worker_group(cls)`` (1.x API): live workers, each holding an instance of ``cls``.

The group is a job in the job service, like a training run: its gang is placed and holds
its resources until ``shutdown()``, and ``tandem.jobs.list()`` shows it RUNNING. Each
worker sets up the backend (e.g. joins the torch process group), builds ``cls(*args,
**kwargs)``, then serves calls until the driver tells it to stop. Protocol, on top of the
cluster's channel (``tandem.train._internal.frames``)::

    driver -> worker   NoticeFrame("execute", (call_id, cloudpickled (method, args, kwargs)))
                       NoticeFrame("stop", None)
    worker -> driver   ReadyFrame(rank)                       the instance exists
                       ResultFrame(call_id, ok, value_bytes | ErrorInfo)
                       ErrorFrame(rank, ErrorInfo)            setup or __init__ failed
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import cloudpickle

from tandem._core.errors import ConfigError, TandemError
from tandem.cluster.base import WorkerProcess, WorkerSpec
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobStatus
from tandem.train import session as session_mod
from tandem.train._internal.frames import (
    CallFrame,
    Connected,
    DoneFrame,
    ErrorFrame,
    NoticeFrame,
    ProcessExited,
    ReadyFrame,
    ReportsFrame,
    ResultFrame,
    StopRequested,
    StreamEnded,
    ValidateFrame,
    WorkerFrame,
    decode_worker_frame,
    encode,
)
from tandem.train._internal.gang import plan_gang, with_local_ranks
from tandem.train._internal.logs import ECHO
from tandem.train._internal.rendezvous import METHODS as RENDEZVOUS_METHODS
from tandem.train._internal.rendezvous import GangRendezvous
from tandem.train._internal.worker import (
    ErrorInfo,
    WorkerSession,
    WorkerTask,
    prepare_worker_process,
)
from tandem.train.backends.base import Backend
from tandem.train.context import TrainContext

logger = logging.getLogger(__name__)


class WorkerGroupError(TandemError, RuntimeError):
    """A call on a worker group failed, or the group is no longer running.

    Attributes:
        rank: the worker whose failure this is (None for the whole group).
        cause: the worker's original exception, when it could be sent back.
        worker_traceback: the worker's formatted traceback.
    """

    def __init__(self, message: str, *, rank: int | None = None,
                 cause: BaseException | None = None, worker_traceback: str | None = None) -> None:
        super().__init__(message)
        self.rank = rank
        self.cause = cause
        self.worker_traceback = worker_traceback


def _error_info(e: BaseException) -> ErrorInfo:
    tb = traceback.format_exc()
    try:
        pickled: bytes | None = cloudpickle.dumps(e)
        cloudpickle.loads(pickled)
    except Exception:  # noqa: BLE001
        pickled = None
    return ErrorInfo(type(e).__name__, str(e), tb, pickled)


# -- worker side --------------------------------------------------------------------------
@dataclass
class GroupWorkerTask:
    """Runs in each worker process: backend up, ``cls(*args, **kwargs)``, then serve calls."""

    cls_bytes: bytes
    context: TrainContext
    backend: Backend
    backend_env: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, channel: Any) -> int:
        prepare_worker_process(self.backend_env)
        # A session, so that train.get_context() / train.world_rank() work in the methods.
        session = WorkerSession(WorkerTask(
            fn_bytes=b"", config=None, pass_config=False, context=self.context,
            checkpoint_path=None, start_iteration=0, time_offset_s=0.0, backend=self.backend,
        ), channel)
        session_mod._set_session(session)
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        session.on("execute", inbox.put)
        session.on("stop", lambda _: inbox.put(None))
        rank = self.context.world_rank
        try:
            self.backend.on_worker_start(self.context)
            cls, args, kwargs = cloudpickle.loads(self.cls_bytes)
            instance = cls(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - goes back to the driver
            info = _error_info(e)
            sys.stderr.write(info.traceback)
            channel.send(encode(ErrorFrame(rank, info)))
            return 1
        channel.send(encode(ReadyFrame(rank)))
        try:
            while True:
                item = inbox.get()
                if item is None:
                    return 0
                call_id, payload = item
                channel.send(encode(ResultFrame(call_id, *self._execute(instance, payload))))
        finally:
            with contextlib.suppress(Exception):
                self.backend.on_worker_shutdown(self.context)

    @staticmethod
    def _execute(instance: object, payload: bytes) -> tuple[bool, object]:
        try:
            method, args, kwargs = cloudpickle.loads(payload)
            if isinstance(method, str):
                fn = getattr(instance, method)
            else:
                fn = functools.partial(method, instance)
            return True, cloudpickle.dumps(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001
            info = _error_info(e)
            sys.stderr.write(info.traceback)
            return False, info


# -- driver side --------------------------------------------------------------------------
class _Call:
    __slots__ = ("error", "event", "ranks", "replies")

    def __init__(self, ranks: Sequence[int]) -> None:
        self.ranks = list(ranks)
        self.replies: dict[int, tuple[bool, Any]] = {}
        self.event = threading.Event()
        self.error: WorkerGroupError | None = None


class WorkerGroupRunner(JobRunner):
    """The job behind a worker group. ``call`` may be used from any thread once ``ready``."""

    def __init__(self, cls_bytes: bytes, backend: Backend, log_dir: str,
                 echo: bool = True) -> None:
        self._cls_bytes = cls_bytes
        self._backend = backend
        self._log_dir = log_dir
        self._echo = echo
        self._q: queue.SimpleQueue[tuple[int, WorkerFrame | StopRequested]] = queue.SimpleQueue()
        self._workers: list[WorkerProcess] = []
        self._rdzv = GangRendezvous()
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.ready = threading.Event()
        self.error: WorkerGroupError | None = None
        self.patience_s = 5.0
        self.shutdown_requested = False

    # -- JobRunner -------------------------------------------------------------------
    def prepare(self, cluster: Any) -> None:
        if self._backend.preload:
            cluster.prewarm(self._backend.preload)

    def stop(self) -> None:
        self._q.put((-1, StopRequested()))

    def run(self, ctx: JobContext) -> JobOutcome:
        placement = ctx.placement
        n = len(placement.bundles)
        os.makedirs(self._log_dir, exist_ok=True)
        logs = {r: os.path.join(self._log_dir, f"rank_{r}.log") for r in range(n)}
        ctx.set_log_paths(logs)
        plan = plan_gang(placement.node_ids, placement.node_ips)
        envs = with_local_ranks(self._backend.worker_env(list(placement.node_ips)), plan)
        tasks, specs = [], []
        for p in plan:
            rank = p.world_rank
            tctx = TrainContext(
                world_size=n, world_rank=rank, local_rank=p.local_rank,
                local_world_size=p.local_world_size, node_rank=p.node_rank,
            )
            tasks.append(cloudpickle.dumps(GroupWorkerTask(
                self._cls_bytes, tctx, self._backend, envs[rank])))
            specs.append(WorkerSpec(worker_id=f"{ctx.job_id}-r{rank}", bundle_index=p.bundle_index,
                                    log_path=logs[rank], preload=self._backend.preload))
        ranks = {s.worker_id: i for i, s in enumerate(specs)}
        q = self._q

        def sink(worker: WorkerProcess, frame: object) -> None:
            try:
                q.put((ranks[worker.worker_id], decode_worker_frame(frame)))
            except ValueError as e:
                logger.warning("worker group %s: dropped a frame: %s", worker.worker_id, e)

        echo_keys = []
        if self._echo:
            for r, path in logs.items():
                open(path, "a").close()
                echo_keys.append(ECHO.add(path, f"(worker_group rank={r}) "))
        try:
            self._workers = ctx.cluster.start_workers(placement, specs, tasks, sink)
            return self._serve(n)
        finally:
            for w in self._workers:
                w.kill()
            for key in echo_keys:
                ECHO.remove(key)
            self._fail(self.error or WorkerGroupError("The worker group was shut down."))

    def _serve(self, n: int) -> JobOutcome:
        started: set[int] = set()
        while True:
            rank, frame = self._q.get()
            match frame:
                case StopRequested():
                    return self._graceful_stop()
                case ResultFrame(call_id=call_id, ok=ok, value=value):
                    self._deliver(rank, call_id, ok, value)
                case CallFrame(call_id=call_id, method=method, payload=payload):
                    if method in RENDEZVOUS_METHODS:
                        self._rdzv.handle(method, payload, self._workers[rank], call_id)
                case ReadyFrame():
                    started.add(rank)
                    if len(started) == n:
                        self.ready.set()
                case ErrorFrame(info=info):
                    self.error = WorkerGroupError(
                        f"Starting the worker group failed on rank {rank}: {info.exc_type}: "
                        f"{info.message}\n\nWorker traceback (rank {rank}):\n"
                        f"{info.traceback.rstrip()}",
                        rank=rank, cause=_load_cause(info), worker_traceback=info.traceback,
                    )
                    return JobOutcome(JobStatus.FAILED, error=self.error)
                case StreamEnded() | ProcessExited():
                    code = frame.returncode if isinstance(frame, ProcessExited) else None
                    how = (f"was killed by signal {-code}" if code is not None and code < 0 else
                           f"exited with code {code}" if code is not None
                           else "lost its connection")
                    self.error = WorkerGroupError(
                        f"Worker rank {rank} of the worker group {how}; the group is no longer "
                        f"running. Create a new one with Trainer.to_worker_group(...).",
                        rank=rank)
                    return JobOutcome(JobStatus.FAILED, error=self.error)
                case Connected():
                    pass  # the cluster's notice; ReadyFrame says the instance exists
                case ReportsFrame() | DoneFrame() | ValidateFrame():
                    pass  # a train run's frames: a worker group sends none
                case _:
                    assert_never(frame)

    def _graceful_stop(self) -> JobOutcome:
        for w in self._workers:
            w.send(encode(NoticeFrame("stop", None)))
        exited: set[int] = set()
        deadline = time.monotonic() + self.patience_s
        while len(exited) < len(self._workers):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, frame = self._q.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(frame, ProcessExited):
                exited.add(rank)
        status = JobStatus.FINISHED if self.shutdown_requested else JobStatus.STOPPED
        return JobOutcome(status)

    def _deliver(self, rank: int, call_id: int, ok: bool, value: object) -> None:
        with self._lock:
            call = self._calls.get(call_id)
            if call is None:
                return
            call.replies[rank] = (ok, value)
            if len(call.replies) < len(call.ranks):
                return
            del self._calls[call_id]
        call.event.set()

    def _fail(self, error: WorkerGroupError) -> None:
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
            if self.error is None:
                self.error = error
        for call in calls:
            call.error = error
            call.event.set()

    # -- the group's calls ----------------------------------------------------------------
    def call(self, ranks: Sequence[int], method: object, args: tuple[object, ...],
             kwargs: dict[str, object]) -> list[Any]:
        if not isinstance(method, str) and not callable(method):
            raise ConfigError(
                f"execute() takes a method name or a function f(instance, *args), got "
                f"{type(method).__name__}."
            )
        try:
            payload = cloudpickle.dumps((method, args, kwargs))
        except Exception as e:
            raise ConfigError(
                f"execute({method!r}, ...): the arguments cannot be sent to the workers: "
                f"{type(e).__name__}: {e}."
            ) from e
        call = _Call(ranks)
        with self._lock:
            if self.error is not None:
                raise self.error
            call_id = next(self._ids)
            self._calls[call_id] = call
        for r in ranks:
            self._workers[r].send(encode(NoticeFrame("execute", (call_id, payload))))
        call.event.wait()
        if call.error is not None:
            raise call.error
        values = []
        for r in ranks:
            ok, value = call.replies[r]
            if not ok:
                info: ErrorInfo = value
                name = method if isinstance(method, str) else getattr(method, "__name__", "?")
                raise WorkerGroupError(
                    f"{name}() raised on worker rank {r}: {info.exc_type}: {info.message}"
                    f"\n\nWorker traceback (rank {r}):\n{info.traceback.rstrip()}",
                    rank=r, cause=_load_cause(info), worker_traceback=info.traceback,
                ) from _load_cause(info)
            values.append(cloudpickle.loads(value))
        return values


def _load_cause(info: ErrorInfo) -> BaseException | None:
    if info.pickled is None:
        return None
    try:
        return cloudpickle.loads(info.pickled)
    except Exception:  # noqa: BLE001
        return None


class WorkerHandle:
    """One worker of a group (``group[i]``)."""

    def __init__(self, group: WorkerGroup, rank: int) -> None:
        self._group = group
        self.rank = rank

    def execute(self, method: str | Callable[..., object], *args: object,
                **kwargs: object) -> Any:
        """Calls ``method`` on this worker's instance and returns its result."""
        return self._group._call([self.rank], method, args, kwargs)[0]

    def __repr__(self) -> str:
        return f"WorkerHandle(rank={self.rank})"


class WorkerGroup:
    """Live workers, each holding an instance of the class given to ``Trainer.to_worker_group``.

    ``execute("method", *args, **kwargs)`` calls the method on every worker at once and
    returns one result per worker, in rank order (a function ``f(instance, *args)`` works in
    place of a method name). ``group[i].execute(...)`` calls one worker. The group holds its
    resources until ``shutdown()``.
    """

    def __init__(self, runner: WorkerGroupRunner, handle: Any, num_workers: int) -> None:
        self._runner = runner
        self._handle = handle
        self._n = num_workers
        self._closed = False

    @property
    def job_id(self) -> str:
        return self._handle.job_id

    def execute(self, method: str | Callable[..., object], *args: object,
                **kwargs: object) -> list[Any]:
        """Runs ``method`` on every worker's instance; returns the results in rank order.

        Raises:
            WorkerGroupError: the method raised on a worker (with its traceback), or the
                group is no longer running.
        """
        return self._call(range(self._n), method, args, kwargs)

    def _call(self, ranks: Sequence[int], method: object, args: tuple[object, ...],
              kwargs: dict[str, object]) -> list[Any]:
        if self._closed:
            raise WorkerGroupError(
                "This worker group has been shut down; create a new one with "
                "Trainer.to_worker_group(...)."
            )
        return self._runner.call(list(ranks), method, args, kwargs)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> WorkerHandle:
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"worker group indices are integers, got {type(index).__name__}")
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(f"worker index out of range: the group has {self._n} workers")
        return WorkerHandle(self, index)

    def __iter__(self) -> Iterator[WorkerHandle]:
        return (WorkerHandle(self, r) for r in range(self._n))

    def shutdown(self, patience_s: float = 5) -> None:
        """Stops the workers (killing them after ``patience_s`` seconds) and frees their
        resources. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._runner.patience_s = float(patience_s)
        self._runner.shutdown_requested = True
        self._handle.stop()
        try:
            self._handle.wait(timeout=patience_s + 30)
        except WorkerGroupError:
            pass

    def __repr__(self) -> str:
        return f"WorkerGroup(num_workers={self._n}, job_id={self.job_id!r})"


def start_worker_group(runner: WorkerGroupRunner, submit: Any, num_workers: int) -> WorkerGroup:
    """Submits the group's job and blocks until every worker holds its instance.

    Raises:
        WorkerGroupError: a worker failed to set up the backend or build the instance.
    """
    handle = submit()
    try:
        while not runner.ready.wait(0.2):
            if handle.done():
                handle.wait()  # raises the group's error
                raise WorkerGroupError(
                    f"The worker group's job ended ({handle.status()}) before it was ready."
                )
    except KeyboardInterrupt:
        handle.stop()
        raise
    return WorkerGroup(runner, handle, num_workers)
