"""What runs inside each worker process: the session, the backend, the user's function.

``report()`` writes its frame straight to the driver's socket (microseconds), so a report
survives its worker being killed right after; a checkpoint is copied to storage first. Protocol (worker -> driver frames):

    ("reports", rank, [(iteration, time_total_s, metrics, checkpoint_path | None), ...])
    ("done", rank, return_value_bytes | None)
    ("error", rank, ErrorInfo)
    ("call", request_id, method, payload)      a request to the driver (nested jobs)

A report whose metrics hold the key ``CHECKPOINT_ONLY`` carries a checkpoint and no metrics
row (the 1.x ``train.save_checkpoint(**state)``); its other metrics only score the checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import cloudpickle

from tandem.train import session as session_mod
from tandem.train._internal.data import RayDataShard
from tandem.train.api.checkpoint import Checkpoint, _is_url, get_fs
from tandem.train.context import AWAIT_VERDICT, TrainContext, VerdictGate

CHECKPOINT_DIR = "checkpoint_{:06d}"
CHECKPOINT_ONLY = "_tandem_checkpoint_only"


@dataclass(frozen=True)
class ErrorInfo:
    """A worker's exception, in a form that always crosses the process boundary."""

    exc_type: str
    message: str
    traceback: str
    pickled: bytes | None = None


def prepare_worker_process(env: Mapping[str, str]) -> None:
    """What every worker does first: the backend's environment, line-buffered output (so the
    driver's echo of the log files is timely)."""
    os.environ.update(env)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass


@dataclass
class WorkerTask:
    """Everything one worker needs; cloudpickled by the driver, called in the worker."""

    fn_bytes: bytes
    config: Any
    pass_config: bool
    context: TrainContext
    checkpoint_path: str | None
    start_iteration: int
    time_offset_s: float
    backend: Any  # tandem.train.backends.Backend
    backend_env: Mapping[str, str] = field(default_factory=dict)
    dataset_shards: Mapping[str, Any] = field(default_factory=dict)
    log_files: tuple[str | None, str | None] = (None, None)
    """Absolute paths the function's stdout / stderr are also written to (log_to_file)."""

    def __call__(self, channel: Any) -> int:
        prepare_worker_process(self.backend_env)
        with _tee_output(*self.log_files):
            return self._run(channel)

    def _run(self, channel: Any) -> int:
        session = WorkerSession(self, channel)
        session_mod._set_session(session)
        from tandem.jobs import runtime
        from tandem.train._internal.nested import NestedJobService

        runtime.set_process_service(NestedJobService(session))
        rank = self.context.world_rank
        group = _LocalWorkerGroup(session, self.context.world_rank, self.context.world_size)
        ray_hooks = _has_ray_hooks(self.backend)
        try:
            self.backend.on_worker_start(self.context)
            if ray_hooks:
                config = self.backend.backend_config
                self.backend.on_start(group, config)
                self.backend.on_training_start(group, config)
            try:
                fn = cloudpickle.loads(self.fn_bytes)
            except ModuleNotFoundError as e:
                raise ModuleNotFoundError(
                    f"{e}: the train function refers to module {e.name!r}, which the worker "
                    f"cannot import. Workers use the driver's working directory and sys.path; "
                    f"make the module importable there (e.g. run from its folder or install "
                    f"it), or define the function in your script."
                ) from e
            args = (self.config,) if self.pass_config else ()
            if inspect.iscoroutinefunction(fn):
                value = asyncio.run(fn(*args))
            else:
                value = fn(*args)
                if inspect.iscoroutine(value):
                    value = asyncio.run(value)
            try:
                payload = cloudpickle.dumps(value) if value is not None else None
            except Exception:
                payload = cloudpickle.dumps(repr(value))
            session.run_exit_hooks(failed=False)
            session.finish(("done", rank, payload))
            code = 0
        except BaseException as e:  # noqa: BLE001 - everything goes back to the driver
            tb = traceback.format_exc()
            sys.stderr.write(tb)
            try:
                pickled = cloudpickle.dumps(e)
                cloudpickle.loads(pickled)
            except Exception:
                pickled = None
            session.run_exit_hooks(failed=True)
            session.finish(("error", rank, ErrorInfo(type(e).__name__, str(e), tb, pickled)))
            code = 1
        finally:
            try:
                if ray_hooks:
                    self.backend.on_shutdown(group, self.backend.backend_config)
                self.backend.on_worker_shutdown(self.context)
            except Exception:
                pass
        return code


class _Tee(io.TextIOBase):
    """Writes to the stream it wraps and to a file (Ray's ``Tee`` for ``log_to_file``)."""

    def __init__(self, stream: TextIO, file: TextIO) -> None:
        self._stream, self._file = stream, file

    def write(self, s: str) -> int:
        self._file.write(s)
        return self._stream.write(s)

    def flush(self) -> None:
        self._file.flush()
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"


