"""User-facing configuration: ``ScalingConfig``, ``RunConfig``, ``FailureConfig``, ``CheckpointConfig``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.cluster.base import STRATEGIES, validate_bundle
from tandem.train.api.callback import Callback, check_callbacks
from tandem.train.api.checkpoint import storage_url

DEFAULT_STORAGE_PATH = os.path.join("~", "tandem_results")


def is_search_space(value: object) -> bool:
    """A tune search space (a ``Domain`` such as ``tune.choice``, or ``tune.grid_search``'s
    ``{"grid_search": [...]}``), recognised without importing the tune layer."""
    if isinstance(value, Mapping) and "grid_search" in value:
        return True
    return any(c.__name__ == "Domain" and c.__module__.startswith("tandem.tune.")
               for c in type(value).__mro__)


def as_search_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as the dict of its fields, for a Tuner's param_space (Ray turns
    ``param_space["scaling_config"]`` into a dict the same way)."""
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


@record
class ScalingConfig:
    """How many workers and what each gets.

    Args:
        num_workers: the gang size; every worker is a process with its own rank. A pair
            ``(min_workers, max_workers)`` makes the gang elastic, as in Ray: it starts with
            as many workers as fit (at least ``min_workers``), grows toward
            ``max_workers`` at a checkpoint when capacity frees, and restarts smaller
            instead of waiting when preempted or when a node is lost (docs/scheduling.md).
        elastic_resize_monitor_interval_s: for an elastic gang, how often (seconds) the
            run looks for room to grow (Ray's default, 60).
        use_gpu: give each worker one GPU (unless ``resources_per_worker`` says otherwise).
        resources_per_worker: e.g. ``{"CPU": 2, "GPU": 0.5, "memory": 4e9}``; defaults to
            ``{"CPU": 1}`` plus ``{"GPU": 1}`` with ``use_gpu``.
        placement_strategy: ``PACK`` (default), ``SPREAD``, ``STRICT_PACK``, ``STRICT_SPREAD``.
    """

    num_workers: int | tuple[int, int] = 1
    use_gpu: bool = False
    resources_per_worker: Mapping[str, float] | None = None
    placement_strategy: str = "PACK"
    trainer_resources: Mapping[str, float] | None = None
    """Ray's resources for the training coordinator. tandem's coordinator runs in the
    driver and holds none: ``None`` or all-zero amounts (``{"CPU": 0}``, what Ray programs
    pass to fit small machines) mean exactly that; anything else is refused."""
    elastic_resize_monitor_interval_s: float = 60.0
    accelerator_type: str | None = None
    """Ray's: each worker also asks for ``{"accelerator_type:<type>": 0.001}``, a resource a
    node declares (``tandem.init(resources={"accelerator_type:A100": 1})`` or a node
    agent's ``--resources``) to say it has that accelerator."""
    label_selector: Any = None
    """Ray's node-label selector; tandem's nodes have no labels: refused unless None (ask
    for a custom resource the nodes declare in ``resources_per_worker`` instead)."""
    use_tpu: bool = False
    """Refused when True: there are no TPUs here (use ``use_gpu`` or CPUs)."""
    topology: str | None = None
    """A TPU slice topology; refused unless None, as ``use_tpu``."""

    def __post_init__(self) -> None:
        if self.use_tpu or self.topology is not None:
            raise ConfigError(
                f"ScalingConfig(use_tpu={self.use_tpu!r}, topology={self.topology!r}): tandem "
                "cannot place workers on TPUs (no TPU devices or TPU slices exist here). Train "
                "on CPUs, or on GPUs with use_gpu=True."
            )
        if self.label_selector is not None:
            raise ConfigError(
                f"ScalingConfig(label_selector={self.label_selector!r}): tandem's nodes carry "
                "no labels. Have the nodes declare a custom resource (tandem.init(resources="
                "{'my_pool': 8}) or the node agent's --resources) and ask for it in "
                "resources_per_worker={'my_pool': 1}."
            )
        at = self.accelerator_type
        if at is not None and (not isinstance(at, str) or not at.strip()):
            raise ConfigError(
                f"ScalingConfig(accelerator_type={at!r}) is invalid: give the accelerator's "
                "name, e.g. 'A100', or None."
            )
        tr = self.trainer_resources
        if tr is not None and not is_search_space(tr) and (
                not isinstance(tr, Mapping) or any(
                    isinstance(v, bool) or not isinstance(v, (int, float)) or v != 0
                    for v in tr.values())):
            raise DeprecatedParameterError(
                f"`ScalingConfig(trainer_resources)` is deprecated (as in Ray Train V2), so "
                f"ScalingConfig(trainer_resources={tr!r}) is not supported: tandem's training "
                f"coordinator runs in your driver process and holds no resources (Ray Train "
                f"V2 refuses this field too). Remove it, or add what the coordinator would "
                f"need to resources_per_worker."
            )
        if self.search_space_fields():
            return  # resolved per trial by the Tuner; checked when a trial builds its config
        n = self.num_workers
        if isinstance(n, (tuple, list)):
            if len(n) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in n) \
                    or not 1 <= n[0] <= n[1]:
                raise ConfigError(
                    f"ScalingConfig(num_workers={n!r}) is invalid: an elastic gang is a pair "
                    f"(min_workers, max_workers) of integers with 1 <= min_workers <= "
                    f"max_workers, e.g. num_workers=(2, 8)."
                )
            object.__setattr__(self, "num_workers", (n[0], n[1]))
        elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(
                f"ScalingConfig(num_workers={n!r}) is invalid: num_workers must be an integer "
                f">= 1 (each worker is one process with its own rank), or a pair (min, max) "
                f"for an elastic gang. Use num_workers=1 to train in a single worker."
            )
        iv = self.elastic_resize_monitor_interval_s
        if isinstance(iv, bool) or not isinstance(iv, (int, float)) or not iv >= 0:
            raise ConfigError(
                f"ScalingConfig(elastic_resize_monitor_interval_s={iv!r}) is invalid: give "
                f"seconds >= 0."
            )
        if self.placement_strategy not in STRATEGIES:
            raise ConfigError(
                f"ScalingConfig(placement_strategy={self.placement_strategy!r}) is not known; "
                f"use one of {', '.join(STRATEGIES)}."
            )
        if self.resources_per_worker is not None:
            validate_bundle(self.resources_per_worker, "ScalingConfig(resources_per_worker)")

    def search_space_fields(self) -> list[str]:
        """The fields holding a tune search space (``tune.grid_search([1, 2])``,
        ``tune.choice(...)``): such a config goes in ``Tuner(trainer, param_space={
        "scaling_config": ScalingConfig(...)})``, which samples it per trial as Ray does."""
        return [f for f in ("num_workers", "use_gpu", "resources_per_worker",
                            "placement_strategy", "trainer_resources")
                if is_search_space(getattr(self, f))]

    def check_resolved(self) -> None:
        if self.__dict__.get("_resolved"):  # checked already (a tuner's trials share one)
            return
        fields = self.search_space_fields()
        if not fields:
            object.__setattr__(self, "_resolved", True)  # frozen: a cache, not a field
        if fields:
            raise ConfigError(
                f"ScalingConfig({', '.join(f'{f}={getattr(self, f)!r}' for f in fields)}) holds "
                f"a search space, which only a Tuner resolves: pass it as Tuner(trainer, "
                f"param_space={{'scaling_config': ScalingConfig(...)}}), and give the trainer "
                f"itself fixed values."
            )

    @property
    def worker_bundle(self) -> dict[str, float]:
        """One worker's resources."""
        if self.resources_per_worker is None:
            return self._with_accelerator(
                {"CPU": 1.0, "GPU": 1.0} if self.use_gpu else {"CPU": 1.0})
        given = dict(self.resources_per_worker)
        bundle = validate_bundle(given, "ScalingConfig(resources_per_worker)")
        if "CPU" not in given:
            bundle["CPU"] = 1.0
        if self.use_gpu and "GPU" not in given:
            bundle["GPU"] = 1.0
        return self._with_accelerator(bundle)

    def _with_accelerator(self, bundle: dict[str, float]) -> dict[str, float]:
        if self.accelerator_type:  # Ray's resource name and amount
            bundle[f"accelerator_type:{self.accelerator_type}"] = 0.001
        return bundle

    @property
    def is_elastic(self) -> bool:
        """``num_workers`` is a ``(min, max)`` pair."""
        return isinstance(self.num_workers, tuple)

    @property
    def min_workers(self) -> int:
        n = self.num_workers
        return n[0] if isinstance(n, tuple) else n

    @property
    def max_workers(self) -> int:
        n = self.num_workers
        return n[1] if isinstance(n, tuple) else n

    @property
    def bundles(self) -> tuple[dict[str, float], ...]:
        """One bundle per worker, ``max_workers`` of them."""
        b = self.worker_bundle
        return tuple(dict(b) for _ in range(self.max_workers))

    # -- Ray's accounting properties (what Ray reports; tandem places ``worker_bundle``) --
    @property
    def _resources_per_worker_not_none(self) -> dict[str, float]:
        """Ray's per-worker request: ``{"CPU": 1}``, or ``{"GPU": 1}`` with ``use_gpu``
        (Ray asks no CPU for a GPU worker), or the given resources without zero amounts."""
        if self.resources_per_worker is None:
            per: dict[str, float] = {"GPU": 1} if self.use_gpu else {"CPU": 1}
        else:
            per = {k: v for k, v in self.resources_per_worker.items() if v != 0}
        if self.use_gpu:
            per.setdefault("GPU", 1)
        return per

    @property
    def total_resources(self) -> dict[str, float]:
        """The resources of the whole gang, as Ray counts them (per worker times workers)."""
        n = self.num_workers if isinstance(self.num_workers, int) else max(self.num_workers)
        return {k: float(v) * n for k, v in self._resources_per_worker_not_none.items()}

    @property
    def num_cpus_per_worker(self) -> float:
        return self._resources_per_worker_not_none.get("CPU", 0)

    @property
    def num_gpus_per_worker(self) -> float:
        return self._resources_per_worker_not_none.get("GPU", 0)

    @property
    def additional_resources_per_worker(self) -> dict[str, float]:
        """Resources per worker other than CPU and GPU."""
        return {k: v for k, v in self._resources_per_worker_not_none.items()
                if k not in ("CPU", "GPU")}


