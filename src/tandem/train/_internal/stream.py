"""A trial stream: one train job whose single worker runs one run after another.

The job's train function is a ``RunStream``. It asks the driver for a run (the driver call
``STREAM_NEXT``, first with None, then with the outcome of the last run), runs it, and asks
again, until the driver answers None (a stream may be handed its first run instead). Each
run gets its own ``WorkerSession`` (its trial id, folder, context; iterations from 1), its
output in its own ``logs/rank_0.log``, and the process is put back between two runs as a
fresh process starts (``tandem.cluster.reuse``); a run that left something running ends the
stream (the process then exits, as clean reuse does). Reports reach the job's controller
with a job-wide iteration count; the run's own iteration, time and id travel in the row
(``STREAM_RUN_KEY``), so the driver files each row under its run whatever order the job's
events arrive in.

A report the driver answers "stop" raises ``RunStopped`` out of ``train.report`` /
``tune.report``: the run ends there and the stream goes on.

A run handed with ``ahead=True`` is followed by the question ``STREAM_AHEAD`` ("the run
after this one?"), which the driver answers when it has one, while the run runs. A worker
whose run ends with that answer in hand starts the next run at once and tells the driver
with the next ``STREAM_AHEAD`` (the outcome, and the run it started): no round trip between
two runs. Without the answer in hand it asks ``STREAM_NEXT`` and waits, as before; that
answer decides, and an answer to the earlier ``STREAM_AHEAD`` that comes later is dropped.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any, Protocol

import cloudpickle

from tandem._core.records import record
from tandem.train import session as session_mod
from tandem.train._internal.frames import (
    ErrorInfo,
    ReportBatch,
    ReportsFrame,
    decode_worker_frame,
    encode,
)
from tandem.train._internal.run_context import StorageContext
from tandem.train._internal.worker_session import CHECKPOINT_ONLY, WorkerSession

STREAM_NEXT = "tune_stream_next"
"""The driver call a stream's worker makes before its first run (payload None) and after
each run (payload its ``StreamOutcome``): answer the next ``StreamedRun``, or None (the
stream ends)."""
STREAM_AHEAD = "tune_stream_ahead"
"""The driver call a stream's worker makes while it runs a run handed with ``ahead=True``
(payload a ``StreamAhead``): answer the ``StreamedRun`` to run after it, when there is one
(the driver may hold the answer), or None."""
STREAM_RUN_KEY = "_tandem_stream_run"
"""The key of a streamed run's report row that names its run (the driver pops it)."""
STREAM_CHECKPOINT_KEY = "_tandem_stream_checkpoint"
"""The key of a report row holding the path of the checkpoint reported with it."""
STREAM_CHECKPOINT_ONLY = "_tandem_stream_checkpoint_only"
"""Set in a row that carries a checkpoint and no metrics (``CHECKPOINT_ONLY``)."""


class RunStopped(SystemExit):  # noqa: N818 - Ray's spelling of such signals
    """Raised out of ``report`` in a streamed run the tuner stopped at that report. A
    ``SystemExit``, as Ray's function trainable raises out of the ``report`` of a trial it
    stopped (``sys.exit(0)`` in its training thread): ``except Exception`` in the user's code
    does not swallow it, and its ``finally`` blocks run."""


@record
class StreamedRun:
    """One run of a stream, as the driver hands it to the worker."""

    run_id: str
    run_name: str
    storage: StorageContext
    config: Any
    #: the run's own entries of its context's metadata (e.g. its verdict gate)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: the worker asks ``STREAM_AHEAD`` for the run after this one while this one runs
    ahead: bool = False


@record
class StreamOutcome:
    """How a streamed run ended (the payload of ``STREAM_NEXT``; None before the first
    run): ``value`` (its return value, cloudpickled) or ``error``,
    or ``stopped`` (at the report the driver answered "stop"). ``last``: the stream ends
    after it (the run left something running, or raised ``SystemExit`` & co.)."""

    run_id: str
    value: bytes | None = None
    error: ErrorInfo | None = None
    stopped: bool = False
    last: bool = False


@record
class StreamAhead:
    """The payload of ``STREAM_AHEAD``: the worker runs ``started`` (the run the driver
    handed it last), having ended the run before it with ``outcome`` (None: ``started``
    came as the answer to ``STREAM_NEXT``, or as the stream's first run)."""

    started: str
    outcome: StreamOutcome | None = None


class _Channel(Protocol):
    """What a run's session needs of the stream's connection (``WorkerChannel``)."""

    def on_message(self, handler: Callable[[object], None]) -> None: ...

    def send(self, obj: object) -> None: ...


