"""The 1.x ``Trainer``: ``start`` / ``run`` / ``run_iterator`` / ``shutdown``, on today's engine.

There is no second execution path: each ``run`` is one train job, described by a
``RunDescription`` and started with ``tandem.train.submit`` (the same
gang scheduling, checkpoints, failure handling and run folder as ``fit()``). What is
legacy is only the surface:

- ``run`` returns every worker's return value (rank order); ``run_iterator`` yields, per
  report, the list of every worker's report dict. Those come from the controller's
  ``("rank_reports", ...)`` job events (``RunSpec.emit_rank_reports``), which also
  reach a Trainer running inside a tuning trial; not from rank 0's published rows.
- Runs live in ``<logdir>/run_001``, ``run_002``, ...; a checkpoint passed to ``run`` is
  copied into the run folder as ``checkpoint_000000`` so the run never deletes the original.
- ``start()`` is cheap: workers start with each run (it warms the process they fork from).
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import logging
import os
import queue
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

import cloudpickle

from tandem._core.errors import ConfigError, JobStoppedError, TandemError
from tandem._core.ids import short_uid
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    RankReported,
    Reported,
    StatusChanged,
)
from tandem.jobs.handle import JobHandle
from tandem.jobs.runtime import get_service
from tandem.jobs.spec import JobSpec, JobStatus
from tandem.train._internal.worker import CHECKPOINT_ONLY
from tandem.train.api.checkpoint import Checkpoint, _is_url
from tandem.train.api.config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from tandem.train.api.files import join_path
from tandem.train.api.result import Result
from tandem.train.api.run import LegacyOptions, RunDescription, submit
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.api.validation import check_train_fn
from tandem.train.backends.base import Backend, BackendConfig
from tandem.train.context import StorageContext, TrainContext
from tandem.train.legacy import _checkpoint
from tandem.train.legacy._worker_group import (
    WorkerGroup,
    WorkerGroupRunner,
    start_worker_group,
)
from tandem.train.legacy.callbacks import TrainingCallback

logger = logging.getLogger(__name__)

_NOT_ACTIVE = "This Trainer is not active"


class TrainerStateError(TandemError, RuntimeError):
    """A ``Trainer`` method was called in a state that does not allow it (e.g. ``run``
    before ``start``)."""


# -- configuration ------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckpointStrategy:
    """Which checkpoints a run keeps (1.x API; today's ``CheckpointConfig``).

    Args:
        num_to_keep: how many checkpoints to keep on disk; None keeps all. The latest is
            always kept (a restart needs it), so 0 keeps just that one.
        checkpoint_score_attribute: a numeric key of the dict given to
            ``train.save_checkpoint`` that ranks checkpoints; the default ``"_timestamp"``
            ranks them by recency.
        checkpoint_score_order: ``"max"`` (higher is better) or ``"min"``.
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str = "_timestamp"
    checkpoint_score_order: str = "max"

    def __post_init__(self) -> None:
        k = self.num_to_keep
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise ConfigError(
                f"CheckpointStrategy(num_to_keep={k!r}) is invalid: use None (keep all) or an "
                f"integer >= 0."
            )
        if self.checkpoint_score_order not in ("max", "min"):
            raise ConfigError(
                f"CheckpointStrategy(checkpoint_score_order={self.checkpoint_score_order!r}) "
                f"is invalid: use 'max' or 'min'."
            )

    @property
    def score_attribute(self) -> str | None:
        attr = self.checkpoint_score_attribute
        return None if attr in (None, "_timestamp") else attr

    def to_checkpoint_config(self) -> CheckpointConfig:
        keep = None if self.num_to_keep is None else max(1, self.num_to_keep)
        return CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute=self.score_attribute,
                                checkpoint_score_order=self.checkpoint_score_order)