@record
class FailureConfig:
    """How failures are handled.

    Args:
        max_failures: how many times a run restarts after a worker fails (-1 = unlimited).
        fail_fast: in tuning, as in Ray Tune: ``True`` ends the whole experiment at the first
            trial error (the other trials are stopped; ``fit()`` returns the results with the
            error in them); ``"raise"`` stops them and raises that trial's error from
            ``fit()``. Needs ``max_failures=0``. A single run stops at its first error
            whenever ``max_failures=0``, so for a trainer's own ``fit()`` it changes nothing.
        max_preemption_failures: as in Ray: how many preemptions the run resumes from (from
            its latest checkpoint), counted apart from ``max_failures``; -1 (default): all.
            The scheduler preempts a run for a higher-priority job (docs/scheduling.md).
        relax_collectives_on_preemption: as in Ray; tandem stops every worker of a
            preempted run together (a whole gang yields), so no collective is left waiting
            on a lost rank and the setting changes nothing here.
        preemption_grace_s: how long the workers may keep running past the preemption
            deadline to finish their checkpoint (seconds, default 0).
    """

    max_failures: int = 0
    fail_fast: bool | str = False
    max_preemption_failures: int = -1
    relax_collectives_on_preemption: bool = False
    preemption_grace_s: float = 0.0
    controller_failure_limit: int = -1
    """Ray's limit on restarts of the run's controller after it fails itself. tandem's
    controller runs in the driver and is not restarted: its failure ends the run with
    ``ControllerError``; the value is checked (an int >= -1) and kept."""

    RAISE = "RAISE"

    def __post_init__(self) -> None:
        cl = self.controller_failure_limit
        if isinstance(cl, bool) or not isinstance(cl, int) or cl < -1:
            raise ConfigError(
                f"FailureConfig(controller_failure_limit={cl!r}) is invalid: use -1, 0 or a "
                "positive integer."
            )
        m = self.max_failures
        if isinstance(m, bool) or not isinstance(m, int) or m < -1:
            raise ConfigError(
                f"FailureConfig(max_failures={m!r}) is invalid: use 0 (never retry), a positive "
                f"number of retries, or -1 (retry forever)."
            )
        p = self.max_preemption_failures
        if isinstance(p, bool) or not isinstance(p, int) or p < -1:
            raise ConfigError(
                f"FailureConfig(max_preemption_failures={p!r}) is invalid: use -1 (resume from "
                f"every preemption), 0 (fail at the first) or a positive number."
            )
        g = self.preemption_grace_s
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not g >= 0:
            raise ConfigError(
                f"FailureConfig(preemption_grace_s={g!r}) is invalid: give seconds >= 0."
            )
        if not isinstance(self.relax_collectives_on_preemption, bool):
            raise ConfigError(
                f"FailureConfig(relax_collectives_on_preemption="
                f"{self.relax_collectives_on_preemption!r}) is invalid: use True or False."
            )
        f = self.fail_fast
        if not (isinstance(f, bool) or (isinstance(f, str) and f.upper() == self.RAISE)):
            raise ConfigError(
                f"FailureConfig(fail_fast={f!r}) is invalid: use True, False or 'raise'."
            )
        if f and m != 0:
            raise ConfigError(
                f"FailureConfig(max_failures={m}, fail_fast={f!r}): fail_fast ends the "
                f"experiment at the first error, so it needs max_failures=0 (as in Ray)."
            )

    @property
    def raises(self) -> bool:
        """``fail_fast="raise"``: the first trial error is raised from ``fit()``."""
        return isinstance(self.fail_fast, str) and self.fail_fast.upper() == self.RAISE


