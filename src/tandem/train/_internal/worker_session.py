"""The state behind ``tandem.train.report`` & co. in one worker process: its reports,
checkpoints, dataset shards and calls to the driver (see ``worker`` for the frames).

Below both ``tandem.train.session`` (which hands it to the user's calls) and ``worker``
(which starts it), so that neither imports the other's importer.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Protocol, assert_never

from tandem.train._internal.data import RayDataShard
from tandem.train._internal.frames import (
    CallFrame,
    DoneFrame,
    ErrorFrame,
    NoticeFrame,
    ReplyFrame,
    ReportsFrame,
    ValidateFrame,
    decode_driver_frame,
    encode,
)
from tandem.train._internal.metrics import clean_metrics
from tandem.train._internal.run_context import AWAIT_VERDICT, TrainContext, VerdictGate
from tandem.train.api.checkpoint import Checkpoint, _is_url, get_fs

CHECKPOINT_DIR = "checkpoint_{:06d}"
CHECKPOINT_ONLY = "_tandem_checkpoint_only"


class SessionStart(Protocol):
    """Where a worker's session starts (``worker.WorkerTask`` is one)."""

    @property
    def context(self) -> TrainContext: ...

    @property
    def checkpoint_path(self) -> str | None: ...

    @property
    def start_iteration(self) -> int: ...

    @property
    def time_offset_s(self) -> float: ...

    @property
    def dataset_shards(self) -> Mapping[str, Any]: ...


VERDICT_STOP_GRACE_S = 300.0