def _backend_config(backend: object) -> BackendConfig:
    if isinstance(backend, BackendConfig):
        return backend
    name = backend.lower() if isinstance(backend, str) else None
    if name == "torch":
        from tandem.train.backends.torch import TorchConfig

        return TorchConfig()
    if name == "tensorflow":
        from tandem.train.backends.tensorflow import TensorflowConfig, require_tensorflow

        require_tensorflow("Trainer(backend='tensorflow')")
        return TensorflowConfig()
    if name == "horovod":
        from tandem.train.backends.horovod import HorovodConfig

        return HorovodConfig()
    raise ConfigError(
        f"Trainer(backend={backend!r}) is not available: use 'torch', 'tensorflow', "
        f"'horovod' or a backend config object such as "
        f"tandem.train.torch.TorchConfig(backend='gloo')."
    )


class _HookedBackend(Backend):
    """A backend that runs the ``initialization_hook`` in each worker before its own setup."""

    def __init__(self, inner: Backend, hook: Callable[[], object] | None) -> None:
        self.inner = inner
        self.hook = hook
        self.preload = inner.preload

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return self.inner.worker_env(node_ips)

    def on_worker_start(self, context: TrainContext) -> None:
        if self.hook is not None:
            self.hook()
        self.inner.on_worker_start(context)

    def on_worker_shutdown(self, context: TrainContext) -> None:
        self.inner.on_worker_shutdown(context)


class _HookedBackendConfig(BackendConfig):
    def __init__(self, inner: BackendConfig, hook: Callable[[], object] | None) -> None:
        self.inner = inner
        self.hook = hook

    def backend(self) -> Backend:
        return _HookedBackend(self.inner.backend(), self.hook)


class _TrainFunc:
    """``train_func`` as the run's train function: called with the config if it takes one."""

    def __init__(self, fn: Callable[..., Any], pass_config: bool) -> None:
        self.fn = fn
        self.pass_config = pass_config
        self.__name__ = getattr(fn, "__name__", "train_func")

    def __call__(self, config: object) -> Any:
        return self.fn(config) if self.pass_config else self.fn()


def _datasets(dataset: object) -> dict[str, object]:
    if dataset is None:
        return {}
    if isinstance(dataset, Mapping):
        return dict(dataset)
    return {"train": dataset}


# -- gathering every rank's reports -------------------------------------------------------
class _ReportGatherer:
    """Turns every rank's report batches into one list per report (rank order).

    ``on_reports`` and ``on_event`` run on the job's thread; the caller reads ``out``.
    Checkpoint-only reports (``save_checkpoint``) are not results. After a restart the
    incomplete step is dropped: the workers report it again from the checkpoint.
    """

    def __init__(self, num_workers: int) -> None:
        self.n = num_workers
        self.pending: list[collections.deque] = [collections.deque() for _ in range(num_workers)]
        self.last_t = [0.0] * num_workers
        self.count = 0
        self.out: queue.SimpleQueue = queue.SimpleQueue()

    def on_reports(self, rank: int, batch: list) -> None:
        try:
            pending = self.pending[rank]
            for _it, t, metrics, _path in batch:
                if CHECKPOINT_ONLY in metrics:
                    continue
                pending.append((metrics, max(0.0, t - self.last_t[rank])))
                self.last_t[rank] = t
            while all(self.pending):
                self.count += 1
                now = int(time.time())
                results = []
                for q in self.pending:
                    metrics, dt = q.popleft()
                    d = dict(metrics)
                    d.setdefault("_timestamp", now)
                    d.setdefault("_time_this_iter_s", dt)
                    d.setdefault("_training_iteration", self.count)
                    results.append(d)
                self.out.put(("results", results))
        except Exception:  # must never break the controller
            logger.exception("gathering the workers' reports failed")

    def on_event(self, event: JobEvent) -> None:
        match event:
            case RankReported(rank=rank, batch=batch):
                self.on_reports(rank, batch)
            case StatusChanged(status=JobStatus.RESTARTING):
                for q in self.pending:
                    q.clear()
            case StatusChanged(status=status) if status.is_terminal:
                self.out.put(("end", None))
            case Asked(call=call):
                call.answer_default()  # this run asks its submitter nothing
            case StatusChanged() | Reported() | Checkpointed():
                pass
            case _:
                assert_never(event)