@record
class CheckpointConfig:
    """Which checkpoints to keep: the ``num_to_keep`` best by ``checkpoint_score_attribute``
    (or the most recent, without one). The latest checkpoint is always kept."""

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    """For ``tune.Trainable`` classes (and the boosted-tree trainers' params form): save a
    checkpoint every N steps (0 = never). A train function reports its own checkpoints, so
    with one it is refused, as in Ray."""
    checkpoint_at_end: bool | None = None
    """For ``tune.Trainable`` classes: save a checkpoint when the trial ends. ``None`` (Ray's
    default) means yes for a Trainable class in a ``Tuner``; refused with a train function."""

    def __post_init__(self) -> None:
        k = self.num_to_keep
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(
                f"CheckpointConfig(num_to_keep={k!r}) is invalid: use None (keep all) or an "
                f"integer >= 1."
            )
        f = self.checkpoint_frequency
        if isinstance(f, bool) or not isinstance(f, int) or f < 0:
            raise ConfigError(
                f"CheckpointConfig(checkpoint_frequency={f!r}) is invalid: use 0 (off) or a "
                f"positive number of steps."
            )
        if self.checkpoint_score_order not in ("max", "min"):
            raise ConfigError(
                f"CheckpointConfig(checkpoint_score_order={self.checkpoint_score_order!r}) is "
                f"invalid: use 'max' or 'min'."
            )


