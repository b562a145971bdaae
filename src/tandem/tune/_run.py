"""``tune.run``: the older entry point, a thin layer over ``Tuner``.

Every argument maps onto ``Tuner``/``TuneConfig``/``RunConfig``; there is no second way of
running trials. ``docs/migration.md`` lists each argument and its current spelling.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tandem._core.errors import ConfigError
from tandem.train.api.config import CheckpointConfig, FailureConfig, RunConfig
from tandem.tune.analysis import ExperimentAnalysis
from tandem.tune.callback import Callback
from tandem.tune.controller import TuneError
from tandem.tune.schedulers.base import TrialScheduler
from tandem.tune.search.searcher import Searcher
from tandem.tune.trainable import _WithResources, trainable_name, with_resources
from tandem.tune.trial import Trial
from tandem.tune.tuner import TuneConfig, Tuner

logger = logging.getLogger(__name__)

_RESUME_MODES = ("AUTO", "LOCAL", "REMOTE", "ERRORED_ONLY")


def run(
    run_or_experiment: object,
    *,
    config: Mapping[str, object] | None = None,
    stop: Mapping[str, object] | Callable[..., bool] | object | None = None,
    num_samples: int = 1,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    scheduler: TrialScheduler | None = None,
    search_alg: Searcher | None = None,
    metric: str | None = None,
    mode: str | None = None,
    resources_per_trial: Any = None,
    max_failures: int = 0,
    local_dir: str | None = None,
    storage_path: str | None = None,
    name: str | None = None,
    resume: bool | str | None = None,
    verbose: int | None = None,
    callbacks: Sequence[Callback] | None = None,
    max_concurrent_trials: int | None = None,
    time_budget_s: float | None = None,
    raise_on_failed_trial: bool = True,
    reuse_actors: bool = False,
    trial_name_creator: Callable[[Trial], str] | None = None,
    trial_dirname_creator: Callable[[Trial], str] | None = None,
    sync_config: object = None,
    progress_reporter: object = None,
    log_to_file: bool | str | tuple[str, str] = False,
    checkpoint_config: CheckpointConfig | None = None,
    storage_filesystem: object = None,
    fail_fast: bool | str = False,
    restore: str | None = None,
    resume_config: Any = None,
    export_formats: Sequence[str] | None = None,
    chdir_to_trial_dir: object = "DEPRECATED",
) -> ExperimentAnalysis:
    """Runs an experiment the older way; returns an ``ExperimentAnalysis``.

    The same as ``Tuner(trainable, param_space=config, tune_config=TuneConfig(metric, mode,
    num_samples, search_alg, scheduler), run_config=RunConfig(name, storage_path, stop,
    FailureConfig(max_failures), CheckpointConfig(...))).fit()``.

    Args:
        run_or_experiment: a function ``f(config)`` that calls ``tune.report`` (a dict or
            keywords), or a ``tune.Trainable`` subclass (current or underscore names).
        config: the search space (``param_space``).
        checkpoint_freq, checkpoint_at_end: for a ``Trainable`` class, checkpoint every N
            steps and/or when the trial ends.
        keep_checkpoints_num, checkpoint_score_attr: keep this many checkpoints per trial,
            the best by this metric (prefix ``"min-"`` for lower-is-better).
        resources_per_trial: each trial's resources (``{"cpu": 2, "gpu": 1}``), as
            ``tune.with_resources``.
        max_failures: restarts of a failing trial, from its latest checkpoint (-1: always).
        local_dir, storage_path: where the experiment folder goes (the same thing).
        name: the experiment folder's name (with ``resume``, default: the trainable's name).
        resume: ``False``; ``True``/``"AUTO"``/``"LOCAL"``: continue the experiment in
            ``<storage_path>/<name>`` if it exists (else start it); ``"ERRORED_ONLY"``: rerun
            only its failed trials; ``"AUTO+ERRORED"``/``"AUTO+RESTART_ERRORED"``: also
            resume / restart failed trials.
        verbose: 0 silent; 1 and 2 status lines; 3 also echoes the trials' output.
        raise_on_failed_trial: raise ``TuneError`` if a trial ended in error (the older
            default); with False, failed trials are in ``analysis.trials`` with status
            ``"ERROR"``.
        reuse_actors: as ``TuneConfig(reuse_actors=...)`` (Ray's speed-up: a finished
            trial's worker process runs the next trial).
        trial_name_creator, trial_dirname_creator: as in ``TuneConfig``.
        log_to_file: as ``RunConfig.log_to_file`` (Ray's meaning: the trial's stdout / stderr
            also written to files in its folder).
        sync_config, progress_reporter: refused unless left at their defaults
            (tandem writes to storage directly, prints its own progress at ``verbose``, and
            always keeps each worker's output in ``<trial>/logs/``); the error says so.

    Raises:
        ConfigError: an argument that cannot work (the message says which and the fix).
        TuneError: a trial failed and ``raise_on_failed_trial`` is True.
    """
    from tandem.tune.experiment.experiment import Experiment

    if isinstance(run_or_experiment, Experiment):
        exp = run_or_experiment
        given = exp.run_kwargs()
        local = dict(locals())
        for key, value in given.items():  # the Experiment's settings, where not passed here
            default = inspect.signature(run).parameters[key].default
            if local.get(key) == default:
                local[key] = value
        return run(exp.run, **{k: local[k] for k in inspect.signature(run).parameters
                               if k != "run_or_experiment"})
    if chdir_to_trial_dir != "DEPRECATED":
        from tandem.tune.tuner import _CHDIR_DEPRECATED

        raise DeprecationWarning(_CHDIR_DEPRECATED)
    if export_formats:
        raise ConfigError(
            f"tune.run(export_formats={export_formats!r}): tandem exports no models at the end "
            "of a trial; save the model in the trainable (a checkpoint, or a file in "
            "tune.get_context().get_trial_dir()) and export it from the best result's "
            "checkpoint."
        )
    if checkpoint_config is not None and (checkpoint_freq or checkpoint_at_end
                                          or keep_checkpoints_num is not None
                                          or checkpoint_score_attr is not None):
        raise ConfigError(
            "tune.run(checkpoint_config=...) was given with checkpoint_freq/"
            "checkpoint_at_end/keep_checkpoints_num/checkpoint_score_attr; these are the "
            "same settings (the older spellings): set them in checkpoint_config only."
        )
    if progress_reporter is not None and not (
            callable(getattr(progress_reporter, "should_report", None))
            and callable(getattr(progress_reporter, "report", None))):
        raise ConfigError(
            f"tune.run(progress_reporter={progress_reporter!r}): give a "
            f"tune.ProgressReporter (tune.CLIReporter(...), tune.JupyterNotebookReporter(...) "
            f"or a subclass with should_report() and report())."
        )
    tune_config = TuneConfig(
        metric=metric, mode=mode, num_samples=num_samples, search_alg=search_alg,
        scheduler=scheduler, max_concurrent_trials=max_concurrent_trials,
        time_budget_s=time_budget_s, reuse_actors=reuse_actors,
        trial_name_creator=trial_name_creator, trial_dirname_creator=trial_dirname_creator,
    )
    # sync_config (refused) and log_to_file (validated) are checked by RunConfig, before any work
    RunConfig(sync_config=sync_config, log_to_file=log_to_file)
    trainable = _check_trainable(run_or_experiment)
    if resources_per_trial is not None:
        if isinstance(trainable, _WithResources):
            raise ConfigError(
                "tune.run(resources_per_trial=...) was given for a trainable already wrapped "
                "with tune.with_resources(...); set the resources in one place only."
            )
        trainable = with_resources(trainable, resources_per_trial)
    if local_dir is not None and storage_path is not None and local_dir != storage_path:
        raise ConfigError(
            f"tune.run(local_dir={local_dir!r}, storage_path={storage_path!r}): these are the "
            f"same setting; pass only storage_path."
        )
    resume_kw: dict[str, Any] | None = _resume_options(resume)
    if resume_kw is not None and name is None:
        name = trainable_name(trainable)

    score_attr, score_order = checkpoint_score_attr, "max"
    if score_attr is not None and score_attr.startswith("min-"):
        score_attr, score_order = score_attr[len("min-"):], "min"
    elif score_attr is not None and score_attr.startswith("max-"):
        score_attr = score_attr[len("max-"):]
    run_config = RunConfig(
        name=name, storage_path=storage_path or local_dir, stop=stop, callbacks=callbacks,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
        checkpoint_config=checkpoint_config or CheckpointConfig(
            num_to_keep=keep_checkpoints_num, checkpoint_score_attribute=score_attr,
            checkpoint_score_order=score_order, checkpoint_frequency=checkpoint_freq,
            checkpoint_at_end=checkpoint_at_end,
        ),
        verbose=_verbosity(verbose), sync_config=sync_config, log_to_file=log_to_file,
        storage_filesystem=storage_filesystem,
    )
    exp_path = os.path.join(run_config.resolved_storage_path(), name) if name else None
    if restore is not None:  # Ray's: continue the experiment in that folder
        logger.info("tune.run(restore=%r): continuing that experiment", restore)
        tuner = Tuner.restore(restore, trainable, param_space=config,
                              storage_filesystem=storage_filesystem,
                              **({"resume_config": resume_config} if resume_config is not None
                                 else resume_kw or {}))
    elif resume_config is not None and exp_path is not None and Tuner.can_restore(exp_path):
        tuner = Tuner.restore(exp_path, trainable, param_space=config,
                              resume_config=resume_config)
    elif resume_kw is not None and exp_path is not None and Tuner.can_restore(exp_path):
        logger.info("tune.run(resume=%r): continuing the experiment in %s", resume, exp_path)
        tuner = Tuner.restore(exp_path, trainable, param_space=config, **resume_kw)
    else:
        if resume_kw is not None:
            logger.info("tune.run(resume=%r): no experiment in %s yet; starting it.", resume, exp_path)
        tuner = Tuner(trainable, param_space=config, tune_config=tune_config, run_config=run_config)
    if progress_reporter is not None:
        tuner._progress_reporter = progress_reporter  # type: ignore[attr-defined]
    tuner._restore_hint = "tune.run(..., resume=True)"  # Ray's hint for tune.run
    grid = tuner.fit()

    default_metric = metric or getattr(scheduler, "metric", None) or getattr(search_alg, "metric", None)
    default_mode = mode or getattr(scheduler, "mode", None) or getattr(search_alg, "mode", None)
    analysis = ExperimentAnalysis(grid, default_metric=default_metric, default_mode=default_mode)
    failed = [t for t in analysis.trials if t.status == "ERROR"]
    if failed and raise_on_failed_trial:
        lines = "\n".join(f"  {t.trial_id}: {type(t.error).__name__}: {t.error}"
                          for t in failed[:10])
        raise TuneError(
            f"{len(failed)} of {len(analysis.trials)} trials failed (after "
            f"max_failures={max_failures} retries each):\n{lines}\nTheir folders under "
            f"{grid.experiment_path} hold error.txt. Pass tune.run(..., "
            f"raise_on_failed_trial=False) to get the analysis with the failed trials in it."
        )
    return analysis


def _check_trainable(trainable: object) -> Any:
    if isinstance(trainable, str):  # a name given to tune.register_trainable
        from tandem.tune.experiment.experiment import get_trainable

        return get_trainable(trainable)
    if isinstance(trainable, (list, tuple, dict)):
        raise ConfigError(
            f"tune.run() takes one trainable, got a {type(trainable).__name__}; run one "
            f"experiment per call (or use tune.Tuner)."
        )
    return trainable


def _resume_options(resume: bool | str | None) -> dict[str, bool] | None:
    """``resume`` → keyword arguments of ``Tuner.restore``, or None to start afresh."""
    if resume is None or resume is False:
        return None
    if resume is True:
        return {}
    if isinstance(resume, str):
        base, _, extra = resume.upper().partition("+")
        if base in ("AUTO", "LOCAL", "REMOTE") and extra in ("", "ERRORED", "RESTART_ERRORED"):
            return {"resume_errored": extra == "ERRORED", "restart_errored": extra == "RESTART_ERRORED"}
        if base == "ERRORED_ONLY" and not extra:
            return {"resume_unfinished": False, "restart_errored": True}
    raise ConfigError(
        f"tune.run(resume={resume!r}) is not supported: use False, True, "
        f"{', '.join(repr(m) for m in _RESUME_MODES)}, 'AUTO+ERRORED' or 'AUTO+RESTART_ERRORED'."
    )


def _verbosity(verbose: int | None) -> int | None:
    """The older 0-3 scale → ``RunConfig.verbose`` (0 silent, 1 status, 2 trial output)."""
    if verbose is None:
        return None
    v = int(verbose)
    if v < 0 or v > 3:
        raise ConfigError(f"tune.run(verbose={verbose!r}) is invalid: use 0, 1, 2 or 3.")
    return {0: 0, 1: 1, 2: 1, 3: 2}[v]


def run_experiments(
    experiments: Any,
    scheduler: TrialScheduler | None = None,
    verbose: int | None = None,
    progress_reporter: object = None,
    resume: bool | str | None = None,
    resume_config: object = None,
    reuse_actors: bool = False,
    raise_on_failed_trial: bool = True,
    concurrent: bool = True,
    callbacks: Sequence[Callback] | None = None,
) -> list[Any]:
    """Runs each experiment (an ``Experiment``, or a ``{name: spec}`` mapping whose specs are
    ``Experiment`` keywords), one after the other, and returns all their trials (Ray's
    ``tune.run_experiments``).

    Raises:
        ConfigError: ``resume_config`` (use ``Tuner.restore``) or ``progress_reporter``.
    """
    from tandem.tune.experiment.experiment import Experiment

    if resume_config is not None:
        raise ConfigError(
            "run_experiments(resume_config=...) is not supported: resume an experiment with "
            "tune.Tuner.restore(path, trainable, resume_errored=..., restart_errored=...).")
    if isinstance(experiments, Experiment):
        experiments = [experiments]
    elif isinstance(experiments, Mapping):
        experiments = [Experiment(name, **dict(spec)) for name, spec in experiments.items()]
    trials: list[Any] = []
    for exp in experiments:
        if not isinstance(exp, Experiment):
            raise ConfigError(f"run_experiments(): {exp!r:.60} is not an Experiment.")
        analysis = run(exp, scheduler=scheduler, verbose=verbose,
                       progress_reporter=progress_reporter, resume=resume,
                       reuse_actors=reuse_actors, raise_on_failed_trial=raise_on_failed_trial,
                       callbacks=callbacks)
        trials.extend(analysis.trials)
    return trials