# -- the iterator -------------------------------------------------------------------------
class TrainingIterator:
    """What ``Trainer.run_iterator`` returns: yields, for every report, the list of every
    worker's report dict (rank order); then ``get_final_results()`` gives their return values.

    Each dict also holds ``_training_iteration``, ``_timestamp`` and ``_time_this_iter_s``.
    """

    def __init__(self, trainer: Trainer, handle: JobHandle, gatherer: _ReportGatherer,
                 strategy: CheckpointStrategy) -> None:
        self._trainer = trainer
        self._job = handle.job
        self._handle = handle
        self._gatherer = gatherer
        self._strategy = strategy
        self._finished = False
        self._final: list[Any] | None = None

    @property
    def job_id(self) -> str:
        return self._handle.job_id

    def __iter__(self) -> Iterator[list[dict]]:
        return self

    def __next__(self) -> list[dict]:
        if self._finished:
            raise StopIteration
        try:
            kind, payload = self._gatherer.out.get()
        except KeyboardInterrupt:
            self.stop()
            raise
        if kind == "results":
            return payload
        self._finish()
        raise StopIteration

    def _finish(self) -> None:
        self._finished = True
        try:
            self._handle.wait()
            error: BaseException | None = None
        except BaseException as e:  # noqa: BLE001 - re-raised below, after bookkeeping
            error = e
        outcome = self._job.outcome
        result = outcome.value if outcome is not None else None
        self._trainer._on_run_end(self, result)
        if error is not None:
            raise error
        if outcome is not None and outcome.status is JobStatus.STOPPED:
            raise JobStoppedError(
                f"The run {self._job.name} was stopped before it finished (Trainer.shutdown(), "
                f"tandem.shutdown() or a job stop)."
            )
        self._final = result.return_values if isinstance(result, Result) else None

    def stop(self) -> None:
        """Stops the run (its workers are killed)."""
        if not self._finished:
            self._handle.stop()
            with contextlib.suppress(BaseException):  # its outcome is read by _finish
                self._handle.wait(timeout=30)

    def is_finished(self) -> bool:
        """Whether every result was consumed and the run has ended."""
        return self._finished

    def get_final_results(self, force: bool = False) -> list[Any] | None:
        """Each worker's return value (rank order).

        Before the iterator is exhausted this returns None, unless ``force=True``: then it
        skips the remaining results, waits for the run to end, and returns them.

        Raises:
            TrainingFailedError: the run failed (``force=True``, or when iterating).
        """
        if not self._finished:
            if not force:
                logger.info("Finish iterating over the intermediate results before calling "
                            "get_final_results(), or call get_final_results(force=True).")
                return None
            for _ in self:
                pass
        return self._final