def _is_file_name(v: object) -> TypeGuard[str]:
    """A single folder or file name: a non-empty string, no '/', not '.' or '..'."""
    return isinstance(v, str) and bool(v) and "/" not in v and v not in (".", "..")


class DeprecatedParameterError(ConfigError, DeprecationWarning):
    """A parameter Ray deprecated and refuses (raised as ``DeprecationWarning`` there)."""


@record(frozen=False)
class SyncConfig:
    """Ray's (deprecated there) sync settings. tandem's workers write results and
    checkpoints straight to ``storage_path``, so there is never anything left to sync:
    ``RunConfig(sync_config=SyncConfig(...))`` is accepted and the periods have nothing to
    act on; ``sync_artifacts=True`` is refused, saying where artifacts go instead."""

    sync_period: int = 300
    sync_timeout: int = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True


@record(frozen=False)
class LoggingConfig:
    """Ray Train's logging settings: ``log_level`` of the ``tandem.train`` logger (its
    controller's messages) while the run is submitted and runs in this process."""

    log_level: str = "INFO"

    def __post_init__(self) -> None:
        import logging

        valid_levels = set(logging._nameToLevel)
        if not isinstance(self.log_level, str) or self.log_level.upper() not in valid_levels:
            raise ValueError(
                f"Invalid log_level: {self.log_level!r}. "
                f"Must be one of: {', '.join(repr(x) for x in sorted(valid_levels))}."
            )
        self.log_level = self.log_level.upper()


