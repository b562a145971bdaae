"""What runs inside each worker process: the session, the backend, the user's function.

``report()`` writes its frame straight to the driver's socket (microseconds), so a report
survives its worker being killed right after; a checkpoint is copied to storage first. The
frames to and from the driver are ``tandem.train._internal.frames``'s.

A report whose metrics hold the key ``CHECKPOINT_ONLY`` carries a checkpoint and no metrics
row (the 1.x ``train.save_checkpoint(**state)``); its other metrics only score the checkpoint.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import field
from typing import Any, TextIO

import cloudpickle

from tandem._core.records import record
from tandem.train import session as session_mod
from tandem.train._internal.frames import DoneFrame, ErrorFrame, ErrorInfo
from tandem.train._internal.run_context import TrainContext
from tandem.train._internal.worker_session import (  # noqa: F401 - the worker's frames' names
    CHECKPOINT_DIR,
    CHECKPOINT_ONLY,
    WorkerSession,
)


def prepare_worker_process(env: Mapping[str, str]) -> None:
    """What every worker does first: the backend's environment, line-buffered output (so the
    driver's echo of the log files is timely)."""
    os.environ.update(env)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass


def _run_coroutine(coro: Coroutine[object, object, object]) -> object:
    """An ``async def`` train function runs to completion in its own event loop (asyncio is
    imported here: a worker of a plain function never loads it)."""
    import asyncio

    return asyncio.run(coro)


@record(frozen=False)
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

    def __call__(self, channel: object) -> int:
        prepare_worker_process(self.backend_env)
        with _tee_output(*self.log_files):
            return self._run(channel)

    def _run(self, channel: object) -> int:
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
                value = _run_coroutine(fn(*args))
            else:
                value = fn(*args)
                if inspect.iscoroutine(value):
                    value = _run_coroutine(value)
            try:
                payload = cloudpickle.dumps(value) if value is not None else None
            except Exception:
                payload = cloudpickle.dumps(repr(value))
            session.run_exit_hooks(failed=False)
            session.finish(DoneFrame(rank, payload))
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
            session.finish(ErrorFrame(rank, ErrorInfo(type(e).__name__, str(e), tb, pickled)))
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


def _has_ray_hooks(backend: object) -> bool:
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

    def _gather(self, value: object) -> list[object]:
        self._calls += 1
        return list(self._session.call("rendezvous_gather", (self._calls, self._rank, value)))

    def execute(self, fn: Callable[..., object], *args: object, **kwargs: object) -> list[Any]:
        return self._gather(fn(*args, **kwargs))

    def execute_single(self, rank: int, fn: Callable[..., object], *args: object,
                       **kwargs: object) -> object:
        value = fn(*args, **kwargs) if rank == self._rank else None
        return self._gather(value)[rank]
