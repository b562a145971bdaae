"""``DataParallelTrainer``: run a train function on a gang of workers, as one job."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.jobs.handle import JobHandle
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import DataConfig, RunConfig, ScalingConfig
from tandem.train.api.result import Result
from tandem.train.api.run import RunDescription, submit
from tandem.train.api.validation import check_train_fn
from tandem.train.backends.base import BackendConfig
from tandem.train.early import start_workers_early
from tandem.train.progress import RunProgress, console_progress, wait_with_progress
from tandem.train.v2.api.validation_config import ValidationConfig

__all__ = ["DataParallelTrainer", "check_train_fn", "default_storage_path"]


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` worker processes.

    ``fit()`` submits the run to the job service (embedded, or the train server when an
    address is configured), waits, and returns a ``Result``; ``fit(block=False)`` returns a
    ``JobHandle`` at once. Both go through ``tandem.train.submit(self.run_description())``.
    """

    _backend_config_cls: type[BackendConfig] = BackendConfig
    _checkpoint_schedule_read: bool = False
    """True where the trainer itself saves checkpoints on ``CheckpointConfig``'s
    ``checkpoint_frequency`` / ``checkpoint_at_end`` (the boosted trees' params form)."""
    param_space_keys: tuple[str, ...] = ()
    """``Tuner(trainer, param_space=...)`` keys this trainer takes besides
    ``train_loop_config`` / ``scaling_config`` / ``datasets``: a trial's value for each is
    merged into ``train_loop_config[key]`` (a dict one level deep, e.g. boosted trees'
    ``params``)."""

    def __init__(
        self,
        train_loop_per_worker: Callable[..., object],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: DataConfig | None = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: Mapping[str, Any] | None = None,
        validation_config: ValidationConfig | None = None,
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
        if dataset_config is not None:
            if not isinstance(dataset_config, DataConfig):
                raise ConfigError(
                    f"dataset_config must be a tandem.train.DataConfig, got "
                    f"{type(dataset_config).__name__}."
                )
            dataset_config.check_names(datasets or {})
        cc = run_config.checkpoint_config
        if cc is not None and not self._checkpoint_schedule_read and (
                cc.checkpoint_frequency or cc.checkpoint_at_end):
            raise ConfigError(
                f"{type(self).__name__}(run_config=RunConfig(checkpoint_config="
                f"CheckpointConfig(checkpoint_frequency={cc.checkpoint_frequency!r}, "
                f"checkpoint_at_end={cc.checkpoint_at_end!r}))): a train function saves "
                f"its own checkpoints, so these are not used (Ray Train refuses them too). "
                f"Call train.report(metrics, checkpoint=...) every N steps and at the end "
                f"of the function instead, and remove them."
            )
        if run_config.progress_reporter is not None:
            raise DeprecationWarning(
                "`RunConfig(progress_reporter)` is deprecated in Ray Train (V2), and a "
                "trainer's fit() refuses it as Ray's does: give the reporter to the Tuner "
                "(tune.RunConfig(progress_reporter=...)) or to tune.run(progress_reporter=...)."
            )
        if run_config.stop is not None:
            raise ConfigError(
                f"{type(self).__name__}(run_config=RunConfig(stop={run_config.stop!r})): stop "
                f"criteria apply to tuning (Tuner(..., run_config=RunConfig(stop=...)) or "
                f"tune.run(stop=...)); a trainer's fit() runs its train function to the end, "
                f"as in Ray Train. Return from the train function to stop early, or move "
                f"stop= to the Tuner's RunConfig."
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
        self.dataset_config = dataset_config
        if validation_config is not None and not isinstance(validation_config, ValidationConfig):
            raise ConfigError(
                f"validation_config must be a tandem.train.ValidationConfig(fn=...), got "
                f"{type(validation_config).__name__}."
            )
        self.validation_config = validation_config
        start_workers_early()  # the zygote starts while the program goes on to fit()

    # -- running ---------------------------------------------------------------------------
    @classmethod
    def restore(cls, *args: object, **kwargs: object) -> DataParallelTrainer:
        """Deprecated in Ray Train V2, as here: raises ``DeprecationWarning``. To resume a
        run, ``fit()`` a trainer with the same ``RunConfig(storage_path=..., name=...)``:
        it goes on from the run's latest checkpoint."""
        raise DeprecationWarning(_RESTORE_DEPRECATED)

    @classmethod
    def can_restore(cls, *args: object, **kwargs: object) -> bool:
        """Deprecated in Ray Train V2, as here: raises ``DeprecationWarning`` (see
        :meth:`restore`)."""
        raise DeprecationWarning(_RESTORE_DEPRECATED)

    def run_description(self) -> RunDescription:
        """This trainer's run as a frozen ``RunDescription`` (what ``fit`` submits); a
        tuning trial is this with its own config, scaling and folder."""
        return RunDescription(
            train_fn=self.train_loop_per_worker,
            config=self.train_loop_config,
            scaling_config=self.scaling_config,
            run_config=self.run_config,
            datasets=self.datasets,
            backend_config=self.backend_config,
            resume_from_checkpoint=self.resume_from_checkpoint,
            metadata=self.metadata,
            trainer_name=type(self).__name__,
            dataset_config=self.dataset_config,
            validation_config=self.validation_config,
        )

    def fit(self, block: bool = True) -> Result | JobHandle:
        """Runs training to the end and returns its ``Result``; with ``block=False``
        returns the run's ``JobHandle`` at once (``handle.wait()`` gives the ``Result``).

        Raises:
            TrainingFailedError: a worker failed and ``FailureConfig.max_failures`` is spent;
                it carries the failing rank and the worker's traceback.
            ResourcesUnavailableError: the gang could never fit on the cluster.
        """
        handle = submit(self.run_description())
        if not block:
            return handle
        try:
            return wait_with_progress(handle, self._progress(handle))
        except KeyboardInterrupt:
            handle.stop()
            with contextlib.suppress(BaseException):  # already interrupted: only wait
                handle.wait(timeout=30)
            raise

    def _progress(self, handle: JobHandle) -> RunProgress | None:
        total = self.metadata.get("progress_total")
        return console_progress(handle, self.run_config, self.scaling_config.max_workers,
                                total=total if isinstance(total, int) else None,
                                key=self.metadata.get("progress_key"))

    def _submit(self, **overrides: Any) -> JobHandle:
        """``submit`` with fields of the description replaced (e.g. ``priority=9``)."""
        return submit(dataclasses.replace(self.run_description(), **overrides))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(train_loop_per_worker={getattr(self.train_loop_per_worker, '__name__', '?')}, "
                f"scaling_config={self.scaling_config!r})")


_RESTORE_DEPRECATED = (
    "The `restore` and `can_restore` APIs are deprecated and will be removed in a future "
    "release. See this issue for more context and migration options: "
    "https://github.com/ray-project/ray/issues/49454. In tandem, fit() a trainer with the "
    "same RunConfig(storage_path=..., name=...) to resume the run from its latest "
    "checkpoint."
)


def default_storage_path() -> str:
    return os.path.abspath(os.path.expanduser(RunConfig().resolved_storage_path()))