class _RunChannel:
    """The stream's connection as one run's session sees it: its reports get the job-wide
    iteration and carry the run's id, iteration and time in the row."""

    def __init__(self, channel: _Channel, run_id: str, counter: list[int]) -> None:
        self._channel = channel
        self._run_id = run_id
        self._counter = counter
        self.objects = getattr(channel, "objects", None) or {}
        #: the run's reported checkpoints, oldest first: ``(path, metrics reported with it)``
        self.checkpoints: list[tuple[str, dict[str, Any]]] = []

    def on_message(self, handler: Callable[[object], None]) -> None:
        self._channel.on_message(handler)

    def send(self, obj: object) -> None:
        if isinstance(obj, tuple) and obj and obj[0] == "reports":
            frame = decode_worker_frame(obj)
            assert isinstance(frame, ReportsFrame)
            batch: ReportBatch = []
            for it, t, metrics, path in frame.batch:
                row = dict(metrics)
                if CHECKPOINT_ONLY in row:
                    del row[CHECKPOINT_ONLY]
                    row[STREAM_CHECKPOINT_ONLY] = True
                if path is not None:  # committed at once: the stream's worker is the gang
                    self.checkpoints.append((path, {k: v for k, v in metrics.items()
                                                    if k != CHECKPOINT_ONLY}))
                row.setdefault("training_iteration", it)
                row.setdefault("time_total_s", round(t, 6))
                row[STREAM_RUN_KEY] = self._run_id
                if path is not None:
                    row[STREAM_CHECKPOINT_KEY] = path
                self._counter[0] += 1
                batch.append((self._counter[0], t, row, None))
            obj = encode(ReportsFrame(frame.rank, batch))
        self._channel.send(obj)


class _RunSession(WorkerSession):
    """One streamed run's session: what a job's controller keeps per run and tells the
    worker (its reported checkpoints) is kept here, per run."""

    def __init__(self, start: _RunStart, channel: _RunChannel) -> None:
        super().__init__(start, channel)
        self._run_channel = channel

    def call(self, method: str, payload: object, timeout_s: float | None = None) -> object:
        if method == "reported_checkpoints":
            # as the controller answers it for a one-worker run that keeps every
            # checkpoint (the tuner streams no run with CheckpointConfig(num_to_keep)) and
            # validates none (a function trainable has no validation_config)
            return [(path, dict(metrics), "COMMITTED")
                    for path, metrics in self._run_channel.checkpoints]
        return super().call(method, payload, timeout_s)


@record
class _RunStart:
    """A ``SessionStart`` for one streamed run: a fresh trial, iterations from 1."""

    context: Any
    checkpoint_path: str | None = None
    start_iteration: int = 0
    time_offset_s: float = 0.0
    dataset_shards: Mapping[str, Any] = field(default_factory=dict)


class RunStream:
    """The train function of a stream's job (see the module's docstring)."""

    def __init__(self, fn_bytes: bytes, pass_config: bool,
                 first: StreamedRun | None = None) -> None:
        self.fn_bytes = fn_bytes
        self.pass_config = pass_config
        self.first = first
        self.__name__ = "RunStream"

    def __call__(self, config: object) -> None:
        slot = session_mod.get_session()
        if slot is None:
            raise RuntimeError("RunStream runs only as the train function of a job")
        from tandem.cluster.reuse import ProcessBaseline

        channel = slot._channel
        counter = [slot.iteration]
        baseline = ProcessBaseline()
        saved = (os.dup(1), os.dup(2))
        run: StreamedRun | None = self.first
        try:
            if run is None:  # the driver hands the first run once this worker runs
                first = slot.call(STREAM_NEXT, None)
                assert first is None or isinstance(first, StreamedRun), first
                run = first
            ahead = _ask_ahead(slot, run)
            while run is not None:
                outcome = self._run_one(slot, channel, run, counter)
                if not outcome.last and baseline.left_running():
                    outcome = replace(outcome, last=True)
                channel.on_message(slot._on_driver_message)
                session_mod._set_session(slot)
                handed = _answered(ahead) if not outcome.last else None
                if handed is not None:  # the next run is here: start it, then tell
                    ahead = slot.call_later(STREAM_AHEAD, StreamAhead(handed.run_id, outcome))
                    baseline.restore()
                    run = handed
                    continue
                wait = slot.call_later(STREAM_NEXT, outcome)
                if outcome.last:
                    wait(None)
                    return
                baseline.restore()  # while the driver picks the next run
                answer = wait(None)
                assert answer is None or isinstance(answer, StreamedRun), answer
                run = answer
                ahead = _ask_ahead(slot, run)
        finally:
            _flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            slot.iteration = counter[0]

    def _run_one(self, slot: WorkerSession, channel: _Channel, run: StreamedRun,
                 counter: list[int]) -> StreamOutcome:
        run_path = run.storage.run_path
        _redirect_output(os.path.join(run_path, "logs", "rank_0.log"))
        context = replace(slot.context, storage=run.storage, trial_id=run.run_id,
                          trial_name=run.run_name, trial_dir=run_path,
                          metadata={**slot.context.metadata, **run.metadata})
        session = _RunSession(_RunStart(context), _RunChannel(channel, run.run_id, counter))
        session.share_calls(slot)
        session.stop_raises = RunStopped
        session_mod._set_session(session)
        from tandem.jobs import runtime
        from tandem.train._internal.nested import NestedJobService

        runtime.set_process_service(NestedJobService(session))
        try:
            fn = cloudpickle.loads(self.fn_bytes)
            value = fn(run.config) if self.pass_config else fn()
            try:
                payload = cloudpickle.dumps(value) if value is not None else None
            except Exception:  # noqa: BLE001 - as a job's worker: its repr instead
                payload = cloudpickle.dumps(repr(value))
            session.run_exit_hooks(failed=False)
            return StreamOutcome(run.run_id, value=payload)
        except RunStopped:
            session.run_exit_hooks(failed=False)
            return StreamOutcome(run.run_id, stopped=True)
        except BaseException as e:  # noqa: BLE001 - everything goes back to the driver
            tb = traceback.format_exc()
            sys.stderr.write(tb)
            try:
                pickled: bytes | None = cloudpickle.dumps(e)
                cloudpickle.loads(pickled)
            except Exception:  # noqa: BLE001
                pickled = None
            session.run_exit_hooks(failed=True)
            return StreamOutcome(run.run_id, error=ErrorInfo(type(e).__name__, str(e), tb,
                                                             pickled),
                                 last=not isinstance(e, Exception))
        finally:
            slot.share_calls(session)
            _flush()


