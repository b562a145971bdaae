"""``Tuner`` and ``TuneConfig``: run a search over a trainable, every trial a train job."""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError
from tandem._core.ids import short_uid
from tandem._core.records import record
from tandem.cluster.base import CLEAN_REUSE_PREFIX
from tandem.jobs.contract import JobService, JobView
from tandem.jobs.events import JobListener
from tandem.jobs.runtime import get_service, log_to_driver
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import CheckpointConfig, RunConfig, ScalingConfig, as_search_dict
from tandem.train.api.files import join_path, make_dirs, read_file, remove_dir, write_file
from tandem.train.api.result import Result, kept_checkpoints
from tandem.train.api.run import (
    AskSubmitter,
    RunDescription,
    TrialContext,
    job_spec,
    pickle_train_fn,
)
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.context import AWAIT_VERDICT, TRIAL_RESOURCES, StorageContext
from tandem.tune._early import start_trial_workers_early
from tandem.tune._verdicts import GateOf, verdict_gate
from tandem.tune.callback import Callback, LoggerCallback
from tandem.tune.controller import (
    SCHEDULER_FILE,
    SEARCHER_FILE,
    STATE_FILE,
    ExperimentOutput,
    Resumed,
    TrialJobs,
    TrialLimits,
    TrialSearch,
    TrialStreams,
    TuneController,
    TuneTrial,
    load_searcher,
    trial_from_state,
)
from tandem.tune.execution.placement_groups import (
    PlacementGroupFactory,
    as_placement_group_factory,
)
from tandem.tune.logger import DISABLE_AUTO_LOGGERS_ENV, with_default_loggers
from tandem.tune.progress import ProgressReporter, UserReporterDisplay
from tandem.tune.result_grid import ResultGrid
from tandem.tune.resume import ResumeConfig, requeue_trials
from tandem.tune.schedulers.base import TrialScheduler
from tandem.tune.schedulers.fifo import FIFOScheduler
from tandem.tune.search.basic_variant import BasicVariantGenerator
from tandem.tune.search.searcher import Searcher, check_mode
from tandem.tune.search.variant_generator import flatten_dict, has_search_space
from tandem.tune.stopper import make_stopper
from tandem.tune.trainable import (
    ClassTrainableRunner,
    FunctionTrainable,
    FunctionTrainableRunner,
    Trainable,
    _ClassWithParameters,
    _WithResources,
    check_function_trainable,
    is_trainable_class,
    normalize_resources,
    trainable_name,
)

logger = logging.getLogger(__name__)
TUNER_FILE = "tuner.pkl"
TRIAL_REUSE_ENV = "TANDEM_TRIAL_REUSE"
"""``0``: every trial of a function trainable gets a fresh worker process (see
``Tuner._reuse_key``); the default runs trials back to back in the processes that ended
theirs cleanly."""
TRIAL_STREAMS_ENV = "TANDEM_TRIAL_STREAMS"
"""The trials of a function trainable run as trial streams where they can (the default;
``Tuner._stream_refusal``): one job per slot whose worker runs one trial after another
(``docs/warm_workers.md``). ``0``: one job per trial."""
SLOTS_FOLDER = ".slots"
"""The experiment's sub-folder holding its trial streams' slot jobs' folders (their
workers' output between two trials)."""
_CHDIR_DEPRECATED = (
    "`chdir_to_trial_dir` is deprecated. Use the RAY_CHDIR_TO_TRIAL_DIR environment variable "
    "instead. Set it to 0 to disable the default behavior of changing the working directory."
    " (tandem never changes it: open files by absolute path, or under "
    "tune.get_context().get_trial_dir().)"
)