@record
class RunConfig:
    """Where a run's results go and how it behaves.

    Args:
        name: the run folder's name (default: ``<Trainer>_<date>_<time>_<uid>``, new each
            time). A ``fit()`` whose ``<storage_path>/<name>`` holds an earlier run resumes it
            from its latest committed checkpoint (as Ray Train does); use a new name to start
            afresh. For a Tuner: the experiment folder (default ``<trainable>_<date>_<time>_<uid>``).
        storage_path: a local folder or an fsspec URL (default ``~/tandem_results`` or
            ``$TANDEM_STORAGE_PATH``). Every worker must be able to reach it.
        failure_config: restarts after worker failures.
        checkpoint_config: which checkpoints to keep.
        callbacks: ``tandem.train.Callback`` objects (run events: ``on_report(rows)``,
            ``on_checkpoint(entry)``, ``on_end(result)``...) and ``tandem.tune.Callback``
            objects (experiment events, for a ``Tuner``).
        stop: for tuning (a ``Tuner``'s or ``tune.run``'s run config): a dict of metric
            thresholds, a ``Stopper``, or a callable ``(trial_id, result) -> bool``. A
            trainer's own ``fit()`` refuses it, as Ray Train does.
        verbose: 0 silent, 1 status lines, 2 everything (workers' output echoed).
        sync_config: refused unless None: tandem writes to ``storage_path`` directly, so
            there is nothing to sync.
        storage_filesystem: a ``pyarrow.fs.FileSystem`` that ``storage_path`` is a folder
            of (as in Ray); it is mapped to a URL (see :func:`storage_url`).
        log_to_file: as Ray Tune's: ``False`` (default) writes no extra files; ``True``
            tees the train function's stdout and stderr (Python's ``sys.stdout`` /
            ``sys.stderr``, still shown as before) into ``stdout`` and ``stderr`` in the run
            (trial) folder; a string names one file for both; a pair ``(out, err)`` names
            each. Every rank appends to the same files. Each rank's whole output is also
            always in ``<run>/logs/rank_<N>.log``.
        priority: tandem only: the run's place in the job queue (higher first; default 0,
            or ``tandem.init(priority=...)``); with ``scheduling="priority"`` a run may
            preempt lower-priority ones (docs/scheduling.md). A Tuner's trials inherit it.
        owner: tandem only: who the run belongs to (quotas and fair share key on it;
            default ``tandem.init(owner=...)``, else ``"default"``).
    """

    name: str | None = None
    storage_path: str | None = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    callbacks: Sequence[Callback] | None = None
    stop: Mapping[str, Any] | Callable[..., bool] | Any | None = None
    verbose: int | None = None
    sync_config: Any = None
    log_to_file: bool | str | tuple[str, str] = False
    priority: int | None = None
    owner: str | None = None
    storage_filesystem: Any = None
    worker_runtime_env: Mapping[str, Any] | None = None
    logging_config: LoggingConfig | None = None
    progress_reporter: Any = None
    local_dir: str | None = None

    def log_files(self) -> tuple[str | None, str | None]:
        """``log_to_file`` as (stdout file, stderr file) names in the run folder, as Ray's
        ``_validate_log_to_file`` reads it."""
        v = self.log_to_file
        if not v:  # False, None, "" (Ray: no files)
            return None, None
        if v is True:
            return "stdout", "stderr"
        if _is_file_name(v):
            return v, v
        if isinstance(v, (tuple, list)) and len(v) == 2 and all(map(_is_file_name, v)):
            return v[0], v[1]
        raise ConfigError(
            f"RunConfig(log_to_file={v!r}) is invalid: pass True (files 'stdout' and "
            f"'stderr' in the run folder), one file name for both, or a pair of file names "
            f"(stdout, stderr) — names without '/'."
        )

    def __post_init__(self) -> None:
        if self.local_dir is not None:  # Ray's message
            raise DeprecationWarning(
                "The `RunConfig(local_dir)` argument is deprecated. You should set the "
                "`RunConfig(storage_path)` instead."
            )
        pr = self.progress_reporter
        if pr is not None and not (callable(getattr(pr, "should_report", None))
                                   and callable(getattr(pr, "report", None))):
            raise ConfigError(
                f"RunConfig(progress_reporter={pr!r}): give a tune.ProgressReporter "
                "(tune.CLIReporter(...), tune.JupyterNotebookReporter(...) or a subclass with "
                "should_report() and report())."
            )
        if self.worker_runtime_env is not None:
            from tandem.jobs.client.packaging import check_runtime_env

            check_runtime_env(self.worker_runtime_env)  # refused before any work
        if self.logging_config is not None and not isinstance(self.logging_config, LoggingConfig):
            raise ConfigError(
                f"RunConfig(logging_config={self.logging_config!r}) must be a "
                "train.LoggingConfig(log_level=...)."
            )
        sc = self.sync_config
        if isinstance(sc, SyncConfig) and not sc.sync_artifacts:
            object.__setattr__(self, "sync_config", None)  # nothing to sync: see SyncConfig
        if self.sync_config is not None:
            raise ConfigError(
                f"RunConfig(sync_config={self.sync_config!r}) is not supported: tandem writes "
                f"results and checkpoints to storage_path directly (a local folder or an "
                f"fsspec URL such as s3://...), so there is nothing to sync; remove it "
                f"(SyncConfig(sync_artifacts=True): write artifacts into the trial folder, "
                f"tune.get_context().get_trial_dir(), or report them in a checkpoint)."
            )
        self.log_files()  # refuses a value Ray refuses, before any work
        p = self.priority
        if p is not None and (isinstance(p, bool) or not isinstance(p, int)
                              or not -(2**31) <= p < 2**31):
            raise ConfigError(f"RunConfig(priority={p!r}) is invalid: give an int (higher "
                              f"runs first), or None for the default.")
        o = self.owner
        if o is not None and (not isinstance(o, str) or not o.strip() or len(o) > 128):
            raise ConfigError(f"RunConfig(owner={o!r}) is invalid: give a non-empty name "
                              f"(at most 128 characters), or None for the default.")
        if self.storage_filesystem is not None:
            storage_url(self.storage_filesystem, self.storage_path)  # refuses it up front
        if self.name is not None and not (_is_file_name(self.name) and self.name.strip()):
            raise ConfigError(
                f"RunConfig(name={self.name!r}) is invalid: use a non-empty folder name "
                f"without '/'."
            )
        check_callbacks(self.callbacks, "RunConfig")
        if self.failure_config is not None and not isinstance(self.failure_config, FailureConfig):
            raise ConfigError(
                f"RunConfig(failure_config=...) must be a FailureConfig, got "
                f"{type(self.failure_config).__name__}."
            )
        if self.checkpoint_config is not None and not isinstance(
            self.checkpoint_config, CheckpointConfig
        ):
            raise ConfigError(
                f"RunConfig(checkpoint_config=...) must be a CheckpointConfig, got "
                f"{type(self.checkpoint_config).__name__}."
            )

    def resolved_storage_path(self) -> str:
        if self.storage_filesystem is not None:
            return storage_url(self.storage_filesystem, self.storage_path)
        path = self.storage_path or os.environ.get("TANDEM_STORAGE_PATH") or DEFAULT_STORAGE_PATH
        if "://" in path:
            return path
        return os.path.abspath(os.path.expanduser(path))


