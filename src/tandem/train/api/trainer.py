"""``DataParallelTrainer``: run a train function on a gang of workers, as one job."""

from __future__ import annotations

import datetime
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError
from tandem._core.ids import short_uid
from tandem.jobs.handle import JobHandle
from tandem.jobs.runtime import get_service, log_to_driver
from tandem.jobs.spec import JobSpec
from tandem.train._internal.controller import RunSpec, TrainController
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import RunConfig, ScalingConfig
from tandem.train.api.result import Result
from tandem.train.backends.base import Backend, BackendConfig
from tandem.train.context import StorageContext


def check_train_fn(fn: Any, what: str = "train_loop_per_worker") -> bool:
    """Validates a train function; returns whether it takes the config argument.

    Raises:
        ConfigError: not callable, or more than one required parameter.
    """
    if not callable(fn):
        raise ConfigError(
            f"{what} must be a function such as `def train_func(config): ...`, got "
            f"{type(fn).__name__} {fn!r:.60}."
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    kw_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 1 or kw_required:
        names = ", ".join(p.name for p in required + kw_required)
        raise ConfigError(
            f"{what} {getattr(fn, '__name__', fn)!r} takes {len(required) + len(kw_required)} "
            f"required parameters ({names}); it may take none or one (the config dict). "
            f"Put other values into train_loop_config, or bind them with functools.partial."
        )
    return bool(positional) or any(p.kind is p.VAR_POSITIONAL for p in params)


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` worker processes.

    ``fit()`` submits the run to the job service (embedded, or the train server when an
    address is configured), waits, and returns a ``Result``; ``fit(block=False)`` returns a
    ``JobHandle`` at once.
    """

    _backend_config_cls: type[BackendConfig] = BackendConfig

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self._pass_config = check_train_fn(train_loop_per_worker)
        if train_loop_config is not None and not self._pass_config:
            raise ConfigError(
                f"train_loop_config was given, but {train_loop_per_worker.__name__!r} takes no "
                f"parameter to receive it. Define it as `def "
                f"{train_loop_per_worker.__name__}(config): ...`."
            )
        scaling_config = scaling_config if scaling_config is not None else ScalingConfig()
        run_config = run_config if run_config is not None else RunConfig()
        for value, cls, name in (
            (scaling_config, ScalingConfig, "scaling_config"),
            (run_config, RunConfig, "run_config"),
        ):
            if not isinstance(value, cls):
                raise ConfigError(
                    f"{name} must be a tandem.train.{cls.__name__}, got {type(value).__name__}."
                )
        if backend_config is not None and not isinstance(backend_config, BackendConfig):
            raise ConfigError(
                f"backend_config must be a BackendConfig (e.g. TorchConfig()), got "
                f"{type(backend_config).__name__}."
            )
        if datasets is not None and not isinstance(datasets, Mapping):
            raise ConfigError(
                f"datasets must be a dict of name -> data, e.g. {{'train': data}}; got "
                f"{type(datasets).__name__}."
            )
        if resume_from_checkpoint is not None:
            if not isinstance(resume_from_checkpoint, Checkpoint):
                raise ConfigError(
                    f"resume_from_checkpoint must be a Checkpoint, got "
                    f"{type(resume_from_checkpoint).__name__}; wrap a folder with "
                    f"Checkpoint.from_directory(path)."
                )
            if not resume_from_checkpoint.exists():
                raise ConfigError(
                    f"resume_from_checkpoint={resume_from_checkpoint!r}: that directory does "
                    f"not exist (any more?). Pass the path of an existing checkpoint folder, "
                    f"e.g. result.checkpoint of an earlier run."
                )
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = dict(train_loop_config) if train_loop_config is not None else None
        self.backend_config = backend_config or self._backend_config_cls()
        self.scaling_config = scaling_config
        self.run_config = run_config
        self.datasets = dict(datasets or {})
        self.resume_from_checkpoint = resume_from_checkpoint
        self.metadata = dict(metadata or {})

    # -- running ---------------------------------------------------------------------------
    def fit(self, block: bool = True) -> Result | JobHandle:
        """Runs training to the end and returns its ``Result``.

        Raises:
            TrainingFailedError: a worker failed and ``FailureConfig.max_failures`` is spent;
                it carries the failing rank and the worker's traceback.
            ResourcesUnavailableError: the gang could never fit on the cluster.
        """
        handle = self._submit()
        if not block:
            return handle
        try:
            return handle.wait()
        except KeyboardInterrupt:
            handle.stop()
            try:
                handle.wait(timeout=30)
            except BaseException:
                pass
            raise

    def _submit(self, **overrides: Any) -> JobHandle:
        service = get_service()
        spec = self._job_spec(**overrides)
        job = service.submit(spec)
        return JobHandle(job, service)

    def _default_run_name(self) -> str:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        return f"{type(self).__name__}_{stamp}_{short_uid(4)}"

    def _make_backend(self) -> Backend:
        return self.backend_config.backend()

    def _job_spec(
        self,
        *,
        storage: StorageContext | None = None,
        trial_id: str | None = None,
        trial_name: str | None = None,
        config: Any = None,
        checkpoint: Checkpoint | None = None,
        echo_prefix: str | None = "",
        listener: Any = None,
        priority: int = 0,
        callbacks: tuple = (),
        call_handlers: Mapping[str, Any] | None = None,
        tags: tuple[str, ...] = (),
        fn_bytes: bytes | None = None,
        start_iteration: int = 0,
        time_offset_s: float = 0.0,
        preload: tuple[str, ...] = (),
    ) -> JobSpec:
        rc = self.run_config
        self.scaling_config.check_resolved()
        if storage is None:
            storage = StorageContext(rc.resolved_storage_path(), rc.name or self._default_run_name())
        try:
            if fn_bytes is None:
                fn_bytes = cloudpickle.dumps(self.train_loop_per_worker)
        except Exception as e:
            raise ConfigError(
                f"The train function {getattr(self.train_loop_per_worker, '__name__', '?')!r} "
                f"cannot be sent to the workers: {type(e).__name__}: {e}. It (and what it "
                f"refers to) must be picklable by cloudpickle: avoid capturing locks, open "
                f"files or sockets; create them inside the function."
            ) from e
        if rc.verbose == 0 or log_to_driver() is False:
            echo_prefix = None
        run = RunSpec(
            fn_bytes=fn_bytes,
            pass_config=self._pass_config,
            config=config if config is not None else (self.train_loop_config or {}),
            num_workers=self.scaling_config.num_workers,
            storage=storage,
            backend=self._make_backend(),
            failure_config=rc.failure_config,
            checkpoint_config=rc.checkpoint_config,
            datasets=self.datasets,
            resume_from_checkpoint=checkpoint or self.resume_from_checkpoint,
            trial_id=trial_id,
            trial_name=trial_name,
            echo_prefix=echo_prefix,
            callbacks=tuple(rc.callbacks or ()) + tuple(callbacks),
            metadata=self.metadata,
            call_handlers=dict(call_handlers or {}),
            start_iteration=start_iteration,
            # a fit() whose (storage_path, name) holds an earlier run resumes it (Ray Train)
            resume_latest_in_run_path=trial_id is None,
            time_offset_s=time_offset_s,
            preload=preload,
        )
        return JobSpec(
            name=storage.run_name,
            bundles=self.scaling_config.bundles,
            runner=TrainController(run),
            strategy=self.scaling_config.placement_strategy,
            priority=priority,
            tags=tags,
            listener=listener,
            metadata={"run_path": storage.run_path, "trainer": type(self).__name__},
        )

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(train_loop_per_worker={getattr(self.train_loop_per_worker, '__name__', '?')}, "
                f"scaling_config={self.scaling_config!r})")


def default_storage_path() -> str:
    return os.path.abspath(os.path.expanduser(RunConfig().resolved_storage_path()))