@record
class TuneConfig:
    """How to search.

    Args:
        metric, mode: what to optimise (``"min"`` or ``"max"``), for schedulers, searchers
            and ``get_best_result``.
        num_samples: how many times to sample the space (each ``grid_search`` combination
            ``num_samples`` times); -1 samples until the searcher or a stopper ends it.
        search_alg: a ``Searcher``, or Ray's ``SearchGenerator(searcher)`` (default: random
            and grid search).
        scheduler: a ``TrialScheduler`` (default: FIFO, every trial runs to its end).
        max_concurrent_trials: an optional cap; not needed to avoid starvation.
        time_budget_s: stop the whole experiment after this many seconds.
        reuse_actors: Ray's speed-up (default ``False``, as in Ray): the worker process of a
            trial that ended by itself runs the next trial of the same resource shape. A
            ``Trainable`` class keeps its instance and gets ``reset_config(new_config)``
            (it must return True, as in Ray); a function trainable starts with fresh module
            state (the user's modules are imported again). A trial the tuner stops, or one
            that failed, ends its process as without reuse.
        trial_name_creator: ``f(trial) -> str``: each trial's name (in the progress output,
            ``tune.get_context().get_trial_name()``, and the default folder name).
            ``trial`` has ``trial_id``, ``config``, ``experiment_tag``, ``trainable_name``.
        trial_dirname_creator: ``f(trial) -> str``: each trial's folder name in the
            experiment folder (must be unique per trial).
        seed: makes random and grid search reproducible.
    """

    metric: str | None = None
    mode: str | None = None
    num_samples: int = 1
    search_alg: Searcher | None = None
    scheduler: TrialScheduler | None = None
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    reuse_actors: bool = False
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    seed: int | None = None
    chdir_to_trial_dir: Any = "DEPRECATED"
    """Deprecated in Ray (2.8): any value raises ``DeprecationWarning``; tandem never
    changes a trial's working directory (its folder is ``tune.get_context().get_trial_dir()``)."""

    def __post_init__(self) -> None:
        if self.chdir_to_trial_dir != "DEPRECATED":
            raise DeprecationWarning(_CHDIR_DEPRECATED)
        if self.mode is not None:
            check_mode(self.mode, "TuneConfig(mode=...)")
        n = self.num_samples
        if isinstance(n, bool) or not isinstance(n, int) or (n < 1 and n != -1):
            raise ConfigError(
                f"TuneConfig(num_samples={n!r}) is invalid: use a positive integer, or -1 to "
                f"sample until a stopper or the searcher ends the experiment."
            )
        m = self.max_concurrent_trials
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ConfigError(
                f"TuneConfig(max_concurrent_trials={m!r}) is invalid: use None or an integer >= 1."
            )
        from tandem.tune.search.search_algorithm import SearchAlgorithm
        from tandem.tune.search.search_generator import SearchGenerator

        if isinstance(self.search_alg, SearchGenerator):  # Ray's wrapper: run its searcher
            object.__setattr__(self, "search_alg", self.search_alg.searcher)
        elif isinstance(self.search_alg, SearchAlgorithm):
            raise ConfigError(
                f"TuneConfig(search_alg={type(self.search_alg).__name__}(...)): a SearchAlgorithm "
                "subclass of your own (one that builds trials in next_trial) has no counterpart "
                "in tandem; subclass tandem.tune.search.Searcher and return each trial's config "
                "from suggest(trial_id), or wrap a Searcher in SearchGenerator."
            )
        if self.search_alg is not None and not isinstance(self.search_alg, Searcher):
            raise ConfigError(
                f"TuneConfig(search_alg=...) must be a tandem.tune.search.Searcher, got "
                f"{type(self.search_alg).__name__}."
            )
        for name in ("trial_name_creator", "trial_dirname_creator"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise ConfigError(
                    f"TuneConfig({name}={fn!r}) must be a function f(trial) -> str."
                )
        if self.scheduler is not None and not isinstance(self.scheduler, TrialScheduler):
            raise ConfigError(
                f"TuneConfig(scheduler=...) must be a tandem.tune.schedulers.TrialScheduler, "
                f"got {type(self.scheduler).__name__}."
            )


class Tuner:
    """Tunes ``trainable`` over ``param_space``.

    ``trainable`` is a function ``f(config)`` that calls ``tune.report``, a ``Trainable``
    subclass, or a Trainer instance (``param_space={"train_loop_config": {...},
    "scaling_config": {...}}`` then tunes its loop config and gang; each trial is a gang).
    """

    #: how the "interrupted" warning says to continue (None: ``Tuner.restore(...)``);
    #: ``tune.run`` sets its own
    _restore_hint: str | None = None

    def __init__(
        self,
        trainable: Any = None,
        *,
        param_space: Mapping[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
        _restore: dict[str, Any] | None = None,
    ) -> None:
        if trainable is None:
            raise ConfigError("Tuner() needs a trainable: a function, a Trainable class or a Trainer.")
        self.trainable = trainable
        self.param_space = dict(param_space or {})
        if isinstance(self.param_space.get("scaling_config"), ScalingConfig):
            self.param_space["scaling_config"] = as_search_dict(self.param_space["scaling_config"])
        self.tune_config = tune_config if tune_config is not None else TuneConfig()
        self.run_config = run_config if run_config is not None else RunConfig()
        if not isinstance(self.tune_config, TuneConfig):
            raise ConfigError(f"tune_config must be a TuneConfig, got {type(self.tune_config).__name__}.")
        if not isinstance(self.run_config, RunConfig):
            raise ConfigError(f"run_config must be a RunConfig, got {type(self.run_config).__name__}.")
        self._restore = _restore
        self._kind, self._fn = self._classify(trainable)
        self._stopper = make_stopper(self.run_config.stop)
        self._results: ResultGrid | None = None
        start_trial_workers_early()  # the zygote starts while the program goes on to fit()

    # -- trainable kinds -------------------------------------------------------------------
    def _classify(self, trainable: object) -> tuple[str, Any]:
        if isinstance(trainable, str):  # a name given to tune.register_trainable
            from tandem.tune.experiment.experiment import get_trainable

            trainable = get_trainable(trainable)
        inner = trainable.trainable if isinstance(trainable, _WithResources) else trainable
        if isinstance(inner, type) and issubclass(inner, FunctionTrainable):
            inner = inner._train_func  # wrap_function(fn): run fn as a function trainable
        if isinstance(inner, DataParallelTrainer):
            allowed = ("train_loop_config", "scaling_config", "datasets",
                       *inner.param_space_keys)
            for key in self.param_space:
                if key not in allowed:
                    raise ConfigError(
                        f"Tuner(trainer, param_space={{{key!r}: ...}}): with a "
                        f"{type(inner).__name__}, the param_space keys are "
                        f"{', '.join(repr(k) for k in allowed)}. Put {key!r} inside "
                        f"'train_loop_config'."
                    )
            self._refuse_checkpoint_schedule("a Trainer")
            return "trainer", inner
        if is_trainable_class(inner) or isinstance(inner, _ClassWithParameters):
            cls = inner.cls if isinstance(inner, _ClassWithParameters) else inner
            params = inner.params if isinstance(inner, _ClassWithParameters) else {}
            cc = self.run_config.checkpoint_config or CheckpointConfig()
            runner = ClassTrainableRunner(
                cls, checkpoint_frequency=cc.checkpoint_frequency or 0,
                # Ray's default for a Trainable class in a Tuner: a checkpoint at the end
                checkpoint_at_end=True if cc.checkpoint_at_end is None else cc.checkpoint_at_end,
                stop=self.run_config.stop if isinstance(self.run_config.stop, Mapping) else None,
                kwargs=params,
            )
            return "function", runner
        if callable(inner):
            check_function_trainable(inner)
            self._refuse_checkpoint_schedule("a function trainable")
            return "function", FunctionTrainableRunner(inner)
        raise ConfigError(
            f"Tuner(trainable={trainable!r:.60}) is not a trainable: give a function f(config), "
            f"a tune.Trainable subclass, or a Trainer (e.g. TorchTrainer)."
        )

    def _refuse_checkpoint_schedule(self, what: str) -> None:
        """Ray's check: ``checkpoint_frequency`` / ``checkpoint_at_end`` only apply to
        Trainable classes; a function reports its own checkpoints."""
        cc = self.run_config.checkpoint_config
        if cc is None:
            return
        for name, value in (("checkpoint_at_end", cc.checkpoint_at_end),
                            ("checkpoint_frequency", cc.checkpoint_frequency)):
            if value:
                raise ConfigError(
                    f"CheckpointConfig({name}={value!r}) cannot be used with {what} (as in "
                    f"Ray): it saves its own checkpoints. Call tune.report(metrics, "
                    f"checkpoint=...) every N iterations and at the end of the function "
                    f"instead, and remove {name}."
                )

    # -- running ---------------------------------------------------------------------------
    def fit(self) -> ResultGrid:
        """Runs the experiment and returns a ``ResultGrid`` (trial errors land in ``.errors``)."""
        tc, rc = self.tune_config, self.run_config
        searcher = tc.search_alg or BasicVariantGenerator(random_state=tc.seed)
        scheduler = tc.scheduler or FIFOScheduler()
        restored: list[TuneTrial] = []
        r = self._restore
        if r is not None:
            searcher = r.get("searcher") or searcher
            scheduler = r.get("scheduler") or scheduler
            restored = r["trials"]
        elif not searcher.set_search_properties(tc.metric, tc.mode, self.param_space) and \
                has_search_space(self.param_space or {}):
            raise ConfigError(  # Ray's check and message (a searcher with its own space)
                "You passed a `param_space` parameter to `tune.Tuner()` with unresolved "
                f"parameters, but the search algorithm ({type(searcher).__name__}) was "
                "already instantiated with a search space. Make sure that `config` does not "
                "contain any more parameter definitions - include them in the search "
                "algorithm's search space if necessary."
            )
        scheduler.set_search_properties(tc.metric, tc.mode, config=self.param_space)
        if self._kind == "trainer" and type(scheduler).__name__ == "ResourceChangingScheduler":
            raise ConfigError(
                f"{type(scheduler).__name__} changes the resources of a function or Trainable "
                f"class trial; a {type(self._fn).__name__} trial takes its resources from its "
                "ScalingConfig. Tune the train function itself with tune.with_resources("
                "train_fn, {'CPU': n}), or sample param_space={'scaling_config': ...} instead."
            )
        searcher_counts = bool(r.get("searcher_counts")) if r is not None else \
            searcher.set_num_samples(tc.num_samples if tc.num_samples != -1 else 10**12)
        metric = scheduler.metric or searcher.metric or tc.metric
        mode = scheduler.mode or searcher.mode or tc.mode
        if isinstance(metric, (list, tuple)):  # multi-objective search: no single best
            metric, mode = None, None  # ResultGrid.get_best_result(metric, mode) per objective
        strict = None
        if not isinstance(scheduler, FIFOScheduler) and scheduler.metric:
            strict = scheduler.metric
        elif not isinstance(searcher, BasicVariantGenerator) and searcher.metric:
            strict = searcher.metric

        name_prefix = trainable_name(self.trainable)
        if r is not None:
            exp_path, exp_uid, name_prefix = r["experiment_path"], r["exp_uid"], r["name_prefix"]
        else:
            storage = rc.resolved_storage_path()
            exp_name = rc.name or _default_experiment_name(storage, name_prefix)
            exp_path = storage.rstrip("/") + "/" + exp_name
            exp_uid = short_uid(5)
            self._save_tuner(exp_path)
        exp_name = exp_path.rstrip("/").rsplit("/", 1)[-1]
        verbose = 1 if rc.verbose is None else rc.verbose
        callbacks = [cb for cb in (rc.callbacks or []) if isinstance(cb, Callback)]
        # Ray's default loggers write each trial's result.json / params.json / progress.csv
        callbacks = with_default_loggers(
            callbacks, disabled=os.environ.get(DISABLE_AUTO_LOGGERS_ENV, "0") == "1")
        user_reporter = getattr(rc, "progress_reporter", None) or getattr(
            self, "_progress_reporter", None)
        reporter: Any = (
            UserReporterDisplay(user_reporter, metric, mode,
                                _scheduler_label(scheduler)) if user_reporter is not None
            else ProgressReporter(verbose, metric, mode, self._param_keys(), exp_path))
        service = get_service()
        # a stopper or a scheduler other than FIFO can decide at a result: the reports where
        # it may (all of them, unless the gate can tell) wait for the verdict, so a decision
        # takes effect at the result that triggered it; a Trainable class checkpoints when a
        # callback sets result["should_checkpoint"]
        verdicts = verdict_gate(self._stopper, scheduler, callbacks, strict)
        if verdicts is None and isinstance(self._fn, ClassTrainableRunner) and any(
                type(cb).on_trial_result is not Callback.on_trial_result
                and not isinstance(cb, LoggerCallback) for cb in callbacks):
            verdicts = lambda trial: True  # noqa: E731
        reuse_key = self._reuse_key(tc, exp_uid)
        launch = self._make_launcher(service, exp_path, exp_name, verbose, verdicts=verdicts,
                                     reuse_key=reuse_key)
        streams = self._make_streams(service, scheduler, exp_path, exp_name, verbose,
                                     verdicts, reuse_key)
        controller = TuneController(
            TrialSearch(searcher=searcher, scheduler=scheduler,
                        num_samples=tc.num_samples if tc.num_samples != -1 else 10**12,
                        searcher_counts=searcher_counts, metric=metric, mode=mode,
                        strict_metric=strict),
            TrialLimits(max_concurrent_trials=tc.max_concurrent_trials, stopper=self._stopper,
                        time_budget_s=tc.time_budget_s,
                        fail_fast=rc.failure_config.fail_fast
                        if rc.failure_config is not None else False),
            ExperimentOutput(experiment_path=exp_path, name_prefix=name_prefix, exp_uid=exp_uid,
                             callbacks=tuple(callbacks), reporter=reporter,
                             trial_name_creator=tc.trial_name_creator,
                             trial_dirname_creator=tc.trial_dirname_creator,
                             **({"restore_hint": self._restore_hint}
                                if self._restore_hint is not None else {})),
            TrialJobs(launch=launch, forget_job=service.forget,
                      done_ends_job=tc.reuse_actors and isinstance(self._fn, ClassTrainableRunner),
                      checkpoints_on_pause=isinstance(self._fn, ClassTrainableRunner),
                      resources_of=self._resources_of(),
                      cluster_resources=lambda: dict(service.cluster.resources())
                      if service.cluster is not None else {}, streams=streams),
            resumed=Resumed(trials=restored, created=r.get("created", len(restored)),
                            search_done=r.get("search_done", False)) if r is not None else None,
        )
        trials = controller.run()
        self._slot_jobs = controller.slots_started  # trial streams' slot jobs (tests)
        self._started_ahead = controller.started_ahead  # their trials handed ahead (tests)
        self._results = ResultGrid(
            [self._result_of(t) for t in trials], exp_path, metric, mode,
            trial_ids=[t.trial_id for t in trials],
        )
        return self._results

    def get_results(self) -> ResultGrid:
        """The results of ``fit()``; after ``Tuner.restore(path, ...)``, without ``fit()``,
        the results saved in that experiment folder (as Ray's ``Tuner.get_results``)."""
        if self._results is None and self._restore is not None:
            return _restored_results(self._restore, self.tune_config)
        if self._results is None:
            raise ConfigError("Tuner.get_results(): call fit() first (or Tuner.restore(...).fit()).")
        return self._results

    @staticmethod
    def _result_of(t: TuneTrial) -> Result:
        metrics = dict(t.last_result or {})
        best = t.result.best_checkpoints if t.result is not None else []
        if not best and t.checkpoint is not None and t.path:  # a trial its stop ended
            best = kept_checkpoints(t.path)
        return Result(metrics=metrics, checkpoint=t.checkpoint, path=t.path, error=t.error,
                      best_checkpoints=best, config=t.config)

    def _reuse_key(self, tc: TuneConfig, exp_uid: str) -> str | None:
        """Which trials' worker processes may run later trials: with ``reuse_actors``, Ray's
        (the process goes on, a Trainable class keeps its instance); without it, a function
        trainable's process still runs the next trial of the same resource shape when its
        trial ended well and left nothing running, put back as a fresh process starts
        (``tandem.cluster.base.CLEAN_REUSE_PREFIX``): no process start per trial, and no
        difference a trial can see but its pid. ``TANDEM_TRIAL_REUSE=0`` turns that off."""
        if tc.reuse_actors:
            return f"tune-{exp_uid}"
        if isinstance(self._fn, FunctionTrainableRunner) and \
                os.environ.get(TRIAL_REUSE_ENV, "1") != "0":
            return f"{CLEAN_REUSE_PREFIX}tune-{exp_uid}"
        return None

    def _resources_of(self) -> Callable[[dict], object] | None:
        """config -> a trial's resources, for a function/class trainable: what
        ``tune.with_resources`` (or ``Trainable.default_resource_request``) says, else one
        CPU. None for a Trainer (its ScalingConfig decides)."""
        if self._kind == "trainer":
            return None
        spec = self.trainable.resources if isinstance(self.trainable, _WithResources) else None
        if spec is None and isinstance(self._fn, ClassTrainableRunner):
            hook = self._fn.cls.default_resource_request
            if getattr(hook, "__func__", None) is not getattr(
                    Trainable.default_resource_request, "__func__", None):
                spec = hook  # Ray's hook: config -> resources

        def resources_of(config: dict) -> object:
            res = normalize_resources(spec, config)
            return res if isinstance(res, ScalingConfig) else as_placement_group_factory(res)

        if spec is None or isinstance(spec, Mapping):
            # the same for every config: built once, at the first trial (~35 µs a trial),
            # and shared as a PlacementGroupFactory or ScalingConfig given as the spec is
            fixed: list[object] = []

            def fixed_resources(config: dict) -> object:
                if not fixed:
                    fixed.append(resources_of(config))
                return fixed[0]

            return fixed_resources
        return resources_of

    def _param_keys(self) -> list[str]:
        from tandem.tune.search.space import Domain

        flat = flatten_dict(self.param_space)
        keys = [k for k, v in flat.items() if isinstance(v, Domain) or
                (isinstance(v, Mapping) and "grid_search" in v) or k.endswith("grid_search")]
        return [k.removesuffix("/grid_search") for k in keys]

    def _stream_refusal(self, service: JobService, scheduler: TrialScheduler,
                        exp_path: str, verbose: int, reuse_key: str | None) -> str | None:
        """Why this experiment's trials cannot run as trial streams (None: they can)."""
        rc, tc = self.run_config, self.tune_config
        cc = rc.checkpoint_config
        if os.environ.get(TRIAL_STREAMS_ENV, "1") == "0":
            return f"{TRIAL_STREAMS_ENV}=0 (one job per trial)"
        if not isinstance(self._fn, FunctionTrainableRunner) or self._kind != "function":
            return "not a function trainable"
        if tc.reuse_actors or reuse_key is None or not reuse_key.startswith(CLEAN_REUSE_PREFIX):
            return "reuse_actors, or clean reuse off"
        from tandem.jobs.service import LocalJobService
        from tandem.tune.schedulers.asha import ASHAScheduler
        from tandem.tune.schedulers.median import MedianStoppingRule

        if not isinstance(service, LocalJobService):
            return "jobs go to a train server"
        if type(scheduler) not in (FIFOScheduler, ASHAScheduler, MedianStoppingRule):
            return f"{type(scheduler).__name__} may pause or restart trials"
        spec = self.trainable.resources if isinstance(self.trainable, _WithResources) else None
        if callable(spec):
            return "resources per trial vary"
        if rc.failure_config is not None and rc.failure_config.max_failures != 0:
            return "FailureConfig(max_failures) restarts trials from checkpoints"
        if cc is not None and (cc.num_to_keep is not None
                               or cc.checkpoint_score_attribute is not None):
            return "CheckpointConfig keeps a trial's best checkpoints"
        if rc.log_to_file or verbose >= 2 or log_to_driver():
            return "trial output is echoed or teed"
        if "://" in exp_path:
            return "remote storage"
        return None

    def _make_streams(self, service: JobService, scheduler: TrialScheduler, exp_path: str,
                      exp_name: str, verbose: int, verdicts: GateOf | None,
                      reuse_key: str | None) -> TrialStreams | None:
        """Trial streams (``TrialStreams``) for this experiment, or None when its trials run
        one job each (``_stream_refusal`` says why)."""
        refused = self._stream_refusal(service, scheduler, exp_path, verbose, reuse_key)
        if refused is not None:
            logger.debug("trials run one job each: %s", refused)
            return None
        from tandem.train.stream import (
            STREAM_AHEAD,
            STREAM_NEXT,
            RunStream,
            StreamedRun,
            prepare_output,
            stream_error,
        )

        base, fn_bytes = self._launch_parts
        resources = self.trainable.resources if isinstance(self.trainable, _WithResources) else None
        slots_path = exp_path.rstrip("/") + "/" + SLOTS_FOLDER
        handlers: dict[str, Any] = {STREAM_NEXT: AskSubmitter("stream_next", default=None),
                                    STREAM_AHEAD: AskSubmitter("stream_ahead", default=None)}
        if verdicts is not None:
            handlers["tune_verdict"] = AskSubmitter("verdict", default="continue")
        count = [0]
        scaling: list[ScalingConfig] = []

        def describe(trial: TuneTrial, ahead: bool) -> StreamedRun:
            return StreamedRun(
                trial.trial_id, trial.name, StorageContext(exp_path, trial.dirname, exp_name),
                trial.config,
                metadata={AWAIT_VERDICT: verdicts(trial)} if verdicts is not None else {},
                ahead=ahead)

        def launch(trial: TuneTrial, listener: JobListener) -> JobView:
            if not scaling:
                res = trial.resources if trial.resources is not None else normalize_resources(
                    resources, trial.config)
                if isinstance(res, PlacementGroupFactory):
                    res = res.required_resources
                scaling.append(res if isinstance(res, ScalingConfig)
                               else ScalingConfig(num_workers=1, resources_per_worker=res))
            count[0] += 1
            name = f"slot_{count[0]:05d}"
            stream = RunStream(fn_bytes, base._takes_config)  # it asks for its trials
            run = replace(
                base, config={}, scaling_config=scaling[0],
                metadata={**base.metadata, TRIAL_RESOURCES:
                          _resources_state(trial.placement_group_factory)},
                storage=StorageContext(slots_path, name, exp_name),
                trial=TrialContext(name, name, reuse_key=reuse_key, result_files=False),
                echo_prefix=None, preload=("tandem.tune",), call_handlers=handlers,
            )
            return service.submit(job_spec(run, listener=listener,
                                           fn_bytes=cloudpickle.dumps(stream)))

        return TrialStreams(launch=launch, describe=describe,
                            error_of=lambda trial, outcome: stream_error(outcome, trial.path),
                            prepare=lambda trial: prepare_output(
                                StorageContext(exp_path, trial.dirname, exp_name).run_path))

    def _make_launcher(self, service: JobService, exp_path: str, exp_name: str,
                       verbose: int, verdicts: GateOf | None = None,
                       reuse_key: str | None = None) -> Callable[
            [TuneTrial, Checkpoint | None, JobListener], JobView]:
        rc = self.run_config
        kind, fn = self._kind, self._fn
        resources = self.trainable.resources if isinstance(self.trainable, _WithResources) else None
        if kind == "trainer":
            assert isinstance(fn, DataParallelTrainer)
            base = fn.run_description()
            base = replace(base, run_config=replace(
                base.run_config, verbose=verbose,
                failure_config=rc.failure_config or base.run_config.failure_config,
                checkpoint_config=rc.checkpoint_config or base.run_config.checkpoint_config,
                log_to_file=rc.log_to_file or base.run_config.log_to_file,
                priority=rc.priority if rc.priority is not None else base.run_config.priority,
                owner=rc.owner or base.run_config.owner,
            ))
        else:
            if resources is not None and not callable(resources):
                normalize_resources(resources)  # fail fast on a malformed spec
            base = RunDescription(
                train_fn=fn, trainer_name="Trainable",
                run_config=RunConfig(failure_config=rc.failure_config,
                                     checkpoint_config=rc.checkpoint_config, verbose=verbose,
                                     log_to_file=rc.log_to_file, priority=rc.priority,
                                     owner=rc.owner),
            )

        fn_bytes = pickle_train_fn(base.train_fn)  # once for every trial
        self._launch_parts = (base, fn_bytes)
        space_keys: tuple[str, ...] = (
            self._fn.param_space_keys if isinstance(self._fn, DataParallelTrainer) else ())

        scalings: dict[tuple, ScalingConfig] = {}

        def one_worker(res: Any) -> ScalingConfig:
            """One worker holding ``res``: built (and checked) once per resource shape."""
            try:
                key = tuple(sorted(res.items())) if isinstance(res, Mapping) else None
                hash(key)
            except TypeError:
                key = None
            scaling = scalings.get(key) if key is not None else None
            if scaling is None:
                scaling = ScalingConfig(num_workers=1, resources_per_worker=res)
                if key is not None and len(scalings) < 64:
                    scalings[key] = scaling
            return scaling

        def launch(trial: TuneTrial, checkpoint: Checkpoint | None,
                   listener: JobListener) -> JobView:
            if kind == "trainer":
                fields = self._trial_fields(base, trial.config, space_keys)
            else:
                res = trial.resources if trial.resources is not None else normalize_resources(
                    resources, trial.config)
                if isinstance(res, PlacementGroupFactory):  # one worker holds all bundles
                    res = res.required_resources
                scaling = res if isinstance(res, ScalingConfig) else one_worker(res)
                fields = {"config": trial.config, "scaling_config": scaling,
                          "metadata": {**base.metadata, TRIAL_RESOURCES:
                                       _resources_state(trial.placement_group_factory)}}
            handlers: dict[str, Any] = {}
            if verdicts is not None:
                fields["metadata"] = {**fields.get("metadata", base.metadata),
                                      AWAIT_VERDICT: verdicts(trial)}
                # answered by this tuner, also across a train server's connection; a trial
                # nobody follows any more (the client gone) goes on
                handlers["tune_verdict"] = AskSubmitter("verdict", default="continue")
            run = replace(
                base, **fields, storage=StorageContext(exp_path, trial.dirname, exp_name),
                trial=TrialContext(trial.trial_id, trial.name,
                                   start_iteration=_resume_iteration(checkpoint),
                                   time_offset_s=trial.time_total_s, reuse_key=reuse_key,
                                   result_files=False),  # the logger callbacks write them
                resume_from_checkpoint=checkpoint or base.resume_from_checkpoint,
                echo_prefix=f"{trial.name}, " if verbose >= 2 or log_to_driver() else None,
                preload=("tandem.tune",), call_handlers=handlers,
            )
            return service.submit(job_spec(run, listener=listener, fn_bytes=fn_bytes))

        return launch

    @staticmethod
    def _trial_fields(base: RunDescription, config: Mapping[str, Any],
                      keys: tuple[str, ...] = ()) -> dict[str, Any]:
        """A trial of a Trainer: the fields of its description that the trial's
        ``param_space`` sets (loop config, scaling, datasets, and the trainer's own
        ``param_space_keys``, merged into the loop config)."""
        loop = dict(base.config or {})
        loop.update(config.get("train_loop_config") or {})
        for key in keys:  # e.g. boosted trees' params, merged one level deep
            if key in config:
                value, old = config[key], loop.get(key)
                loop[key] = {**old, **value} if isinstance(value, Mapping) and isinstance(
                    old, Mapping) else value
        fields: dict[str, Any] = {"config": loop}
        sc = config.get("scaling_config")
        if isinstance(sc, ScalingConfig):
            fields["scaling_config"] = sc
        elif isinstance(sc, Mapping):
            fields["scaling_config"] = replace(base.scaling_config, **sc)
        if "datasets" in config:
            fields["datasets"] = dict(config["datasets"])
        return fields

    # -- restore ---------------------------------------------------------------------------
    def _save_tuner(self, exp_path: str) -> None:
        make_dirs(exp_path)
        blob = {"param_space": self.param_space, "tune_config": replace(
            self.tune_config, search_alg=None, scheduler=None), "run_config": self.run_config}
        try:
            data = cloudpickle.dumps(blob)
        except Exception as e:  # noqa: BLE001
            logger.warning("Tuner.restore will need param_space: cannot pickle it (%s)", e)
            return
        write_file(join_path(exp_path, TUNER_FILE), data)

    @classmethod
    def can_restore(cls, path: str, storage_filesystem: object = None) -> bool:
        """Whether ``path`` (a folder or an fsspec URL, or a folder of ``storage_filesystem``)
        holds an experiment to restore."""
        if storage_filesystem is not None:
            from tandem.train.api.config import storage_url

            path = storage_url(storage_filesystem, path)
        return read_file(join_path(_expand(path), STATE_FILE)) is not None

    @classmethod
    def restore(cls, path: str, trainable: object, *, resume_unfinished: bool = True,
                resume_errored: bool = False, restart_errored: bool = False,
                param_space: Mapping[str, object] | None = None,
                storage_filesystem: object = None,
                _resume_config: ResumeConfig | None = None,
                resume_config: ResumeConfig | None = None) -> Tuner:
        """Resumes an interrupted experiment from its folder.

        Finished trials are kept; unfinished ones continue from their latest checkpoints;
        errored ones are resumed (``resume_errored``) or started over (``restart_errored``).
        ``storage_filesystem`` (a ``pyarrow.fs.FileSystem``) is the filesystem ``path`` is
        on, as in ``RunConfig(storage_filesystem=...)``.
        ``_resume_config`` (Ray's name; ``resume_config`` too): a ``tune.ResumeConfig``
        saying that per trial state, instead of the flags.
        """
        if storage_filesystem is not None:
            from tandem.train.api.config import storage_url

            path = storage_url(storage_filesystem, path)
        path = _expand(path)
        raw = read_file(join_path(path, STATE_FILE))
        if raw is None:
            raise ConfigError(
                f"Tuner.restore({path!r}): no {STATE_FILE} there, so it is not an experiment "
                f"folder (or the experiment never started). Pass the folder that fit() printed."
            )
        state = json.loads(raw)
        blob = read_file(join_path(path, TUNER_FILE))
        saved: dict = cloudpickle.loads(blob) if blob is not None else {}
        trials = [trial_from_state(d) for d in state["trials"]]
        requeue_trials(trials, _resume_config or resume_config or ResumeConfig.from_flags(
            resume_unfinished, resume_errored, restart_errored), remove_dir)
        restore: dict = {"trials": trials, "experiment_path": path, "exp_uid": state["exp_uid"],
                         "name_prefix": state["name_prefix"], "created": state["created"],
                         "search_done": state.get("search_done", False)}
        blob = read_file(join_path(path, SEARCHER_FILE))
        if blob is not None:
            restore["searcher"] = load_searcher(blob)
        blob = read_file(join_path(path, SCHEDULER_FILE))
        if blob is not None:
            restore["scheduler"] = cloudpickle.loads(blob)
        if restore.get("searcher") is not None:
            restore["searcher_counts"] = isinstance(restore["searcher"], BasicVariantGenerator)
        ps = param_space if param_space is not None else saved.get("param_space")
        if ps is None:
            raise ConfigError(
                f"Tuner.restore({path!r}): the param_space was not saved with the experiment "
                f"(it could not be pickled); pass it again: Tuner.restore(path, trainable, "
                f"param_space=...)."
            )
        rc = saved.get("run_config") or RunConfig()
        tc = saved.get("tune_config") or TuneConfig()
        return cls(trainable, param_space=ps, tune_config=tc, run_config=rc, _restore=restore)


def _resources_state(pgf: PlacementGroupFactory) -> dict[str, Any]:
    """A factory as plain data, for the trial's worker (``tune.get_context()``)."""
    bundles = pgf.bundles
    if pgf.head_bundle_is_empty:
        bundles = [{}, *bundles]
    return {"bundles": bundles, "strategy": pgf.strategy}


def _scheduler_label(scheduler: object) -> str:
    """Ray's name for a scheduler in "Using <name> scheduling algorithm."."""
    name = type(scheduler).__name__
    return "FIFO" if name == "FIFOScheduler" else name


def _restored_results(restore: Mapping[str, Any], tc: TuneConfig) -> ResultGrid:
    trials: list[TuneTrial] = list(restore["trials"])
    return ResultGrid([Tuner._result_of(t) for t in trials], restore["experiment_path"],
                      tc.metric, tc.mode, trial_ids=[t.trial_id for t in trials])


def _default_experiment_name(storage: str, prefix: str) -> str:
    """``<trainable>_<date>_<time>_<uid>``: two experiments never share a folder by default,
    even when started in the same second (name one yourself to resume it later)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    while True:
        name = f"{prefix}_{stamp}_{short_uid(4)}"
        if "://" in storage or not os.path.exists(os.path.join(storage, name)):
            return name


def _resume_iteration(checkpoint: Checkpoint | None) -> int:
    """Where a (re)started trial's ``training_iteration`` count goes on, as in Ray: from the
    iteration its checkpoint was reported at, or from 0 when it starts without one."""
    if checkpoint is None:
        return 0
    m = re.search(r"checkpoint_(\d+)$", checkpoint.path.rstrip("/"))
    return int(m.group(1)) if m else 0


def _expand(path: str) -> str:
    """A local folder made absolute; an fsspec URL as given."""
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))