def _ask_ahead(slot: WorkerSession,
               run: StreamedRun | None) -> Callable[[float | None], object] | None:
    """Asks for the run after ``run`` while it runs, where the driver hands runs ahead."""
    if run is None or not run.ahead:
        return None
    return slot.call_later(STREAM_AHEAD, StreamAhead(run.run_id))


def _answered(ahead: Callable[[float | None], object] | None) -> StreamedRun | None:
    """The run ``ahead`` was answered with, if that answer is here already."""
    if ahead is None:
        return None
    try:
        answer = ahead(0)
    except Exception:  # noqa: BLE001 - not answered yet (TimeoutError), or refused: ask STREAM_NEXT
        return None
    return answer if isinstance(answer, StreamedRun) else None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _redirect_output(path: str) -> None:
    """The process's stdout and stderr into ``path`` (appended to), as a fresh worker of
    that run has them."""
    _flush()
    try:  # made already for a run handed ahead (prepare_output)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except FileNotFoundError:
        _make_logs(os.path.dirname(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _make_logs(logs: str) -> None:
    # the run's folder, then its logs folder: two system calls where the experiment's
    # folder exists (os.makedirs looks at each level first)
    for folder in (os.path.dirname(logs), logs):
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        except FileNotFoundError:
            os.makedirs(logs, exist_ok=True)
            break


def prepare_output(run_path: str) -> None:
    """Makes a run's ``logs/rank_0.log`` before its worker starts it: the driver does, for
    a run handed ahead, while the slot's worker still runs the run before, so creating the
    run's folders and file (slow on some disks) is not done between two runs."""
    path = os.path.join(run_path, "logs", "rank_0.log")
    try:
        _make_logs(os.path.dirname(path))
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    except OSError:  # the worker makes them then, and says what failed
        pass


def stream_error(outcome: StreamOutcome, run_path: str) -> BaseException:
    """The error a streamed run that raised ends with: the same a run of its own ends with
    (``TrainController._raise`` with no restarts allowed)."""
    from tandem.train.api.errors import WorkerGroupError

    info = outcome.error
    assert info is not None
    cause: BaseException | None = None
    if info.pickled is not None:
        try:
            cause = cloudpickle.loads(info.pickled)
        except Exception:  # noqa: BLE001
            cause = None
    msg = (f"rank 0 raised {info.exc_type}: {info.message} (failure 1; "
           f"FailureConfig(max_failures=0): no restarts allowed). Run folder: {run_path}")
    if info.traceback:
        msg += f"\n\nWorker traceback (rank 0):\n{info.traceback.rstrip()}"
    error = WorkerGroupError(
        msg, {0: cause if cause is not None else RuntimeError(f"{info.exc_type}: {info.message}")},
        rank=0, exc_type=info.exc_type, exc_message=info.message,
        worker_traceback=info.traceback or None, cause=cause, num_failures=1,
    )
    if cause is not None:
        error.__cause__ = cause
    return error