@contextlib.contextmanager
def _tee_output(stdout_path: str | None, stderr_path: str | None) -> Iterator[None]:
    """``log_to_file``: the function's ``sys.stdout`` / ``sys.stderr`` also go to these
    files (appended to, line-buffered; one file when both paths are the same)."""
    if not stdout_path and not stderr_path:
        yield
        return
    with contextlib.ExitStack() as stack:
        opened: dict[str, TextIO] = {}
        for path in (stdout_path, stderr_path):
            if path and path not in opened:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                opened[path] = stack.enter_context(open(path, "a", buffering=1))
        if stdout_path:
            stack.enter_context(contextlib.redirect_stdout(_Tee(sys.stdout, opened[stdout_path])))
        if stderr_path:
            stack.enter_context(contextlib.redirect_stderr(_Tee(sys.stderr, opened[stderr_path])))
        yield


VERDICT_STOP_GRACE_S = 300.0


class WorkerSession:
    """The state behind ``tandem.train.report`` & co. in one worker process."""

    def __init__(self, task: WorkerTask, channel: Any) -> None:
        self.context = task.context
        self.checkpoint = Checkpoint(task.checkpoint_path) if task.checkpoint_path else None
        self.iteration = task.start_iteration
        self._t0 = time.monotonic() - task.time_offset_s
        self._shards = dict(task.dataset_shards)
        # Ray Data iterators come through the cluster's own transport (Ray actor arguments).
        self._shards.update((getattr(channel, "objects", None) or {}).get("dataset_shards", {}))
        self._channel = channel
        self._rank = task.context.world_rank
        self._run_path = task.context.storage.run_path if task.context.storage else None
        self._send = channel.send
        self._calls: dict[int, tuple[threading.Event, list]] = {}
        self._call_ids = 0
        self._call_lock = threading.Lock()
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self._await_verdict = self._rank == 0 and bool(task.context.metadata.get(AWAIT_VERDICT))
        # which reports wait: all of them, or those a VerdictGate names (the others cannot
        # change the trial's outcome, so they go on without a round trip)
        gate = task.context.metadata.get(AWAIT_VERDICT)
        self._verdict_gate = gate if isinstance(gate, VerdictGate) else None
        self._judged: set[int] = set()  # the gate's milestones already asked at
        self._start_iteration = task.start_iteration
        self._last_metrics: dict[str, Any] = {}
        self._rows = 0  # reports with a metrics row sent by this gang (what verdicts count)
        # set when the tuner answered a report with "checkpoint" (a callback set
        # result["should_checkpoint"]); read by the Trainable class runner
        self.checkpoint_requested = False
        self.exit_hooks: list[Callable[[bool], None]] = []
        self._preemption_calls = 0
        channel.on_message(self._on_driver_message)

    # -- reports ---------------------------------------------------------------------
    def report(self, metrics: Mapping[str, Any], checkpoint: Checkpoint | None) -> None:
        clean = session_mod.clean_metrics(metrics)
        self.iteration += 1
        path = None
        if checkpoint is not None:
            if not isinstance(checkpoint, Checkpoint):
                raise TypeError(
                    f"train.report(checkpoint=...) takes a tandem.train.Checkpoint, got "
                    f"{type(checkpoint).__name__}. Wrap a directory with "
                    f"Checkpoint.from_directory(path)."
                )
            path = self._persist(checkpoint)
        # Sent inline: once report() returns, the report is in the kernel's socket buffer and
        # reaches the driver even if this process is killed the next instant.
        t = time.monotonic() - self._t0
        self._send(("reports", self._rank, [(self.iteration, t, clean, path)]))
        self._rows += 1
        self._last_metrics = clean
        if self._await_verdict and self._needs_verdict(clean, t):
            self._wait_for_verdict()

    def _needs_verdict(self, clean: dict[str, Any], t: float) -> bool:
        gate = self._verdict_gate
        if gate is None:
            return True
        # the row the tuner will see (as the train controller builds it from this report)
        row = dict(clean)
        row.setdefault("training_iteration", self.iteration)
        row.setdefault("time_total_s", round(t, 6))
        return gate.asks(row, self._rows, self._judged)

    def attach_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Adds ``checkpoint`` to the latest report (same iteration, no new metrics row):
        a checkpoint the tuner asked for after that report."""
        path = self._persist(checkpoint)
        self._send(("reports", self._rank, [(self.iteration, time.monotonic() - self._t0,
                                             {**self._last_metrics, CHECKPOINT_ONLY: True},
                                             path)]))

    def _wait_for_verdict(self) -> None:
        """In a tuning trial whose scheduler or stopper can decide at any result: returns once
        the tuner has seen this report and lets the trial go on; when it stopped, paused or
        exploited the trial at this report, blocks until the driver ends this gang."""
        verdict = self.call("tune_verdict", (self.iteration, self._rows))
        if verdict == "checkpoint":
            self.checkpoint_requested = True
            return
        if verdict == "continue":
            return
        time.sleep(VERDICT_STOP_GRACE_S)
        raise RuntimeError(
            f"the tuner ended this trial at iteration {self.iteration}, but its workers were "
            f"not stopped within {VERDICT_STOP_GRACE_S:.0f} s"
        )

    def _persist(self, checkpoint: Checkpoint) -> str:
        if self._run_path is None:
            return checkpoint.path
        dest = self._run_path.rstrip("/") + "/" + CHECKPOINT_DIR.format(self.iteration)
        if checkpoint.path.rstrip("/") == dest.rstrip("/") or _is_persisted(checkpoint.path):
            return checkpoint.path
        if _is_url(dest) or not checkpoint.is_local:
            fs, p = get_fs(dest)
            with checkpoint.as_directory() as src:
                fs.makedirs(p, exist_ok=True)
                fs.put(src.rstrip("/") + "/", p.rstrip("/") + "/", recursive=True)
        else:
            shutil.copytree(checkpoint.path, dest, dirs_exist_ok=True)
        return dest

    def preemption_info(self) -> Any:
        """``train.get_preemption_info()``: the n-th call asks the driver, which gives every
        rank the same answer for the same n (the value the first rank asking got)."""
        self._preemption_calls += 1
        return self.call("preemption_info", self._preemption_calls)

    def dataset_shard(self, name: str | None) -> Any:
        if name is None:  # the 1.x spelling: the one dataset given, or all of them by name
            if len(self._shards) == 1:
                return self._resolved(next(iter(self._shards)))
            return {n: self._resolved(n) for n in self._shards}
        if name not in self._shards:
            names = ", ".join(repr(n) for n in self._shards) or "none"
            raise KeyError(
                f"get_dataset_shard({name!r}): no dataset named {name!r} was given to the "
                f"trainer; datasets given: {names}. Pass datasets={{{name!r}: data}} to it."
            )
        return self._resolved(name)

    def _resolved(self, name: str) -> Any:
        shard = self._shards[name]
        if isinstance(shard, RayDataShard):  # a ray.data iterator: connect to Ray, once
            shard = self._shards[name] = shard.resolve()
        return shard

    # -- transport -------------------------------------------------------------------
    def run_exit_hooks(self, failed: bool) -> None:
        """Runs ``train.session.at_worker_exit`` hooks, last registered first."""
        while self.exit_hooks:
            hook = self.exit_hooks.pop()
            try:
                hook(failed)
            except Exception:  # noqa: BLE001 - a hook's error is printed, not raised
                traceback.print_exc()

    def finish(self, final: tuple) -> None:
        """Sends the final frame (after every report, which were sent inline)."""
        self._send(final)

    def call(self, method: str, payload: Any, timeout_s: float | None = None) -> Any:
        """Sends a request to the driver and blocks for its answer."""
        with self._call_lock:
            self._call_ids += 1
            call_id = self._call_ids
            waiter: tuple[threading.Event, list] = (threading.Event(), [])
            self._calls[call_id] = waiter
        self._send(("call", call_id, method, payload))
        if not waiter[0].wait(timeout_s):
            raise TimeoutError(f"the driver did not answer {method!r} in {timeout_s} s")
        ok, value = waiter[1][0]
        if not ok:
            raise value
        return value

    def on(self, kind: str, handler: Callable[[Any], None]) -> None:
        """Registers a handler for driver frames ``(kind, payload)``."""
        self._handlers[kind] = handler

    def _on_driver_message(self, msg: Any) -> None:
        kind = msg[0]
        if kind == "reply":
            _, call_id, ok, value = msg
            waiter = self._calls.pop(call_id, None)
            if waiter is not None:
                waiter[1].append((ok, value))
                waiter[0].set()
        elif kind in self._handlers:
            self._handlers[kind](msg[1])


def _has_ray_hooks(backend: Any) -> bool:
    """Whether a backend overrides one of Ray's hooks (on_start, on_training_start,
    on_shutdown); plain tandem backends skip the group round trips."""
    from tandem.train.backends.base import Backend

    return any(getattr(type(backend), name, None) is not getattr(Backend, name)
               for name in ("on_start", "on_training_start", "on_shutdown"))


class _LocalWorkerGroup:
    """The worker group a Ray ``Backend`` hook gets, seen from one worker: ``execute(fn,
    *args, **kwargs)`` runs ``fn`` here and returns every worker's result, by rank (every
    worker runs the same hook, so each runs ``fn`` once); ``execute_single(rank, fn, ...)``
    runs it on that rank only and returns its result on every rank."""

    def __init__(self, session: WorkerSession, rank: int, size: int) -> None:
        self._session = session
        self._rank = rank
        self._size = size
        self._calls = 0

    def __len__(self) -> int:
        return self._size

    @property
    def num_workers(self) -> int:
        return self._size

    def _gather(self, value: Any) -> list[Any]:
        self._calls += 1
        return list(self._session.call("rendezvous_gather", (self._calls, self._rank, value)))

    def execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        return self._gather(fn(*args, **kwargs))

    def execute_single(self, rank: int, fn: Callable[..., Any], *args: Any,
                       **kwargs: Any) -> Any:
        value = fn(*args, **kwargs) if rank == self._rank else None
        return self._gather(value)[rank]


def _is_persisted(path: str) -> bool:
    """A checkpoint folder of another run (e.g. a nested train job's): keep it where it is."""
    if _is_url(path):
        return False
    parent, name = os.path.split(path.rstrip("/"))
    return name.startswith("checkpoint_") and os.path.exists(os.path.join(parent, "result.json"))