@record
class DataConfig:
    """Which of a trainer's ``datasets`` are split across workers (Ray's ``DataConfig``).

    Args:
        datasets_to_split: ``"all"`` (default: every dataset is split by rank) or a list of
            dataset names; a dataset not in the list reaches every worker whole
            (``train.get_dataset_shard(name)`` is the full dataset on each rank), as in Ray.
        execution_options: Ray Data's streaming options: refused unless None (tandem hands
            a ``ray.data.Dataset`` to Ray Data's own ``split``, with Ray Data's defaults).
        enable_shard_locality: Ray's placement hint; which rows each worker gets does not
            depend on it.
    """

    datasets_to_split: str | Sequence[str] = "all"
    execution_options: Any = None
    enable_shard_locality: bool = True

    def __post_init__(self) -> None:
        d = self.datasets_to_split
        if not (d == "all" or (isinstance(d, (list, tuple)) and all(isinstance(n, str)
                                                                     for n in d))):
            raise ConfigError(
                f"DataConfig(datasets_to_split={d!r}) is invalid: use 'all' or a list of "
                f"dataset names, e.g. ['train']."
            )
        if self.execution_options is not None:
            raise ConfigError(
                f"DataConfig(execution_options={self.execution_options!r}) is not supported: "
                f"tandem splits a ray.data.Dataset with Ray Data's defaults; set the options on "
                f"the dataset's DataContext instead, or remove execution_options."
            )

    def check_names(self, datasets: Mapping[str, object]) -> None:
        if self.datasets_to_split == "all":
            return
        unknown = [n for n in self.datasets_to_split if n not in datasets]
        if unknown:
            raise ConfigError(
                f"DataConfig(datasets_to_split={list(self.datasets_to_split)!r}) names "
                f"{', '.join(repr(n) for n in unknown)}, which the trainer's datasets do not "
                f"have (it has {', '.join(repr(n) for n in datasets) or 'none'})."
            )
