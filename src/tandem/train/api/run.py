"""``RunDescription`` and ``submit``: the one public way to start a training run.

Everything that starts a run goes through here: ``DataParallelTrainer.fit()``, every
``Tuner`` trial, the 1.x ``Trainer``'s ``run`` / ``run_iterator``, and the model layer.
A caller with a per-worker function, a config, a ``ScalingConfig``, a ``RunConfig`` and
datasets describes the run once, submits it, and gets a ``JobHandle`` whose ``wait()``
returns the run's ``Result``::

    from tandem import train

    run = train.RunDescription(
        train_fn=train_loop,                 # def train_loop(config): ... train.report(...)
        config={"lr": 1e-3},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="my-run"),
        datasets={"train": data},
    )
    handle = train.submit(run)               # returns at once
    result = handle.wait()                   # a train.Result
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError
from tandem._core.ids import short_uid
from tandem._core.records import record
from tandem.jobs.events import JobListener
from tandem.jobs.handle import JobHandle
from tandem.jobs.runtime import get_service, job_defaults, log_to_driver
from tandem.jobs.spec import JobSpec
from tandem.train._internal.controller import RunSpec, TrainController
from tandem.train._internal.run_context import HAS_VALIDATION
from tandem.train._internal.validation import ValidationPlan
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import DataConfig, RunConfig, ScalingConfig
from tandem.train.api.validation import check_train_fn
from tandem.train.backends.base import BackendConfig
from tandem.train.context import AskSubmitter, StorageContext
from tandem.train.v2.api.validation_config import ValidationConfig

__all__ = ["AskSubmitter", "LegacyOptions", "RunDescription", "TrialContext", "submit"]


@record
class TrialContext:
    """Where a run sits in a tuning experiment (``RunDescription(trial=...)``).

    Args:
        trial_id, trial_name: the trial's (``train.get_context()`` then reports them;
            ``tune.get_context()`` too).
        start_iteration, time_offset_s: where ``training_iteration`` and ``time_total_s``
            continue from (a trial resumed after a pause or an exploit).
        reuse_key: set, a worker process whose task ended well may run the next worker of
            a run with the same key and resource shape (``TuneConfig(reuse_actors=True)``).
        result_files: whether the run writes ``params.json``, ``result.json`` and
            ``progress.csv`` itself; a Tuner passes False: its logger callbacks
            (``tandem.tune.logger``) write them, appending when a trial starts again.
    """

    trial_id: str
    trial_name: str
    start_iteration: int = 0
    time_offset_s: float = 0.0
    reuse_key: str | None = None
    result_files: bool = True


@record
class LegacyOptions:
    """What a run of the 1.x ``Trainer`` API does differently (``RunDescription(legacy=...)``).

    Args:
        report_all_ranks: also publish every rank's reports as ``RankReported`` events to
            the listener (the 1.x ``Trainer`` gathers them).
        failure_setting: how error messages name the restart budget, with ``{}`` for its
            value (``Trainer(max_retries={})``).
    """

    report_all_ranks: bool = True
    failure_setting: str = "Trainer(max_retries={})"


_PLAIN_FAILURE_SETTING = "FailureConfig(max_failures={})"


@record
class RunDescription:
    """Everything about one training run, frozen: what runs, on how many workers, where its
    results go. Build one and pass it to ``tandem.train.submit``; derive variants with
    ``dataclasses.replace`` (a tuning trial is its Trainer's description with the trial's
    config).

    Args:
        train_fn: the per-worker function, ``def f(config)``, ``def f()`` or
            ``async def f(config)``; it calls ``train.report`` (it must pickle with
            cloudpickle: it is sent to the worker processes).
        config: passed to ``train_fn`` (``train_loop_config``); None means ``{}``.
        scaling_config: the gang: how many workers, with which resources each.
        run_config: name, storage path, failure and checkpoint policy, callbacks.
        datasets: ``name -> data``; each worker gets its shard with
            ``train.get_dataset_shard(name)``.
        backend_config: sets up the workers' communication (``TorchConfig()`` for a torch
            process group); None sets up nothing.
        resume_from_checkpoint: the run starts from it (``train.get_checkpoint()``).
        metadata: free-form values the workers see through ``train.get_context()``.
        trainer_name: who built the run; the default run name starts with it and the job
            records it (``"DataParallelTrainer"``, ``"TorchTrainer"``, a model class...).
        storage: the exact run folder (``StorageContext``); None: ``run_config.storage_path``
            / ``run_config.name`` (default ``<trainer_name>_<date>_<time>_<id>``).
        trial: set when the run is a tuning trial (a ``TrialContext``: its id and name,
            the counters it continues from, process reuse); None for a plain run.
        priority: the job's priority in the queue (higher starts first).
        tags: labels recorded with the job (``tandem jobs list`` shows them on a server).
        echo_prefix: workers' output is echoed to this process prefixed with
            ``(<echo_prefix>rank=N)``; None echoes nothing (``RunConfig(verbose=0)`` too).
        preload: extra modules the worker processes import once, up front.
        call_handlers: ``name -> handler(controller, rank, payload, reply)``: calls the
            workers may make to the driver; or ``name -> AskSubmitter(kind, default)``: a
            call the run's submitter answers (the tuner's ``tune_verdict``), also when the
            run goes to a train server.
        dataset_config: a ``DataConfig``: the datasets not in its ``datasets_to_split``
            reach every worker whole.
        legacy: what a run of the 1.x ``Trainer`` API does differently (a
            ``LegacyOptions``); None for every other run.
        validation_config: a ``ValidationConfig``: checkpoints reported with
            ``train.report(..., validation=...)`` are validated by its function once
            committed, and its metrics merged into theirs.
    """

    train_fn: Callable[..., Any]
    config: Mapping[str, Any] | None = None
    scaling_config: ScalingConfig = field(default_factory=ScalingConfig)
    run_config: RunConfig = field(default_factory=RunConfig)
    datasets: Mapping[str, Any] = field(default_factory=dict)
    backend_config: BackendConfig | None = None
    resume_from_checkpoint: Checkpoint | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    trainer_name: str = "DataParallelTrainer"
    storage: StorageContext | None = None
    trial: TrialContext | None = None
    priority: int = 0
    tags: tuple[str, ...] = ()
    echo_prefix: str | None = ""
    preload: tuple[str, ...] = ()
    call_handlers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    dataset_config: DataConfig | None = None
    legacy: LegacyOptions | None = None
    validation_config: ValidationConfig | None = None
    _takes_config: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        takes_config = check_train_fn(self.train_fn, "RunDescription(train_fn=...)")
        object.__setattr__(self, "_takes_config", takes_config)
        checks: tuple[tuple[Any, type, str], ...] = (
            (self.scaling_config, ScalingConfig, "scaling_config"),
            (self.run_config, RunConfig, "run_config"),
        )
        if self.trial is not None:
            checks += ((self.trial, TrialContext, "trial"),)
        if self.legacy is not None:
            checks += ((self.legacy, LegacyOptions, "legacy"),)
        for value, cls, name in checks:
            if not isinstance(value, cls):
                raise ConfigError(
                    f"RunDescription({name}=...) must be a tandem.train.{cls.__name__}, got "
                    f"{type(value).__name__}."
                )
        if self.config is not None and not isinstance(self.config, Mapping):
            raise ConfigError(
                f"RunDescription(config=...) must be a dict (the train function's config), "
                f"got {type(self.config).__name__}."
            )
        if not isinstance(self.datasets, Mapping):
            raise ConfigError(
                f"RunDescription(datasets=...) must be a dict of name -> data, e.g. "
                f"{{'train': data}}; got {type(self.datasets).__name__}."
            )
        if self.backend_config is not None and not isinstance(self.backend_config, BackendConfig):
            raise ConfigError(
                f"RunDescription(backend_config=...) must be a BackendConfig (e.g. "
                f"TorchConfig()), got {type(self.backend_config).__name__}."
            )
        if self.resume_from_checkpoint is not None and not isinstance(
            self.resume_from_checkpoint, Checkpoint
        ):
            raise ConfigError(
                f"RunDescription(resume_from_checkpoint=...) must be a Checkpoint, got "
                f"{type(self.resume_from_checkpoint).__name__}; wrap a folder with "
                f"Checkpoint.from_directory(path)."
            )

    def run_storage(self) -> StorageContext:
        """Where this run's folder is: ``storage`` if given, else from ``run_config`` (a
        fresh default name on each call when ``run_config.name`` is None)."""
        if self.storage is not None:
            return self.storage
        rc = self.run_config
        name = rc.name
        if name is None:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            name = f"{self.trainer_name}_{stamp}_{short_uid(4)}"
        return StorageContext(rc.resolved_storage_path(), name)


def pickle_train_fn(fn: Callable[..., object]) -> bytes:
    """``fn`` as the workers receive it (cloudpickle, by value where it must be)."""
    data: bytes = cloudpickle.dumps(fn)
    return data


def submit(
    run: RunDescription, *, listener: JobListener | None = None
) -> JobHandle:
    """Submits a run to the job service and returns its ``JobHandle`` at once.

    The service is the process-wide one (``tandem.jobs.get_service()``): the embedded
    service, the train server when an address is configured, or (inside a worker) the
    driver's. ``handle.results()`` yields rank 0's reports as they arrive;
    ``handle.wait()`` returns the run's ``Result`` or raises ``TrainingFailedError``.

    Args:
        run: what to run.
        listener: called as ``listener(event)`` in this process for each of the job's
            events (a ``tandem.jobs.events.JobEvent``: ``StatusChanged(status)``,
            ``Reported(rows)``, ``Checkpointed(iteration, checkpoint, metrics)``, ...) on
            the job's thread; it must return quickly.

    Raises:
        ConfigError: the train function (or something it refers to) cannot be pickled; a
            callback refuses the run (``Callback.check_run``).
        ResourcesUnavailableError: the gang could never fit on the cluster.
    """
    if not isinstance(run, RunDescription):
        raise ConfigError(
            f"tandem.train.submit() takes a tandem.train.RunDescription, got "
            f"{type(run).__name__}; describe the run with RunDescription(train_fn=..., ...)."
        )
    for cb in run.run_config.callbacks or ():
        cb.check_run()  # a callback may refuse a run before anything is queued
    spec = job_spec(run, listener=listener)
    return JobHandle(get_service().submit(spec))


def job_spec(
    run: RunDescription,
    *,
    listener: JobListener | None = None,
    fn_bytes: bytes | None = None,
) -> JobSpec:
    """The job that carries out ``run`` (its gang and its ``TrainController``).

    ``fn_bytes``: ``run.train_fn`` already pickled with cloudpickle (a tuner pickles its
    trainable once for every trial of an experiment)."""
    run.scaling_config.check_resolved()
    storage = run.run_storage()
    try:
        if fn_bytes is None:
            fn_bytes = pickle_train_fn(run.train_fn)
    except Exception as e:
        raise ConfigError(
            f"The train function {getattr(run.train_fn, '__name__', '?')!r} cannot be sent "
            f"to the workers: {type(e).__name__}: {e}. It (and what it refers to) must be "
            f"picklable by cloudpickle: avoid capturing locks, open files or sockets; create "
            f"them inside the function."
        ) from e
    rc, trial, legacy = run.run_config, run.trial, run.legacy
    backend_config = run.backend_config if run.backend_config is not None else BackendConfig()
    if rc.logging_config is not None:  # Ray's LoggingConfig: the train logger's level
        import logging

        logging.getLogger("tandem.train").setLevel(rc.logging_config.log_level)
    worker_env: dict[str, Any] = {}
    if rc.worker_runtime_env:
        from tandem.jobs.client.packaging import check_runtime_env

        worker_env = check_runtime_env(rc.worker_runtime_env)
    spec = RunSpec(
        fn_bytes=fn_bytes,
        pass_config=run._takes_config,
        config=dict(run.config) if run.config is not None else {},
        num_workers=run.scaling_config.max_workers,
        min_workers=run.scaling_config.min_workers,
        resize_interval_s=run.scaling_config.elastic_resize_monitor_interval_s,
        storage=storage,
        backend=backend_config.backend(),
        failure_config=rc.failure_config,
        checkpoint_config=rc.checkpoint_config,
        datasets=run.datasets,
        datasets_to_split=(None if run.dataset_config is None
                           or run.dataset_config.datasets_to_split == "all"
                           else tuple(run.dataset_config.datasets_to_split)),
        resume_from_checkpoint=run.resume_from_checkpoint,
        trial_id=trial.trial_id if trial is not None else None,
        trial_name=trial.trial_name if trial is not None else None,
        echo_prefix=None if rc.verbose == 0 or log_to_driver() is False else run.echo_prefix,
        callbacks=tuple(rc.callbacks or ()),
        start_iteration=trial.start_iteration if trial is not None else 0,
        time_offset_s=trial.time_offset_s if trial is not None else 0.0,
        metadata=({**run.metadata, HAS_VALIDATION: True} if run.validation_config is not None
                  else run.metadata),
        validation=(ValidationPlan.of(run.validation_config)
                    if run.validation_config is not None else None),
        preload=run.preload,
        reuse_key=trial.reuse_key if trial is not None else None,
        result_files=trial.result_files if trial is not None else True,
        failure_setting=(legacy.failure_setting if legacy is not None
                         else _PLAIN_FAILURE_SETTING),
        emit_rank_reports=legacy is not None and legacy.report_all_ranks,
        log_files=rc.log_files(),
        call_handlers=dict(run.call_handlers),
        # a run whose (storage_path, name) holds an earlier run resumes it, as Ray Train's
        # fit() does; a trial's restarts are the tuner's business
        resume_latest_in_run_path=trial is None,
        env_vars=dict(worker_env.get("env_vars") or {}),
        working_dir=worker_env.get("working_dir"),
    )
    defaults = job_defaults()
    priority = run.priority
    if rc.priority is not None:
        priority = rc.priority
    elif not priority and defaults.priority is not None:
        priority = defaults.priority
    return JobSpec(
        name=storage.run_name,
        bundles=run.scaling_config.bundles,
        runner=TrainController(spec),
        strategy=run.scaling_config.placement_strategy,
        priority=priority,
        owner=rc.owner or defaults.owner,
        min_bundles=(run.scaling_config.min_workers if run.scaling_config.is_elastic
                     else None),
        tags=tuple(run.tags),
        listener=listener,
        metadata={"run_path": storage.run_path, "trainer": run.trainer_name,
                  # a Tune trial's job: shown with the trial's words (tandem.server.vocabulary)
                  **({"trial_id": trial.trial_id} if trial is not None else {})},
    )
