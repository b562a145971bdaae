"""``TrainController``: runs one training run as a job.

It starts the worker gang on the job's placement, relays reports into the run folder and
to listeners, commits checkpoints, and on a worker failure kills the whole gang and starts
it again from the latest committed checkpoint, within ``FailureConfig.max_failures``.
The loop is ``step()`` (handle a batch of worker events) plus a thin ``run()``; its states
are ``TrainControllerState`` (state.py). After a failure the ``FailurePolicy`` (failure.py)
decides RETRY, RESCHEDULE (a node was lost) or RAISE, and the controller acts on it. Which
rank runs where is planned by ``plan_gang`` (gang.py).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any, assert_never

import cloudpickle

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.cluster.base import Placement, WorkerProcess, WorkerSpec
from tandem.jobs.events import Checkpointed, RankReported
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobStatus, PreemptionRequest
from tandem.train._internal import data as data_mod
from tandem.train._internal.checkpoints import (
    CheckpointManager,
    announce_resume,
    checkpoint_iteration,
    committed_checkpoints,
    existing_checkpoints,
    pending_validations,
)
from tandem.train._internal.contexts import DistributedTrainContext
from tandem.train._internal.failure import FailureDecision, FailurePolicy, FailureStatus
from tandem.train._internal.frames import (
    CallFrame,
    Connected,
    ControllerItem,
    DoneFrame,
    ErrorFrame,
    PreemptRequested,
    ProcessExited,
    ReadyFrame,
    ReplyFrame,
    ReportsFrame,
    ResultFrame,
    StopRequested,
    StreamEnded,
    ValidateFrame,
    ValidationsDone,
    decode_worker_frame,
    encode,
)
from tandem.train._internal.gang import (
    elastic_target,
    plan_gang,
    storage_is_shared_by_env,
    storage_refusal,
    with_local_ranks,
)
from tandem.train._internal.logs import ECHO
from tandem.train._internal.nested import DRIVER_CALLS
from tandem.train._internal.rendezvous import METHODS as RENDEZVOUS_METHODS
from tandem.train._internal.rendezvous import GangRendezvous
from tandem.train._internal.run_context import AskSubmitter, StorageContext
from tandem.train._internal.state import TrainControllerState
from tandem.train._internal.storage import RunStorage
from tandem.train._internal.validation import Outcome, ValidationPlan, ValidationRunner
from tandem.train._internal.worker import CHECKPOINT_ONLY, WorkerTask
from tandem.train.api.callback import (
    Callback,
    CallbackDispatcher,
    CallbackSite,
    RunCallbackContext,
    UserCallback,
)
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import CheckpointConfig, FailureConfig
from tandem.train.api.errors import ControllerError, TrainingFailedError, WorkerGroupError
from tandem.train.api.files import remove_dir
from tandem.train.api.preemption import PreemptionError, PreemptionInfo
from tandem.train.api.result import Result
from tandem.train.backends.base import Backend

logger = logging.getLogger(__name__)

_DEATH_GRACE_S = 0.25  # after a first failure, how long to look for its root cause
_WORKER_PRELOAD = ("tandem.train._internal.worker",)  # imported once in the zygote


@record(frozen=False)
class RunSpec:
    """Everything the controller needs to run (and re-run) a gang. Built by a trainer."""

    fn_bytes: bytes
    pass_config: bool
    config: Any
    num_workers: int
    """The gang size (an elastic gang's most)."""
    storage: StorageContext
    backend: Backend
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    datasets: Mapping[str, Any] = field(default_factory=dict)
    datasets_to_split: tuple[str, ...] | None = None
    """``DataConfig.datasets_to_split``: None splits every dataset by rank; otherwise the
    datasets not named reach every worker whole."""
    resume_from_checkpoint: Checkpoint | None = None
    start_iteration: int = 0
    time_offset_s: float = 0.0
    trial_id: str | None = None
    trial_name: str | None = None
    echo_prefix: str | None = ""  # None: do not echo worker output
    callbacks: tuple[Callback, ...] = ()
    """Run callbacks, dispatched here (``CallbackSite.DRIVER``); empty for a run submitted
    from a worker, whose callbacks stay in that worker."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    call_handlers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    preload: tuple[str, ...] = ()
    """Extra modules for the zygote to import once (e.g. ``tandem.tune`` for trials)."""
    reuse_key: str | None = None
    """Workers may be reused across runs with this key (``WorkerSpec.reuse_key``)."""
    result_files: bool = True
    """Write ``params.json`` / ``result.json`` / ``progress.csv`` (False: a Tuner's logger
    callbacks write them for its trial)."""
    failure_setting: str = "FailureConfig(max_failures={})"
    """How errors name the restart budget the user set (the older Trainer: max_retries)."""
    log_files: tuple[str | None, str | None] = (None, None)
    """``RunConfig.log_to_file`` as file names in the run folder: each rank's train
    function tees its stdout / stderr there (Ray Tune's ``log_to_file``)."""
    emit_rank_reports: bool = False
    """Emit every rank's report batches as ``("rank_reports", (rank, batch))`` job events
    (each ``(iteration, time_total_s, metrics, checkpoint_path | None)``), for the older
    Trainer API. Events, not a callable, so they also reach a job submitted from a worker."""
    min_workers: int | None = None
    """An elastic gang's least size (``ScalingConfig(num_workers=(min, max))``); None or
    equal to ``num_workers``: a fixed gang."""
    resize_interval_s: float = 60.0
    """``ScalingConfig.elastic_resize_monitor_interval_s``."""
    # Set by the train server (JobRunner hooks below), never by trainers:
    working_dir: str | None = None  # workers run here, with it first on sys.path
    env_vars: Mapping[str, str] = field(default_factory=dict)  # set in every worker
    resume_latest_in_run_path: bool = False  # seed from the newest checkpoint_* in the run folder
    validation: ValidationPlan | None = None
    """The trainer's ``validation_config``: checkpoints reported with ``validation=...``
    are validated once committed (``_internal.validation``)."""


@record(frozen=False)
class _Failure:
    rank: int | None
    kind: str  # "error" | "died"
    exc_type: str
    message: str
    traceback: str = ""
    cause: BaseException | None = None


class TrainController(JobRunner):
    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.policy = FailurePolicy(spec.failure_config)
        self.checkpoints = CheckpointManager(spec.checkpoint_config, remove_dir,
                                             owner=spec.storage.run_path,
                                             on_commit=self._record_checkpoints)
        self._q: queue.SimpleQueue[tuple[int, int, ControllerItem]] = queue.SimpleQueue()
        # A trial stream's slot job: frames handled on the thread that reads them
        # (``_direct_calls``). ``_direct_open`` while that is safe: the gang is set, the run
        # is RUNNING and no frame of the gang waits in ``_q`` (``_direct_pending``), so a
        # frame handled there never overtakes one sent before it. Both under the lock,
        # which the controller thread holds while it handles frames too.
        self._direct: frozenset[str] | None = None
        self._direct_lock = threading.Lock()
        self._direct_open = False
        self._direct_pending = 0
        self._attempt = 0
        self._workers: list[WorkerProcess] = []
        self._done: dict[int, Any] = {}
        self._rank_iter: list[int] = []
        self._committed_upto = 0
        # train.get_all_reported_checkpoints() calls waiting for an iteration to commit
        self._checkpoint_waiters: list[tuple[int, bool, Callable[[bool, Any], None]]] = []
        self._failures: list[_Failure] = []
        self.num_failures = 0
        self.last_metrics: dict | None = None
        self.storage: RunStorage | None = None
        self.ctx: JobContext | None = None
        self._echo_keys: list[int] = []
        self._stop_requested = False
        self._ends: dict[int, set[type]] = {}  # rank -> {StreamEnded, ProcessExited} of this gang
        self._nested_jobs: list[str] = []
        self._lent_resources = False
        self._ray_endpoint: data_mod.RayEndpoint | None = None  # LOCAL_RAY held by this run
        self.state = TrainControllerState.INITIALIZING
        self.callbacks = CallbackDispatcher(spec.callbacks, CallbackSite.DRIVER)
        self.num_preemptions = 0
        self._n = spec.num_workers  # the current gang's size (an elastic gang's varies)
        self.sizes: list[int] = []  # each gang's size, in order
        self._grow_to: tuple[int, int] | None = None  # (size, checkpoint iteration then)
        self._next_resize_check = 0.0
        self._preemption: tuple[PreemptionRequest, PreemptionInfo] | None = None
        self._preemption_answers: dict[int, PreemptionInfo | None] = {}
        # Ray's UserCallback: every rank's metrics of an iteration, until it commits
        self._user_callbacks = [cb for cb in spec.callbacks if isinstance(cb, UserCallback)]
        self._rank_metrics: dict[int, dict[int, dict]] = {}
        # checkpoint validation: each iteration's validation spec by rank (until it
        # commits), and the validation status of checkpoints that asked for one
        self._validation: ValidationRunner | None = None
        self._validation_specs: dict[int, dict[int, Any]] = {}
        # validations submitted and not ended: iteration -> (checkpoint path, spec), kept in
        # checkpoints.json so that a run resuming an aborted one runs them again (Ray)
        self._validations_running: dict[int, tuple[str, Any]] = {}
        self.validation_status: dict[int, str] = {}

    def without_callbacks(self) -> tuple[TrainController, tuple[Callback, ...]]:
        """This run without its callbacks (a fresh controller), and the callbacks: a job
        submitted from a worker keeps its callbacks there and sends the rest."""
        return TrainController(replace(self.spec, callbacks=())), tuple(self.spec.callbacks)

    def run_identity(self) -> tuple[str, str, str | None, str | None]:
        """``(run_name, run_path, trial_id, trial_name)``: what callbacks kept by the
        submitting worker are told at the run's start."""
        storage = self.spec.storage
        return storage.run_name, storage.run_path, self.spec.trial_id, self.spec.trial_name

    # -- pickling (a train server receives the runner before it ever ran) ----------------
    def __getstate__(self) -> dict:
        spec = self.spec
        keep = []
        for cb in spec.callbacks:
            try:
                cloudpickle.dumps(cb)
                keep.append(cb)
            except Exception as e:  # noqa: BLE001 - a client-only callback stays behind
                logger.warning("RunConfig callback %r cannot be sent to the train server (%s: "
                               "%s); it will not run for this job.", cb, type(e).__name__, e)
        handlers = {}
        for name, fn in spec.call_handlers.items():
            try:
                cloudpickle.dumps(fn)
                handlers[name] = fn
            except Exception:  # noqa: BLE001
                logger.warning("driver call handler %r cannot be sent to the train server; "
                               "workers calling it will get an error.", name)
        return {"spec": replace(spec, callbacks=tuple(keep), call_handlers=handlers)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]

    # -- train server hooks (tandem.server.runner_hooks: LoadCheck, RuntimeEnvTaker, Requeueable)
    def check_loadable(self) -> None:
        cloudpickle.loads(self.spec.fn_bytes)

    def apply_runtime_env(self, working_dir: str | None, env_vars: Mapping[str, str]) -> None:
        # the run's own RunConfig(worker_runtime_env=...) env vars win over the job's
        self.spec = replace(self.spec, working_dir=working_dir,
                            env_vars={**dict(env_vars), **self.spec.env_vars})

    def on_requeue(self, checkpoint_path: str | None) -> None:
        import os

        if checkpoint_path is not None and os.path.isdir(checkpoint_path):
            self.spec = replace(self.spec, resume_from_checkpoint=Checkpoint(checkpoint_path))
        else:
            self.spec = replace(self.spec, resume_latest_in_run_path=True)

    def worker_pids(self) -> dict[int, int]:
        out = {}
        for rank, w in enumerate(list(self._workers)):
            pid = w.pid
            if pid is not None:
                out[rank] = pid
        return out

    # -- JobRunner -----------------------------------------------------------------------
    def prepare(self, cluster: Any) -> None:
        cluster.prewarm(self._preload())

    def _log_files(self) -> tuple[str | None, str | None]:
        assert self.storage is not None
        folder = self.storage.local_dir
        return tuple(os.path.join(folder, f) if f else None  # type: ignore[return-value]
                     for f in self.spec.log_files)

    def _preload(self) -> tuple[str, ...]:
        return _WORKER_PRELOAD + tuple(self.spec.backend.preload) + tuple(self.spec.preload)

    def stop(self) -> None:
        self._stop_requested = True
        self._q.put((-1, -1, StopRequested()))

    @property
    def preemptible(self) -> bool:
        return True

    def preempt(self, request: PreemptionRequest) -> bool:
        """The scheduler asks this run to yield (see ``_on_preempt``); never blocks."""
        if self.ctx is None or self._stop_requested or self._preemption is not None or \
                self.state is not TrainControllerState.RUNNING:
            return False
        self._q.put((-1, -1, PreemptRequested(request)))
        return True

    def run(self, ctx: JobContext) -> JobOutcome:
        self.ctx = ctx
        spec = self.spec
        self.state = TrainControllerState.INITIALIZING
        self.storage = RunStorage(spec.storage.run_path, result_files=spec.result_files)
        self.storage.write_params(spec.config)
        self._seed_checkpoints()
        ctx.set_log_paths({r: self.storage.log_path(r) for r in range(spec.num_workers)})
        self.callbacks.run_start(spec.storage.run_name, spec.storage.run_path, spec.trial_id,
                                 spec.trial_name)
        error: TrainingFailedError | None = None
        refused = self._storage_refusal(ctx.placement)
        if refused is None:
            refused = self._hold_local_ray(ctx)
        if refused is not None:
            return self._finish(TrainControllerState.ERRORED, refused)  # type: ignore[arg-type]
        try:
            self._start_gang()
            self.state = TrainControllerState.RUNNING
            while not self.state.is_terminal:
                self.state = self.step(self._step_timeout())
                if self.state is TrainControllerState.RUNNING and self._elastic:
                    self.state = self._maybe_resize()
                if self.state is TrainControllerState.PREEMPTING:
                    error, self.state = self._on_preempt()
                if self.state is TrainControllerState.WORKER_FAILED:
                    error, self.state = self._on_failure()
        except BaseException as e:  # our own bug: never leave workers behind
            self._close_direct()
            self._kill_gang()
            error = ControllerError(e)
            self.state = TrainControllerState.ERRORED
            logger.exception("controller failure")
        finally:
            self._close_direct()
            self._stop_echo()
        return self._finish(self.state, error)

    # -- the loop ------------------------------------------------------------------------
    def step(self, timeout_s: float | None = None) -> TrainControllerState:
        """Handles the next batch of worker events; returns the state afterwards:
        ``RUNNING``, ``FINISHED`` (every worker returned), ``WORKER_FAILED`` or ``STOPPED``."""
        try:
            first = self._q.get(timeout=timeout_s) if timeout_s is not None else self._q.get()
        except queue.Empty:
            return TrainControllerState.RUNNING
        items = [first]
        for _ in range(4096):
            try:
                items.append(self._q.get_nowait())
            except queue.Empty:
                break
        if self._direct is None:
            return self._handle(items)
        with self._direct_lock:
            try:
                state = self._handle(items)
            except BaseException:
                self._direct_open = False
                raise
            self._direct_pending -= sum(1 for _a, rank, _f in items if rank >= 0)
            self._direct_open = (state is TrainControllerState.RUNNING and bool(self._workers)
                                 and self._direct_pending == 0)
        return state

    def _handle(self, items: list[tuple[int, int, ControllerItem]],
                seen: dict[int, set[type]] | None = None) -> TrainControllerState:
        """Applies worker frames; ``seen`` collects each rank's ``StreamEnded`` /
        ``ProcessExited``."""
        if seen is None:
            seen = self._ends  # ends seen by the main loop count for _kill_gang too
        rows: list[dict] = []
        state = TrainControllerState.RUNNING
        for attempt, rank, frame in items:
            match frame:
                case StopRequested():
                    self._stop_requested = True
                    state = TrainControllerState.STOPPED
                    continue
                case PreemptRequested(request=request):
                    if self._preemption is None and self.ctx is not None:
                        self._preemption = (request, self._preemption_info(request))
                        if state is TrainControllerState.RUNNING:
                            state = TrainControllerState.PREEMPTING
                    continue
                case ValidationsDone():
                    self._apply_validations()
                    continue
            if attempt != self._attempt:
                continue  # a late frame from a gang we already replaced
            match frame:
                case ValidateFrame(iteration=it, spec=spec):
                    # sent before the report whose checkpoint it names
                    self._validation_specs.setdefault(it, {})[rank] = spec
                    self.checkpoints.protected.add(it)  # kept until its validation ends
                case ReportsFrame(batch=batch):
                    self._on_reports(rank, batch, rows)
                case DoneFrame(value=value):
                    self._done[rank] = value
                    if (len(self._done) == self._n
                            and state is TrainControllerState.RUNNING):
                        state = TrainControllerState.FINISHED
                case ErrorFrame(info=info):
                    cause = None
                    if info.pickled is not None:
                        try:
                            cause = cloudpickle.loads(info.pickled)
                        except Exception:
                            cause = None
                    self._failures.append(_Failure(rank, "error", info.exc_type, info.message,
                                                   info.traceback, cause))
                    if state is not TrainControllerState.STOPPED:
                        state = TrainControllerState.WORKER_FAILED
                case StreamEnded() | ProcessExited():
                    if seen is not None:
                        seen.setdefault(rank, set()).add(type(frame))
                    if rank in self._done:
                        continue
                    # Only the end of the worker's stream proves it ended without finishing:
                    # its exit notice travels another way and can overtake its last frames.
                    if isinstance(frame, StreamEnded):
                        if not any(f.rank == rank for f in self._failures):
                            self._failures.append(_Failure(rank, "died", *_death(None)))
                        if state is not TrainControllerState.STOPPED:
                            state = TrainControllerState.WORKER_FAILED
                    elif any(f.rank == rank for f in self._failures):
                        # the exit code names how a worker that already failed died
                        self._failures.append(
                            _Failure(rank, "died", *_death(frame.returncode)))
                case CallFrame():
                    if rows:  # the reports before a call reach listeners before it
                        self._publish(rows)
                        rows = []
                    self._on_call(rank, frame)
                case StopRequested() | PreemptRequested() | ValidationsDone():
                    pass  # handled above
                case ReadyFrame() | ResultFrame():
                    pass  # a 1.x worker group's frames: not a train run's
                case Connected():
                    pass  # the cluster's notice; reports and ends are what count
                case _:
                    assert_never(frame)
        if rows:
            self._publish(rows)
        return state

    def _on_reports(self, rank: int, batch: list, rows: list[dict]) -> None:
        ckpts = self.checkpoints
        if self.spec.emit_rank_reports:
            assert self.ctx is not None
            self.ctx.emit(RankReported(rank, batch))
        if self._user_callbacks:
            for it, _t, metrics, _path in batch:
                if CHECKPOINT_ONLY not in metrics:
                    self._rank_metrics.setdefault(it, {})[rank] = dict(metrics)
        if rank == 0:
            for it, t, metrics, path in batch:
                if CHECKPOINT_ONLY in metrics:  # a checkpoint without a metrics row
                    if path is not None:
                        ckpts.on_report(it, path, {k: v for k, v in metrics.items()
                                                   if k != CHECKPOINT_ONLY})
                    continue
                row = dict(metrics)
                row.setdefault("training_iteration", it)
                row.setdefault("time_total_s", round(t, 6))
                rows.append(row)
                self._time_offset_s = t
                self.last_metrics = metrics
                if path is not None:
                    ckpts.on_report(it, path, metrics)
                elif ckpts._pending:
                    ckpts.on_report(it, None, metrics)
        else:
            for it, _t, _m, path in batch:
                if path is not None:
                    ckpts.on_report(it, path, None)
        self._rank_iter[rank] = batch[-1][0]
        low = min(self._rank_iter)
        # ">=": a checkpoint attached to an already committed iteration commits at once
        if low >= self._committed_upto:
            self._committed_upto = low
            self._commit(low)
            if self._user_callbacks:
                self._after_report(low)
            if self._checkpoint_waiters:
                self._answer_checkpoint_waiters()

    def _after_report(self, upto: int) -> None:
        kept = {it: ckpt for it, ckpt, _m in self.checkpoints.kept}
        context = self._callback_context()
        for it in sorted(i for i in self._rank_metrics if i <= upto):
            per_rank = self._rank_metrics.pop(it)
            metrics = [per_rank.get(r, {}) for r in range(self.spec.num_workers)]
            for cb in self._user_callbacks:
                cb.after_report(context, metrics, kept.get(it))

    def _callback_context(self) -> RunCallbackContext:
        spec = self.spec
        return RunCallbackContext(spec.storage.run_name, spec.storage.run_path,
                                  CallbackSite.DRIVER, spec.trial_id, spec.trial_name)

    def _after_exception(self) -> None:
        errors: dict[int, Exception] = {}
        for f in self._failures:
            if f.rank is None or f.rank in errors:
                continue
            errors[f.rank] = (f.cause if isinstance(f.cause, Exception)
                              else RuntimeError(f"{f.exc_type}: {f.message}"))
        context = self._callback_context()
        for cb in self._user_callbacks:
            cb.after_exception(context, errors)

    def reported_checkpoints(self, iteration: int, reply: Callable[[bool, object], None],
                             validated: bool = False) -> None:
        """Answers ``train.get_all_reported_checkpoints()``: the kept checkpoints (oldest
        first) with their metrics and validation status, once every rank's report
        ``iteration`` is committed (and, with ``validated``, no validation is pending)."""
        self._checkpoint_waiters.append((iteration, validated, reply))
        self._answer_checkpoint_waiters()

    def _answer_checkpoint_waiters(self) -> None:
        pending = self._validations_pending
        ready = [w for w in self._checkpoint_waiters
                 if w[0] <= self._committed_upto and not (w[1] and pending)]
        if not ready:
            return
        self._checkpoint_waiters = [w for w in self._checkpoint_waiters if w not in ready]
        kept = [(c.path, dict(m or {}), self.validation_status.get(it, "COMMITTED"))
                for it, c, m in self.checkpoints.kept]
        for _it, _validated, reply in ready:
            reply(True, kept)

    def _record_checkpoints(self) -> None:
        if self.storage is not None:
            self.storage.write_checkpoint_state(self.checkpoints.kept, self.checkpoints.latest,
                                                self._validations_running)

    def _commit(self, upto: int) -> None:
        new = self.checkpoints.commit_upto(upto)
        if new:
            assert self.storage is not None
            self.storage.sync()
            assert self.ctx is not None
            for entry in new:
                self.ctx.emit(Checkpointed(*entry))
                self.callbacks.checkpoint(entry)
            self._start_validations(new)

    # -- checkpoint validation (ValidationConfig) ----------------------------------------
    def _start_validations(self, new: list[tuple[int, Checkpoint, dict]]) -> None:
        started = False
        for it, ckpt, _metrics in new:
            specs = self._validation_specs.pop(it, None)
            if not specs:
                continue
            spec = specs[min(specs)]  # the lowest rank's, as Ray's report handler
            started = self._submit_validation(it, ckpt.path, spec) or started
        if started:
            self._record_checkpoints()  # pending, for a run that resumes this one

    def _submit_validation(self, it: int, path: str, spec: object) -> bool:
        if self._validation is None:
            plan = self.spec.validation
            if plan is None:  # the worker refuses validation= without a config
                self.checkpoints.protected.discard(it)
                return False
            self._validation = ValidationRunner(
                plan, lambda: self._q.put((-1, -1, ValidationsDone())))
        self.validation_status[it] = "PENDING_VALIDATION"
        self.checkpoints.protected.add(it)  # kept until its validation ends
        self._validations_running[it] = (path, spec)
        self._validation.submit(it, path, spec)
        return True

    def _requeue_validations(self) -> None:
        """Submits again the validations an earlier run in this run folder left pending
        when it was aborted (Ray's ``_requeue_incomplete_validations``); they need this
        run's ``validation_config``."""
        pending = pending_validations(self.spec.storage.run_path)
        if not pending:
            return
        if self.spec.validation is None:
            logger.warning(
                "The earlier run in %s left %d checkpoint validation(s) pending; this run "
                "has no validation_config, so they are not run. Give the trainer a "
                "ValidationConfig to run them.", self.spec.storage.run_path, len(pending))
            return
        logger.info("Running %d checkpoint validation(s) the earlier run in %s left pending: "
                    "%s", len(pending), self.spec.storage.run_path,
                    ", ".join(os.path.basename(p) for _, p, _ in pending))
        for it, path, spec in pending:
            self._submit_validation(it, path, spec)

    def _apply_validations(self, outcomes: list[Outcome] | None = None) -> None:
        """Merges finished validations into their checkpoints' metrics (Ray's
        ``update_checkpoints_with_validation_result``): a validated checkpoint's metrics get
        the returned ones and it is ranked again; a failed or timed-out one keeps its own."""
        if outcomes is None:
            if self._validation is None:
                return
            outcomes = self._validation.take_finished()
        if not outcomes:
            return
        for o in outcomes:
            self.validation_status[o.iteration] = o.status
            self._validations_running.pop(o.iteration, None)
            self.checkpoints.validated(o.iteration, o.metrics if o.status == "VALIDATED" else None)
        self._record_checkpoints()
        if self._checkpoint_waiters:
            self._answer_checkpoint_waiters()

    @property
    def _validations_pending(self) -> bool:
        return any(s == "PENDING_VALIDATION" for s in self.validation_status.values())

    def _publish(self, rows: list[dict]) -> None:
        assert self.storage is not None and self.ctx is not None
        self.storage.append(rows)
        self.ctx.publish(rows)
        self.callbacks.report(rows)

    def _on_call(self, rank: int, frame: CallFrame) -> None:
        call_id, method, payload = frame.call_id, frame.method, frame.payload
        if rank >= len(self._workers):
            return  # a call from a gang already killed (frames drained after its end)
        worker = self._workers[rank]
        if method in RENDEZVOUS_METHODS:
            self._rdzv.handle(method, payload, worker, call_id)
            return
        if method == "preemption_info":  # the n-th call gets the same answer on every rank
            if payload not in self._preemption_answers:
                self._preemption_answers[payload] = (
                    self._preemption[1] if self._preemption is not None else None)
            worker.send(encode(ReplyFrame(call_id, True, self._preemption_answers[payload])))
            return
        handler = self.spec.call_handlers.get(method) or DRIVER_CALLS.get(method)

        def reply(ok: bool, value: object) -> None:
            try:
                worker.send(encode(ReplyFrame(call_id, ok, value)))
            except Exception as e:  # value did not pickle
                worker.send(encode(ReplyFrame(call_id, False, RuntimeError(repr(e)))))

        if method == "reported_checkpoints":  # payload: iteration, or (iteration, validated)
            it, validated = payload if isinstance(payload, tuple) else (payload, False)
            self.reported_checkpoints(int(it), reply, bool(validated))
            return
        if handler is None:
            worker.send(encode(ReplyFrame(
                call_id, False, RuntimeError(f"unknown driver call {method!r}"))))
            return

        if isinstance(handler, AskSubmitter):
            assert self.ctx is not None
            self.ctx.ask(handler.kind, payload, reply, handler.default)
            return
        handler(self, rank, payload, reply)

    def _direct_calls(self) -> frozenset[str] | None:
        """A trial stream's slot job (``tandem.train.stream``): its one worker's reports and
        its questions for the submitter (``AskSubmitter`` calls: the next trial, a verdict)
        are handled by the thread that reads them, not through this controller's thread:
        one thread hand-over less in the round trip between two trials of a slot, one thread
        less to wake per trial. Only where nothing else here needs them: one worker, no
        restarts or resizes (its frames all belong to one gang), no callbacks, rank reports
        or validations. The calls so handled; None: every frame goes through the queue."""
        spec = self.spec
        if not spec.call_handlers or spec.num_workers != 1:
            return None  # a plain run: the stream's module is not even imported
        from tandem.train._internal.stream import STREAM_NEXT

        if (STREAM_NEXT not in spec.call_handlers or self._elastic or spec.callbacks
                or spec.emit_rank_reports or spec.validation is not None
                or self.policy.config.max_failures != 0):
            return None
        return frozenset(m for m, h in spec.call_handlers.items() if isinstance(h, AskSubmitter))

    def _sink_direct(self, direct: frozenset[str], item: tuple[int, int, ControllerItem],
                     worker_id: str) -> None:
        """A frame of a slot job whose frames may be handled here (``_direct_calls``): on
        this, the reading thread, when that is safe and it is a report or such a call;
        otherwise queued for the controller thread, and nothing is handled here until the
        controller has handled it (frames are handled in the order sent)."""
        frame = item[2]
        with self._direct_lock:
            if self._direct_open and (type(frame) is ReportsFrame or (
                    type(frame) is CallFrame and frame.method in direct)):
                try:
                    self._handle([item])
                    return
                except Exception:  # our bug: the controller thread meets it again and fails
                    logger.exception("worker %s: a frame failed on the reading thread",
                                     worker_id)
            self._direct_open = False
            self._direct_pending += 1
            self._q.put(item)

    def _close_direct(self) -> None:
        """From now on every frame goes through the queue (the run left RUNNING)."""
        with self._direct_lock:
            self._direct_open = False

    # -- gang lifecycle ------------------------------------------------------------------
    def _seed_checkpoints(self) -> None:
        spec = self.spec
        base = spec.start_iteration
        existing = existing_checkpoints(spec.storage.run_path)
        if existing:
            base = max(base, existing[-1][0])
        earlier = committed_checkpoints(spec.storage.run_path) if spec.resume_latest_in_run_path \
            else None
        if earlier:  # a run with this (storage_path, name) went before: resume it (Ray Train)
            announce_resume(spec.storage.run_path, earlier[-1][1], spec.resume_from_checkpoint)
            self.checkpoints.seed(Checkpoint(earlier[-1][1]), earlier[-1][0])
            self._requeue_validations()
            # until the resumed run reports, its result is what the earlier run reported with
            # that checkpoint (a finished run resumed again reports nothing new)
            self.last_metrics = dict(self.checkpoints.latest[2]) if (
                self.checkpoints.latest and self.checkpoints.latest[2]) else self.last_metrics
        elif spec.resume_latest_in_run_path and existing and spec.resume_from_checkpoint is None:
            self.checkpoints.seed(Checkpoint(existing[-1][1]), existing[-1][0])
        elif spec.resume_from_checkpoint is not None:
            it = checkpoint_iteration(spec.resume_from_checkpoint.path) or 0
            if spec.resume_from_checkpoint.path.startswith(spec.storage.run_path):
                base = max(base, it)
            self.checkpoints.seed(spec.resume_from_checkpoint, base)
        self._base_iteration = base
        self._committed_upto = base
        self._time_offset_s = spec.time_offset_s

    def _start_gang(self) -> None:
        ctx, spec = self.ctx, self.spec
        assert ctx is not None and self.storage is not None
        # validations asked for by a gang that failed before its checkpoint committed: gone
        self._validation_specs.clear()
        self.checkpoints.protected = {it for it, status in self.validation_status.items()
                                      if status == "PENDING_VALIDATION"}
        placement = ctx.placement
        n = self._n = min(spec.num_workers, len(placement.bundles))
        self.sizes.append(n)
        self._grow_to = None
        self._next_resize_check = time.monotonic() + spec.resize_interval_s
        latest = self.checkpoints.latest
        ckpt_path = latest[1].path if latest else None
        start_it = latest[0] if latest else self._base_iteration
        self.storage.rewind(start_it)  # iterations after start_it are reported again
        self._done = {}
        self._rdzv = GangRendezvous(n)  # per gang: frames of old gangs are ignored
        self._preemption_answers = {}
        if self._preemption is not None:  # asked while the last gang was being replaced
            self._q.put((-1, -1, PreemptRequested(self._preemption[0])))
            self._preemption = None
        self._rank_iter = [start_it] * n
        self._rank_metrics.clear()  # a new gang reports its iterations again
        self._committed_upto = start_it
        self._failures = []
        plan = plan_gang(placement.node_ids[:n], placement.node_ips[:n])
        envs = with_local_ranks(spec.backend.worker_env([p.node_ip for p in plan]), plan)
        on_ray = ctx.cluster.supports_ray_objects
        split_names = spec.datasets_to_split
        ray_data = {name: d for name, d in spec.datasets.items() if data_mod.is_ray_dataset(d)}
        shards: dict[str, list[Any]] = {
            name: data_mod.split(name, d, n)
            if split_names is None or name in split_names else [d] * n
            for name, d in spec.datasets.items() if name not in ray_data}
        by_ray: set[str] = set()
        if ray_data:  # split by Ray Data itself, as Ray Train does (data.py)
            iterators = data_mod.ray_iterators(ray_data, n, split_names,
                                               progress_bars=on_ray)
            if on_ray:  # Ray handles travel as actor arguments
                shards.update(iterators)
                by_ray = set(iterators)
            else:
                endpoint = self._ray_endpoint
                assert endpoint is not None
                shards.update({name: [data_mod.RayDataShard.pack(name, it, endpoint)
                                      for it in its] for name, its in iterators.items()})
        attempt = self._attempt
        tasks, specs = [], []
        for p in plan:
            rank = p.world_rank
            tctx = DistributedTrainContext(
                world_size=n, world_rank=rank, local_rank=p.local_rank,
                local_world_size=p.local_world_size, node_rank=p.node_rank,
                storage=spec.storage, trial_id=spec.trial_id, trial_name=spec.trial_name,
                trial_dir=spec.storage.run_path if spec.trial_id else None,
                metadata=spec.metadata,
            )
            task = WorkerTask(
                fn_bytes=spec.fn_bytes, config=spec.config, pass_config=spec.pass_config,
                context=tctx, checkpoint_path=ckpt_path, start_iteration=start_it,
                time_offset_s=self._time_offset_s, backend=spec.backend, backend_env=envs[rank],
                dataset_shards={k: v[rank] for k, v in shards.items() if k not in by_ray},
                log_files=self._log_files(),
            )
            tasks.append(cloudpickle.dumps(task))
            specs.append(WorkerSpec(
                worker_id=f"{ctx.job_id}-a{attempt}-r{rank}", bundle_index=p.bundle_index,
                log_path=self.storage.log_path(rank),
                preload=self._preload(),
                reuse_key=spec.reuse_key,
                **self._runtime_env(),
                objects={"dataset_shards": {k: shards[k][rank] for k in by_ray}} if by_ray else {},
            ))
        q = self._q
        ranks = {s.worker_id: i for i, s in enumerate(specs)}
        direct = self._direct = self._direct_calls()
        with self._direct_lock:
            self._direct_open, self._direct_pending = False, 0

        def sink(worker: WorkerProcess, frame: object) -> None:
            try:
                decoded = decode_worker_frame(frame)
            except ValueError as e:
                logger.warning("worker %s: dropped a frame: %s", worker.worker_id, e)
                return
            if direct is not None:
                self._sink_direct(direct, (attempt, ranks[worker.worker_id], decoded),
                                  worker.worker_id)
            else:
                q.put((attempt, ranks[worker.worker_id], decoded))

        self._start_echo()
        self._workers = ctx.cluster.start_workers(placement, specs, tasks, sink)
        if direct is not None:
            with self._direct_lock:  # frames that came before this wait in the queue
                self._direct_open = self._direct_pending == 0 and bool(self._workers)

    def _runtime_env(self) -> dict[str, Any]:
        """``WorkerSpec`` fields for a job's runtime_env (train server jobs only)."""
        spec = self.spec
        if spec.working_dir is None and not spec.env_vars:
            return {}
        env = dict(spec.env_vars)
        if spec.working_dir is not None:
            env["TANDEM_WORKING_DIR"] = spec.working_dir
        return {"env": env, "cwd": spec.working_dir}

    def _hold_local_ray(self, ctx: JobContext) -> ConfigError | None:
        """A ``ray.data.Dataset`` on a cluster that is not Ray: Ray Data runs on the driver's
        Ray instance (started here when there is none), held until the run ends."""
        if ctx.cluster.supports_ray_objects or not any(
                data_mod.is_ray_dataset(d) for d in self.spec.datasets.values()):
            return None
        try:
            self._ray_endpoint = data_mod.LOCAL_RAY.acquire()
        except ConfigError as e:
            return e
        return None

    def _storage_refusal(self, placement: Placement) -> ConfigError | None:
        """A gang on several machines writes checkpoints from each of them: the run's
        storage must be shared (an fsspec URL, or a shared filesystem declared as such)."""
        spec = self.spec
        return storage_refusal(
            storage_path=spec.storage.storage_path, node_ips=placement.node_ips,
            run_name=spec.storage.run_name, num_workers=len(placement.node_ips),
            declared_shared=storage_is_shared_by_env(),
        )

    def _kill_gang(self, wait_s: float = 5.0, graceful: bool = False) -> None:
        """Kills every worker, then reads what they sent up to their end (their reports are
        real progress: a checkpoint they completed is committed), then retires the gang.

        ``graceful``: the workers are finishing on their own (the run succeeded); give
        them ``wait_s`` to end before killing the rest (a Ray actor cut off while it ends
        makes Ray print a "worker died" error)."""
        workers, self._workers = self._workers, []
        seen: dict[int, set[type]] = self._ends
        ended: set[type] = {StreamEnded, ProcessExited}

        def drain(deadline: float) -> None:
            while any(seen.get(r) != ended for r in range(len(workers))):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                try:
                    item = self._q.get(timeout=left)
                except queue.Empty:
                    return
                self._handle([item], seen)

        if graceful:
            drain(time.monotonic() + wait_s)
        for r, w in enumerate(workers):
            if seen.get(r) != ended:
                w.kill()
        drain(time.monotonic() + (1.0 if graceful else wait_s))
        self._attempt += 1  # frames from the old gang are ignored from now on
        self._ends = {}

    def _on_failure(self) -> tuple[TrainingFailedError | None, TrainControllerState]:
        """Settles the root cause, kills the gang, then acts on the failure policy's
        decision; returns the error (if the run ends with one) and the next state."""
        failure = self._settle_failure()
        self.num_failures += 1
        if self._user_callbacks and not self._stop_requested:
            self._after_exception()
        self._kill_gang()
        for path in self.checkpoints.drop_pending():
            if self.checkpoints.latest is None or path != self.checkpoints.latest[1].path:
                remove_dir(path)
        if self._stop_requested:
            return None, TrainControllerState.STOPPED
        ctx = self.ctx
        assert ctx is not None
        status = FailureStatus(
            self.num_failures, failure.rank, failure.message,
            placement_alive=ctx.cluster.placement_alive(ctx.placement),
        )
        decision = self.policy.make_decision(status)
        if decision is FailureDecision.RAISE:
            return self._raise(failure), TrainControllerState.ERRORED
        return self._restart(decision, failure)

    # -- elastic gangs ---------------------------------------------------------------------
    @property
    def _elastic(self) -> bool:
        m = self.spec.min_workers
        return m is not None and m < self.spec.num_workers

    def _step_timeout(self) -> float | None:
        """How long ``step`` may block: until the next look for room to grow."""
        if not self._elastic or (self._n >= self.spec.num_workers and self._grow_to is None):
            return None
        return max(0.01, self._next_resize_check - time.monotonic())

    def _maybe_resize(self) -> TrainControllerState:
        """An elastic gang below its most: every ``resize_interval_s`` it asks for room;
        with room it decides to grow (``elastic_target``), and does so at the next
        committed checkpoint: the gang is stopped there and a bigger one starts from that
        checkpoint (a new process group; data shards re-split by the new size)."""
        assert self.ctx is not None
        latest = self.checkpoints.latest
        at = latest[0] if latest else -1
        if self._grow_to is None:
            if self._n >= self.spec.num_workers or time.monotonic() < self._next_resize_check:
                return TrainControllerState.RUNNING
            self._next_resize_check = time.monotonic() + self.spec.resize_interval_s
            bundle = dict(self.ctx.placement.bundles[0]) if self.ctx.placement.bundles else {}
            spare = self.ctx.spare_bundles(bundle, self.spec.num_workers - self._n)
            target = elastic_target(self._n, self.spec.num_workers, spare)
            if target > self._n:
                self._grow_to = (target, at)
                logger.info("Run %s: room for %d more worker(s); grows from %d to %d at the "
                            "next checkpoint.", self.spec.storage.run_name, target - self._n,
                            self._n, target)
            return TrainControllerState.RUNNING
        target, decided_at = self._grow_to
        if at <= decided_at:
            return TrainControllerState.RUNNING  # wait for a checkpoint after the decision
        old = self._n
        self._kill_gang()
        for path in self.checkpoints.drop_pending():
            if self.checkpoints.latest is None or path != self.checkpoints.latest[1].path:
                remove_dir(path)
        self._stop_nested_jobs()
        self._lent_resources = False
        assert latest is not None
        self.ctx.set_status(JobStatus.RESTARTING,
                            f"elastic: growing from {old} to {target} workers at checkpoint "
                            f"{latest[1].path}")
        self.ctx.resize(target)
        if self._stop_requested:
            return TrainControllerState.STOPPED
        self._start_gang()
        self.ctx.set_status(JobStatus.RUNNING, f"elastic: {self._n} workers (were {old}), "
                                               f"resumed from checkpoint {latest[1].path}")
        return TrainControllerState.RUNNING

    # -- preemption ------------------------------------------------------------------------
    def _preemption_info(self, request: PreemptionRequest) -> PreemptionInfo:
        assert self.ctx is not None
        ranks: dict[str, list[int]] = {}
        for rank, node in enumerate(self.ctx.placement.node_ids[:self._n]):
            ranks.setdefault(node, []).append(rank)
        return PreemptionInfo(int(request.deadline * 1000), ranks, request.reason)

    def _on_preempt(self) -> tuple[TrainingFailedError | None, TrainControllerState]:
        """Carries out a preemption: the workers see ``get_preemption_info()`` until a new
        checkpoint is committed or the deadline (plus ``preemption_grace_s``) passes; then
        the gang is stopped, the job re-queued (``replace_placement``), and a new gang
        resumes from the latest checkpoint when the scheduler places it again. A run that
        ends meanwhile simply ends. Preemptions count against ``max_preemption_failures``,
        never ``max_failures``."""
        assert self._preemption is not None and self.ctx is not None
        request, info = self._preemption
        ctx = self.ctx
        latest = self.checkpoints.latest
        before = latest[0] if latest else -1
        deadline = request.deadline + self.policy.config.preemption_grace_s
        timed_out = True
        state = TrainControllerState.RUNNING
        while time.time() < deadline:
            state = self.step(timeout_s=min(0.25, max(0.01, deadline - time.time())))
            if state is not TrainControllerState.RUNNING:
                break
            latest = self.checkpoints.latest
            if latest is not None and latest[0] > before:
                timed_out = False
                break
        if state is TrainControllerState.FINISHED:
            self._preemption = None
            return None, state
        if state is TrainControllerState.STOPPED or self._stop_requested:
            return None, TrainControllerState.STOPPED
        self._kill_gang()  # a worker that failed while draining is part of the preemption
        for path in self.checkpoints.drop_pending():
            if self.checkpoints.latest is None or path != self.checkpoints.latest[1].path:
                remove_dir(path)
        self.num_preemptions += 1
        self._stop_nested_jobs()
        self._lent_resources = False
        name = self.spec.storage.run_name
        m = self.policy.config.max_preemption_failures
        if self.policy.make_preemption_decision(self.num_preemptions) is FailureDecision.RAISE:
            logger.error("Run %s: %s; decision %s (FailureConfig(max_preemption_failures=%d) "
                         "spent).", name, request.reason, FailureDecision.RAISE.value, m)
            return PreemptionError(info, timed_out, (
                f"Training was preempted {self.num_preemptions} time(s) and "
                f"FailureConfig(max_preemption_failures={m}) allows {m}: the last was "
                f"{request.reason}. Raise max_preemption_failures (-1: no limit), or give the "
                f"run a higher priority (RunConfig(priority=...)). Run folder: "
                f"{self.spec.storage.run_path}")), TrainControllerState.ERRORED
        latest = self.checkpoints.latest
        resume = f"checkpoint {latest[1].path}" if latest else "the beginning (no checkpoint)"
        how = "stopped at the deadline" if timed_out else "checkpointed"
        logger.warning("Run %s: %s; %s, decision %s (preemption %d); waits in the queue to "
                       "resume from %s.", name, request.reason, how,
                       FailureDecision.RESCHEDULE.value, self.num_preemptions, resume)
        self.state = TrainControllerState.PREEMPTED
        # the job's status line (lists, dashboard) names the checkpoint's folder, not its path
        short = (f"checkpoint {os.path.basename(latest[1].path.rstrip('/'))}" if latest
                 else resume)
        ctx.set_status(JobStatus.RESTARTING,
                       f"{request.reason}; {how}; waits to resume from {short}")
        self._preemption = None
        if not ctx.replace_placement():
            return None, TrainControllerState.STOPPED
        refused = self._storage_refusal(ctx.placement)
        if refused is not None:
            return refused, TrainControllerState.ERRORED  # type: ignore[return-value]
        self._start_gang()
        ctx.set_status(JobStatus.RUNNING,
                       f"resumed from {resume} after preemption {self.num_preemptions}")
        return None, TrainControllerState.RUNNING

    def _settle_failure(self) -> _Failure:
        """Reads worker events a little longer (a peer's death may explain the first
        error seen), then picks the root cause."""
        deadline = time.monotonic() + _DEATH_GRACE_S
        while time.monotonic() < deadline and not any(
            f.kind == "died" and "killed by" in f.message for f in self._failures
        ) and not self._stop_requested:
            try:
                item = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            self._handle([item])
        return _root_cause(self._failures)

    def _restart(self, decision: FailureDecision,
                 failure: _Failure) -> tuple[TrainingFailedError | None, TrainControllerState]:
        """Carries out RETRY (same placement) or RESCHEDULE (a new placement after node
        loss): a new gang from the latest committed checkpoint."""
        ctx = self.ctx
        assert ctx is not None
        latest = self.checkpoints.latest
        resume = (f"its latest checkpoint ({latest[1].path})" if latest else "the beginning")
        logger.warning(
            "Run %s: %s failed (%s: %s); decision %s (failure %d, %s); "
            "restarting all %d workers from %s.",
            self.spec.storage.run_name, _where(failure), failure.exc_type, failure.message,
            decision.value, self.num_failures,
            self.spec.failure_setting.format(self.policy.config.max_failures),
            self._n, resume,
        )
        self.state = TrainControllerState.RESTARTING
        why = (f"{_where(failure)} failed ({failure.exc_type}: "
               f"{str(failure.message).splitlines()[0] if failure.message else ''}); "
               f"failure {self.num_failures}, {decision.value}")
        ctx.set_status(JobStatus.RESTARTING, why)
        # The failed gang's nested jobs have no one waiting on them; the new gang lends
        # its resources again when it starts one (a lent Ray placement is gone: the
        # policy sees it dead and the job is placed anew).
        self._stop_nested_jobs()
        self._lent_resources = False
        if decision is FailureDecision.RESCHEDULE:
            self.state = TrainControllerState.RESCHEDULING
            logger.warning("Run %s: a node of its placement is gone; waiting for the "
                           "cluster to place %s again.", self.spec.storage.run_name,
                           f"as many workers as fit ({self.spec.min_workers} to "
                           f"{self.spec.num_workers})" if self._elastic
                           else f"all {self._n} workers")
            if not ctx.replace_placement():
                return None, TrainControllerState.STOPPED
            refused = self._storage_refusal(ctx.placement)
            if refused is not None:
                return refused, TrainControllerState.ERRORED  # type: ignore[return-value]
        self._start_gang()
        ctx.set_status(JobStatus.RUNNING,
                       f"all {self._n} workers restarted from {resume}")
        return None, TrainControllerState.RUNNING

    def _raise(self, failure: _Failure) -> TrainingFailedError:
        """The error a run that the policy gave up on ends with."""
        where = _where(failure)
        m = self.policy.config.max_failures
        setting = self.spec.failure_setting.format(m)
        budget = (f"{setting}: no restarts allowed" if m == 0 else f"{setting} restarts spent")
        msg = (f"{where} {'raised' if failure.kind == 'error' else 'died:'} "
               f"{failure.exc_type}: {failure.message} "
               f"(failure {self.num_failures}; {budget}). Run folder: {self.spec.storage.run_path}")
        if failure.traceback:
            msg += f"\n\nWorker traceback ({where}):\n{failure.traceback.rstrip()}"
        cause = failure.cause if failure.cause is not None else RuntimeError(
            f"{failure.exc_type}: {failure.message}")
        error = WorkerGroupError(
            msg, {failure.rank if failure.rank is not None else -1: cause},
            rank=failure.rank, exc_type=failure.exc_type, exc_message=failure.message,
            worker_traceback=failure.traceback or None, cause=failure.cause,
            num_failures=self.num_failures,
        )
        if failure.cause is not None:
            error.__cause__ = failure.cause
        logger.error("Run %s: %s failed; decision %s (%s).", self.spec.storage.run_name, where,
                     FailureDecision.RAISE.value, budget)
        return error

    def _stop_nested_jobs(self) -> None:
        if self.ctx is not None:
            for job_id in self._nested_jobs:
                try:
                    self.ctx.service.stop(job_id)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self._nested_jobs = []

    def _finish(self, state: TrainControllerState,
                error: TrainingFailedError | None) -> JobOutcome:
        self._stop_nested_jobs()  # nothing a job started outlives it
        self.state = state
        if state is TrainControllerState.FINISHED:
            self.checkpoints.commit_upto(10**12)  # ranks that reported unevenly: keep what's there
        if state is TrainControllerState.FINISHED:
            self._kill_gang(wait_s=5.0, graceful=True)
        else:
            self._kill_gang(wait_s=2.0)
        if self._validation is not None:
            if state is TrainControllerState.FINISHED:  # as Ray: the result waits for them
                self._apply_validations(self._validation.wait())
            else:
                self._validation.abort()
                self._apply_validations(self._validation.take_finished())
        if self._ray_endpoint is not None:  # the gang is gone: Ray Data's reader may go too
            self._ray_endpoint = None
            data_mod.LOCAL_RAY.release()
        storage = self.storage
        if storage is not None:
            if error is not None:
                storage.write_error(str(error))
            storage.close()
        latest = self.checkpoints.latest
        returned = ([_load_return(self._done.get(r)) for r in range(self._n)]
                    if state is TrainControllerState.FINISHED else None)
        result = Result(
            metrics=self.last_metrics,
            checkpoint=latest[1] if latest else None,
            path=self.spec.storage.run_path,
            error=error,
            best_checkpoints=self.checkpoints.best_checkpoints,
            config=self.spec.config if isinstance(self.spec.config, dict) else None,
            return_value=returned[0] if returned else None,
            return_values=returned,
        )
        self.callbacks.end(result)
        return JobOutcome(state.job_status, value=result, error=error)

    # -- echo ----------------------------------------------------------------------------
    def _start_echo(self) -> None:
        prefix = self.spec.echo_prefix
        if prefix is None or self._echo_keys:
            return
        assert self.storage is not None
        for rank in range(self.spec.num_workers):
            path = self.storage.log_path(rank)
            open(path, "a").close()
            self._echo_keys.append(ECHO.add(path, f"({prefix}rank={rank}) "))

    def _stop_echo(self) -> None:
        for key in self._echo_keys:
            ECHO.remove(key)
        self._echo_keys = []


def _death(code: int | None) -> tuple[str, str]:
    if code is None:
        return ("WorkerDiedError", "the worker process exited unexpectedly (connection lost)")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ("WorkerDiedError", f"the worker process was killed by {name}")
    return ("WorkerDiedError", f"the worker process exited with code {code} before finishing")


def _where(failure: _Failure) -> str:
    return f"rank {failure.rank}" if failure.rank is not None else "a worker"


def _root_cause(failures: list[_Failure]) -> _Failure:
    """A worker that died is the cause of its peers' collective errors, so it wins."""
    died = [f for f in failures if f.kind == "died" and "killed by" in f.message]
    if died:
        return died[0]
    errors = [f for f in failures if f.kind == "error"]
    if errors:
        return errors[0]
    return failures[0]


def _load_return(payload: bytes | None) -> object:
    if payload is None:
        return None
    try:
        return cloudpickle.loads(payload)
    except Exception as e:  # noqa: BLE001
        return e