# -- the Trainer --------------------------------------------------------------------------
class Trainer:
    """The 1.x trainer API: run a function on ``num_workers`` workers, again and again.

    Args:
        backend: ``"torch"``, ``"tensorflow"`` (``TF_CONFIG`` per worker), ``"horovod"``, or
            a backend config object (e.g. ``TorchConfig(backend="gloo")``).
        num_workers: workers per run.
        use_gpu: one GPU per worker.
        resources_per_worker: e.g. ``{"CPU": 2, "GPU": 1}`` (overrides the defaults).
        logdir: the folder runs go into (``run_001``, ``run_002``, ...). A relative path is
            taken under the default storage path (``~/tandem_results`` or
            ``$TANDEM_STORAGE_PATH``); default ``train_<date>_<time>_<id>`` there.
        max_retries: restarts after a worker failure, from the latest checkpoint (-1: no limit).
    """

    def __init__(
        self,
        backend: Any,
        num_workers: int,
        use_gpu: bool = False,
        resources_per_worker: Mapping[str, float] | None = None,
        logdir: str | os.PathLike | None = None,
        max_retries: int = 3,
    ) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ConfigError(
                f"Trainer(num_workers={num_workers!r}) is invalid: use an integer >= 1."
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < -1:
            raise ConfigError(
                f"Trainer(max_retries={max_retries!r}) is invalid: use 0 (never retry), a "
                f"positive number of retries, or -1 (retry forever)."
            )
        if resources_per_worker is not None:
            gpus = resources_per_worker.get("GPU", int(use_gpu)) if isinstance(
                resources_per_worker, Mapping) else 0
            if not use_gpu and gpus:
                raise ConfigError(
                    "Trainer(use_gpu=False) but 'GPU' was found in resources_per_worker. "
                    "Either set use_gpu=True or remove 'GPU' from resources_per_worker."
                )
            if use_gpu and not gpus:
                raise ConfigError(
                    "Trainer(use_gpu=True) but 'GPU' is set to 0 in resources_per_worker. "
                    "Either set use_gpu=False or request a positive number of 'GPU'."
                )
        self._backend_config = _backend_config(backend)
        self._scaling = ScalingConfig(num_workers=num_workers, use_gpu=use_gpu,
                                      resources_per_worker=resources_per_worker)
        self._max_retries = max_retries
        self._logdir = _resolve_logdir(logdir)
        if not _is_url(self._logdir):
            os.makedirs(self._logdir, exist_ok=True)
        self._state = "created"  # -> "started" -> "shutdown" (-> "started" again)
        self._init_hook: Callable[[], object] | None = None
        self._run_id = 0
        self._group_id = 0
        self._latest_run_dir: str | None = None
        self._latest_result: Result | None = None
        self._latest_strategy = CheckpointStrategy()
        self._ckpt_cache: tuple[str, Any] | None = None
        self._active: TrainingIterator | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, initialization_hook: Callable[[], object] | None = None) -> None:
        """Makes the Trainer ready to ``run``. Workers start with each run; this only warms up
        the process they are forked from.

        Args:
            initialization_hook: called with no arguments in each worker before the
                backend is set up (e.g. to set environment variables), before every run.
        """
        if initialization_hook is not None and not callable(initialization_hook):
            raise ConfigError(
                f"Trainer.start(initialization_hook={initialization_hook!r}): give a function "
                f"taking no arguments."
            )
        self._init_hook = initialization_hook
        self._state = "started"
        preload = self._backend_config.backend().preload
        cluster = get_service().cluster
        if preload and cluster is not None:
            cluster.prewarm(preload)

    def shutdown(self) -> None:
        """Stops a run still being iterated, and makes the Trainer inactive. Safe to call twice."""
        active, self._active = self._active, None
        if active is not None and not active.is_finished():
            active.stop()
        if self._state == "started":
            self._state = "shutdown"

    def _check_active(self, method: str) -> None:
        if self._state == "created":
            raise TrainerStateError(
                f"Trainer.start() must be called before {method}(). {_NOT_ACTIVE}: it was "
                f"never started. Call trainer.start() first."
            )
        if self._state == "shutdown":
            raise TrainerStateError(
                f"{_NOT_ACTIVE}: it has been shut down, so {method}() cannot run. Create a new "
                f"Trainer, or call trainer.start() again."
            )

    # -- running -----------------------------------------------------------------------
    def run(
        self,
        train_func: Callable[..., object],
        config: Mapping[str, object] | None = None,
        callbacks: Sequence[TrainingCallback] | None = None,
        dataset: object = None,
        checkpoint: object = None,
        checkpoint_strategy: CheckpointStrategy | None = None,
    ) -> list[Any]:
        """Runs ``train_func`` on every worker and returns their return values (rank order).

        Args:
            train_func: ``def train_func()`` or ``def train_func(config)``.
            config: passed to ``train_func``.
            callbacks: ``TrainingCallback`` objects (``start_training``, ``handle_result``,
                ``finish_training``), called on this thread.
            dataset: data split by rank (``train.get_dataset_shard()``), or a dict of them.
            checkpoint: a dict (e.g. ``trainer.latest_checkpoint``), a checkpoint directory
                or a checkpoint file, for ``train.load_checkpoint()``.
            checkpoint_strategy: which checkpoints to keep.

        Raises:
            TrainerStateError: ``start()`` was not called, or the Trainer was shut down.
            TrainingFailedError: a worker failed ``max_retries + 1`` times.
        """
        self._check_active("run")
        callbacks = _training_callbacks(callbacks)
        started: list[TrainingCallback] = []

        def start_callbacks(run_dir: str) -> None:
            for cb in callbacks:
                cb.start_training(logdir=run_dir, config=dict(config or {}))
                started.append(cb)

        iterator: TrainingIterator | None = None
        failed = False
        try:
            iterator = self._start(train_func, config, dataset, checkpoint, checkpoint_strategy,
                                   before_submit=start_callbacks)
            for results in iterator:
                for cb in callbacks:
                    cb.process_results(results)
            return iterator.get_final_results() or []
        except BaseException:
            failed = True
            if iterator is not None:
                iterator.stop()
            raise
        finally:
            for cb in started:
                cb.finish_training(error=failed)

    def run_iterator(
        self,
        train_func: Callable[..., object],
        config: Mapping[str, object] | None = None,
        dataset: object = None,
        checkpoint: object = None,
        checkpoint_strategy: CheckpointStrategy | None = None,
    ) -> TrainingIterator:
        """Starts ``train_func`` on every worker and returns an iterator over its reports:
        each item is the list of every worker's report dict for one step (rank order).

        Raises:
            TrainerStateError: ``start()`` was not called, or the Trainer was shut down.
        """
        self._check_active("run_iterator")
        return self._start(train_func, config, dataset, checkpoint, checkpoint_strategy)

    def _start(self, train_func: Callable[..., object], config: Mapping[str, object] | None,
               dataset: object, checkpoint: object, strategy: CheckpointStrategy | None,
               before_submit: Callable[[str], object] | None = None) -> TrainingIterator:
        if self._active is not None and not self._active.is_finished():
            raise TrainerStateError(
                "A run started with run_iterator() is still going: iterate it to the end, or "
                "call its get_final_results(force=True), before starting another run."
            )
        pass_config = check_train_fn(train_func, "train_func")
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"Trainer.run(config=...) takes a dict, got {type(config).__name__}.")
        if strategy is None:
            strategy = CheckpointStrategy()
        elif not isinstance(strategy, CheckpointStrategy):
            raise ConfigError(
                f"checkpoint_strategy must be a tandem.train.CheckpointStrategy, got "
                f"{type(strategy).__name__}."
            )
        run_name = self._next_run_name()
        run_dir = _join(self._logdir, run_name)
        self._latest_run_dir = run_dir
        self._latest_result = None
        self._ckpt_cache = None
        self._latest_strategy = strategy
        if _is_url(run_dir):
            resume = _checkpoint.materialize(checkpoint, _checkpoint.new_local_dir())
        else:
            resume = _checkpoint.materialize(checkpoint, os.path.join(run_dir, "checkpoint_000000"))
        run = RunDescription(
            train_fn=_TrainFunc(train_func, pass_config),
            config=dict(config or {}),
            backend_config=_HookedBackendConfig(self._backend_config, self._init_hook),
            scaling_config=self._scaling,
            run_config=RunConfig(
                name=run_name, storage_path=self._logdir,
                failure_config=FailureConfig(max_failures=self._max_retries),
                checkpoint_config=strategy.to_checkpoint_config(),
            ),
            datasets=_datasets(dataset),
            resume_from_checkpoint=resume,
            trainer_name="Trainer",
            storage=StorageContext(self._logdir, run_name),
            legacy=LegacyOptions(report_all_ranks=True, failure_setting="Trainer(max_retries={})"),
        )
        gatherer = _ReportGatherer(self._scaling.max_workers)
        if before_submit is not None:
            before_submit(run_dir)
        handle = submit(run, listener=gatherer.on_event)
        iterator = TrainingIterator(self, handle, gatherer, strategy)
        self._active = iterator
        return iterator

    def _on_run_end(self, iterator: TrainingIterator, result: Result | None) -> None:
        if self._active is iterator:
            self._active = None
        self._latest_result = result
        self._ckpt_cache = None

    def _next_run_name(self) -> str:
        while True:
            self._run_id += 1
            name = f"run_{self._run_id:03d}"
            if _is_url(self._logdir) or not os.path.exists(os.path.join(self._logdir, name)):
                return name

    # -- results -----------------------------------------------------------------------
    @property
    def logdir(self) -> Path | str:
        """The folder the runs go into."""
        return _as_path(self._logdir)

    @property
    def latest_run_dir(self) -> Path | str | None:
        """The folder of the latest run (``<logdir>/run_NNN``), or None before the first run."""
        return _as_path(self._latest_run_dir) if self._latest_run_dir else None

    @property
    def latest_checkpoint_dir(self) -> Path | str | None:
        """The folder the latest run's checkpoints are in (its run folder: each checkpoint is
        a ``checkpoint_NNNNNN`` folder there), or None before the first run."""
        return self.latest_run_dir

    @property
    def latest_checkpoint(self) -> dict[str, Any] | Checkpoint | None:
        """The latest run's latest checkpoint as the dict given to ``train.save_checkpoint``
        (a ``Checkpoint`` if it was reported with ``train.report(..., checkpoint=...)``), or
        None. Pass it to the next ``run(checkpoint=...)`` to continue from it."""
        result = self._latest_result
        if result is None or result.checkpoint is None:
            return None
        path = result.checkpoint.path
        if self._ckpt_cache is None or self._ckpt_cache[0] != path:
            state = _checkpoint.read_dict(result.checkpoint)
            self._ckpt_cache = (path, state if state is not None else result.checkpoint)
        return self._ckpt_cache[1]

    @property
    def best_checkpoint_path(self) -> Path | str | None:
        """The folder of the latest run's best checkpoint by its ``CheckpointStrategy`` (the
        most recent one by default), or None if it saved none."""
        result = self._latest_result
        if result is None or result.checkpoint is None:
            return None
        attr = self._latest_strategy.score_attribute
        best = result.checkpoint
        if attr is not None:
            scored = [(m[attr], c) for c, m in result.best_checkpoints
                      if isinstance(m.get(attr), (int, float))]
            if scored:
                pick = max if self._latest_strategy.checkpoint_score_order == "max" else min
                best = pick(scored, key=lambda s: s[0])[1]
        return _as_path(best.path)

    # -- other shapes --------------------------------------------------------------------
    def to_tune_trainable(self, train_func: Callable[..., object],
                          dataset: object = None) -> Callable[[dict], Any]:
        """A function trainable ``f(config)`` for the Tuner: each trial runs ``train_func`` on
        this Trainer's workers (a nested train job) and reports rank 0's metrics to Tune.

        Raises:
            ValueError: the Trainer was started (use a Trainer that is not started).
        """
        if self._state == "started":
            raise TrainerStateError(
                "The Trainer must not be active to use to_tune_trainable(). Either shut the "
                "Trainer down or don't start it in the first place."
            )
        pass_config = check_train_fn(train_func, "train_func")
        fn = _TrainFunc(train_func, pass_config)
        backend_config = self._backend_config
        scaling = self._scaling
        max_retries = self._max_retries
        logdir = self._logdir
        datasets = _datasets(dataset)

        def tune_function(config: dict) -> None:
            # A trial runs in a train worker: its reports are train.report's (tune.report
            # is the same function), so nothing of the tune layer is needed here.
            from tandem.train.session import get_context, report

            ctx = get_context()
            name = ctx.get_trial_name() or f"tune_{short_uid(6)}"
            trainer = DataParallelTrainer(
                fn, train_loop_config=dict(config or {}), backend_config=backend_config,
                scaling_config=scaling, datasets=datasets,
                run_config=RunConfig(name=name, storage_path=logdir,
                                     failure_config=FailureConfig(max_failures=max_retries)),
            )
            handle = submit(trainer.run_description())
            for row in handle.results():
                metrics = {k: v for k, v in row.items()
                           if k not in ("training_iteration", "time_total_s")}
                report(metrics)
            handle.wait()

        tune_function.__name__ = getattr(train_func, "__name__", "train_func")
        tune_function.__qualname__ = tune_function.__name__
        return tune_function

    def to_worker_group(self, train_cls: type, *args: object, **kwargs: object) -> WorkerGroup:
        """Starts ``num_workers`` workers with the backend set up (e.g. a torch process group),
        each holding ``train_cls(*args, **kwargs)``, and returns them as a ``WorkerGroup``.

        Raises:
            TrainerStateError: the Trainer was started.
            WorkerGroupError: a worker could not set up the backend or build the instance.
        """
        if self._state == "started":
            raise TrainerStateError(
                "The Trainer must not be active to use to_worker_group(). After calling "
                "to_worker_group(), you must not call any other Trainer methods: use a "
                "Trainer that was not started."
            )
        if not isinstance(train_cls, type):
            raise ConfigError(
                f"to_worker_group(train_cls=...) takes a class, got {type(train_cls).__name__}."
            )
        try:
            cls_bytes = cloudpickle.dumps((train_cls, args, kwargs))
        except Exception as e:
            raise ConfigError(
                f"to_worker_group({train_cls.__name__}, ...): the class or its arguments cannot "
                f"be sent to the workers: {type(e).__name__}: {e}."
            ) from e
        self._group_id += 1
        name = f"worker_group_{self._group_id:03d}"
        log_root = self._logdir if not _is_url(self._logdir) else tempfile.mkdtemp(
            prefix="tandem-group-")
        runner = WorkerGroupRunner(cls_bytes, self._backend_config.backend(),
                                   os.path.join(log_root, name, "logs"))
        spec = JobSpec(name=name, bundles=self._scaling.bundles, runner=runner,
                       strategy=self._scaling.placement_strategy,
                       metadata={"trainer": "Trainer.to_worker_group", "class": train_cls.__name__})
        service = get_service()
        return start_worker_group(runner, lambda: JobHandle(service.submit(spec)),
                                  self._scaling.max_workers)

    def __repr__(self) -> str:
        return (f"Trainer(backend={self._backend_config!r}, num_workers={self._scaling.num_workers}, "
                f"logdir={self._logdir!r})")


def _training_callbacks(callbacks: Sequence[object] | None) -> list[TrainingCallback]:
    out: list[TrainingCallback] = []
    for cb in callbacks or []:
        if not isinstance(cb, TrainingCallback):
            raise ConfigError(
                f"Trainer.run(callbacks=[...]) got {type(cb).__name__} {cb!r:.60}, which is not "
                f"a TrainingCallback: subclass tandem.train.legacy.callbacks.TrainingCallback "
                f"and override start_training / handle_result / finish_training."
            )
        out.append(cb)
    return out


def _resolve_logdir(logdir: str | os.PathLike | None) -> str:
    base = RunConfig().resolved_storage_path()
    if logdir is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        return _join(base, f"train_{stamp}_{short_uid(4)}")
    path = os.fspath(logdir)
    if _is_url(path):
        return path.rstrip("/")
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = _join(base, path)
    return os.path.abspath(path) if not _is_url(path) else path


_join = join_path


def _as_path(path: str) -> Path | str:
    return path if _is_url(path) else Path(path)