class WorkerSession:
    """The state behind ``tandem.train.report`` & co. in one worker process."""

    def __init__(self, task: SessionStart, channel: Any) -> None:
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
        # the copies of a trial-local stopper, run here on every report (VerdictGate.local)
        self._local_stops: list[Callable[[dict[str, object]], bool]] = []
        if self._await_verdict and self._verdict_gate is not None:
            trial_id = task.context.trial_id or ""
            self._local_stops = [functools.partial(stop, trial_id)
                                 for stop in self._verdict_gate.load_local()]
        self._judged: set[int] = set()  # the gate's milestones already asked at
        self._start_iteration = task.start_iteration
        self._last_metrics: dict[str, Any] = {}
        self._rows = 0  # reports with a metrics row sent by this gang (what verdicts count)
        # set when the tuner answered a report with "checkpoint" (a callback set
        # result["should_checkpoint"]); read by the Trainable class runner
        self.checkpoint_requested = False
        self.exit_hooks: list[Callable[[bool], None]] = []
        self._preemption_calls = 0
        #: raised by a report the tuner answered "stop" (a trial of a trial stream ends
        #: there and its process runs the next one); None: wait for the driver to end the gang
        self.stop_raises: type[BaseException] | None = None
        channel.on_message(self._on_driver_message)

    # -- reports ---------------------------------------------------------------------
    def report(self, metrics: Mapping[str, object], checkpoint: Checkpoint | None,
               validation: object = False, dir_name: str | None = None, upload: bool = True,
               delete_local: bool = False,
               upload_fn: Callable[[Checkpoint, str], Checkpoint] | None = None) -> None:
        """One ``train.report`` (see there for the arguments, already checked)."""
        clean = clean_metrics(metrics)
        self.iteration += 1
        path = None
        if checkpoint is not None:
            if not isinstance(checkpoint, Checkpoint):
                self.iteration -= 1
                raise TypeError(
                    f"train.report(checkpoint=...) takes a tandem.train.Checkpoint, got "
                    f"{type(checkpoint).__name__}. Wrap a directory with "
                    f"Checkpoint.from_directory(path)."
                )
            path = self._store(checkpoint, dir_name, upload, delete_local, upload_fn)
            if validation:  # before the report: the controller protects the checkpoint
                self._send(encode(ValidateFrame(self._rank, self.iteration, validation)))
        # Sent inline: once report() returns, the report is in the kernel's socket buffer and
        # reaches the driver even if this process is killed the next instant.
        t = time.monotonic() - self._t0
        self._send(encode(ReportsFrame(self._rank, [(self.iteration, t, clean, path)])))
        self._rows += 1
        self._last_metrics = clean
        if self._await_verdict and self._needs_verdict(clean, t):
            self._wait_for_verdict()

    def _needs_verdict(self, clean: dict[str, object], t: float) -> bool:
        gate = self._verdict_gate
        if gate is None:
            return True
        # the row the tuner will see (as the train controller builds it from this report)
        row = dict(clean)
        row.setdefault("training_iteration", self.iteration)
        row.setdefault("time_total_s", round(t, 6))
        return gate.asks(row, self._rows, self._judged, self._local_stops)

    def attach_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Adds ``checkpoint`` to the latest report (same iteration, no new metrics row):
        a checkpoint the tuner asked for after that report."""
        path = self._persist(checkpoint)
        self._send(encode(ReportsFrame(self._rank, [(
            self.iteration, time.monotonic() - self._t0,
            {**self._last_metrics, CHECKPOINT_ONLY: True}, path)])))

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
        if self.stop_raises is not None:
            raise self.stop_raises(f"the tuner stopped this trial at iteration {self.iteration}")
        time.sleep(VERDICT_STOP_GRACE_S)
        raise RuntimeError(
            f"the tuner ended this trial at iteration {self.iteration}, but its workers were "
            f"not stopped within {VERDICT_STOP_GRACE_S:.0f} s"
        )

    def _store(self, checkpoint: Checkpoint, dir_name: str | None, upload: bool,
               delete_local: bool, upload_fn: Callable[[Checkpoint, str], Checkpoint] | None
               ) -> str:
        """Puts a reported checkpoint in the run folder (or leaves it where it is with
        ``upload=False``: Ray's ``NO_UPLOAD``); returns the path registered."""
        if not upload:
            return checkpoint.path
        name = dir_name or CHECKPOINT_DIR.format(self.iteration)
        if upload_fn is not None:
            stored = upload_fn(checkpoint, name)
            if not isinstance(stored, Checkpoint):
                raise TypeError(
                    f"train.report(checkpoint_upload_fn={upload_fn!r}) returned "
                    f"{type(stored).__name__}; it must return the uploaded "
                    f"tandem.train.Checkpoint."
                )
            path = stored.path
        else:
            path = self._persist(checkpoint, name)
        if delete_local and checkpoint.is_local and path.rstrip("/") != checkpoint.path.rstrip(
                "/") and not self._in_run(checkpoint.path) and os.path.isdir(checkpoint.path):
            shutil.rmtree(checkpoint.path, ignore_errors=True)
        return path

    def _in_run(self, path: str) -> bool:
        if self._run_path is None or _is_url(self._run_path):
            return False
        root = os.path.abspath(self._run_path)
        return os.path.abspath(path).startswith(root + os.sep)

    def _persist(self, checkpoint: Checkpoint, name: str | None = None) -> str:
        if self._run_path is None:
            return checkpoint.path
        dest = self._run_path.rstrip("/") + "/" + (name or CHECKPOINT_DIR.format(self.iteration))
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

    def dataset_shard(self, name: str | None) -> object:
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

    def _resolved(self, name: str) -> object:
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

    def finish(self, final: DoneFrame | ErrorFrame) -> None:
        """Sends the final frame (after every report, which were sent inline)."""
        self._send(encode(final))

    def call(self, method: str, payload: object, timeout_s: float | None = None) -> Any:
        """Sends a request to the driver and blocks for its answer."""
        return self.call_later(method, payload)(timeout_s)

    def call_later(self, method: str, payload: object) -> Callable[[float | None], object]:
        """Sends a request to the driver; returns ``wait(timeout_s)``, which blocks for
        its answer (the caller does other work meanwhile)."""
        with self._call_lock:
            self._call_ids += 1
            call_id = self._call_ids
            waiter: tuple[threading.Event, list] = (threading.Event(), [])
            self._calls[call_id] = waiter
        self._send(encode(CallFrame(call_id, method, payload)))

        def wait(timeout_s: float | None = None) -> object:
            if not waiter[0].wait(timeout_s):
                raise TimeoutError(f"the driver did not answer {method!r} in {timeout_s} s")
            ok, value = waiter[1][0]
            if not ok:
                raise value
            return value

        return wait

    def share_calls(self, other: WorkerSession) -> None:
        """Takes ``other``'s calls in flight and numbering (one session after another on
        one connection: a trial stream's sessions), so no reply goes to the wrong call."""
        self._calls = other._calls
        self._call_lock = other._call_lock
        self._call_ids = other._call_ids

    def on(self, kind: str, handler: Callable[[object], None]) -> None:
        """Registers a handler for driver frames ``(kind, payload)``."""
        self._handlers[kind] = handler

    def _on_driver_message(self, msg: object) -> None:
        frame = decode_driver_frame(msg)
        match frame:
            case ReplyFrame(call_id=call_id, ok=ok, value=value):
                waiter = self._calls.pop(call_id, None)
                if waiter is not None:
                    waiter[1].append((ok, value))
                    waiter[0].set()
            case NoticeFrame(topic=topic, payload=payload):
                handler = self._handlers.get(topic)
                if handler is not None:
                    handler(payload)
            case _:
                assert_never(frame)




def _is_persisted(path: str) -> bool:
    """A checkpoint folder of another run (e.g. a nested train job's): keep it where it is."""
    if _is_url(path):
        return False
    parent, name = os.path.split(path.rstrip("/"))
    return name.startswith("checkpoint_") and os.path.exists(os.path.join(parent, "result.json"))
