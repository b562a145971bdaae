"""tandem.tune: search spaces, searchers, trial schedulers and the Tuner.

Every trial is a train job on the same job service as ``trainer.fit()``::

    from tandem import tune
    tuner = tune.Tuner(train_fn, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
                       tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=20))
    best = tuner.fit().get_best_result()

Each name's module is imported when the name is first used (``tandem._core.lazy``);
looking up ``Tuner``/``run`` starts the worker side early (``tandem.tune._early``).
"""

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem.train.api.checkpoint import Checkpoint
    from tandem.train.api.config import CheckpointConfig, FailureConfig, RunConfig, SyncConfig
    from tandem.train.api.result import Result
    from tandem.tune._factories import create_scheduler, create_searcher
    from tandem.tune._run import run, run_experiments
    from tandem.tune.analysis import ExperimentAnalysis
    from tandem.tune.callback import Callback, LoggerCallback, TBXLoggerCallback
    from tandem.tune.controller import TuneError
    from tandem.tune.execution.placement_groups import PlacementGroupFactory
    from tandem.tune.experiment import Experiment
    from tandem.tune.experiment.experiment import register_env, register_trainable
    from tandem.tune.integration.mlflow import MLflowLoggerCallback
    from tandem.tune.integration.wandb import WandbLoggerCallback
    from tandem.tune.progress_reporter import CLIReporter, JupyterNotebookReporter, ProgressReporter
    from tandem.tune.result_grid import ResultGrid
    from tandem.tune.resume import ResumeConfig
    from tandem.tune.search.space import (
        choice,
        grid_search,
        lograndint,
        loguniform,
        qlograndint,
        qloguniform,
        qrandint,
        qrandn,
        quniform,
        randint,
        randn,
        sample_from,
        uniform,
    )
    from tandem.tune.session import (
        TuneContext,
        get_checkpoint,
        get_context,
        is_session_enabled,
        report,
    )
    from tandem.tune.stopper import Stopper
    from tandem.tune.trainable import Trainable, with_parameters, with_resources
    from tandem.tune.tuner import TuneConfig, Tuner

__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "Experiment",
    "ExperimentAnalysis",
    "FailureConfig",
    "JupyterNotebookReporter",
    "LoggerCallback",
    "MLflowLoggerCallback",
    "PlacementGroupFactory",
    "ProgressReporter",
    "Result",
    "ResultGrid",
    "ResumeConfig",
    "RunConfig",
    "Stopper",
    "SyncConfig",
    "TBXLoggerCallback",
    "Trainable",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "Tuner",
    "WandbLoggerCallback",
    "choice",
    "create_scheduler",
    "create_searcher",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "is_session_enabled",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "register_env",
    "register_trainable",
    "report",
    "run",
    "run_experiments",
    "sample_from",
    "uniform",
    "with_parameters",
    "with_resources",
]

_lazy_getattr, __dir__ = lazy_exports(__name__, globals(), {
    "Checkpoint": "tandem.train.api.checkpoint",
    "CheckpointConfig": "tandem.train.api.config",
    "FailureConfig": "tandem.train.api.config",
    "RunConfig": "tandem.train.api.config",
    "SyncConfig": "tandem.train.api.config",
    "Result": "tandem.train.api.result",
    "create_scheduler": "tandem.tune._factories",
    "create_searcher": "tandem.tune._factories",
    "run": "tandem.tune._run",
    "run_experiments": "tandem.tune._run",
    "ExperimentAnalysis": "tandem.tune.analysis",
    "Callback": "tandem.tune.callback",
    "LoggerCallback": "tandem.tune.callback",
    "TBXLoggerCallback": "tandem.tune.callback",
    "TuneError": "tandem.tune.controller",
    "PlacementGroupFactory": "tandem.tune.execution.placement_groups",
    "Experiment": "tandem.tune.experiment",
    "register_env": "tandem.tune.experiment.experiment",
    "register_trainable": "tandem.tune.experiment.experiment",
    "MLflowLoggerCallback": "tandem.tune.integration.mlflow",
    "WandbLoggerCallback": "tandem.tune.integration.wandb",
    "CLIReporter": "tandem.tune.progress_reporter",
    "JupyterNotebookReporter": "tandem.tune.progress_reporter",
    "ProgressReporter": "tandem.tune.progress_reporter",
    "ResultGrid": "tandem.tune.result_grid",
    "ResumeConfig": "tandem.tune.resume",
    "choice": "tandem.tune.search.space",
    "grid_search": "tandem.tune.search.space",
    "lograndint": "tandem.tune.search.space",
    "loguniform": "tandem.tune.search.space",
    "qlograndint": "tandem.tune.search.space",
    "qloguniform": "tandem.tune.search.space",
    "qrandint": "tandem.tune.search.space",
    "qrandn": "tandem.tune.search.space",
    "quniform": "tandem.tune.search.space",
    "randint": "tandem.tune.search.space",
    "randn": "tandem.tune.search.space",
    "sample_from": "tandem.tune.search.space",
    "uniform": "tandem.tune.search.space",
    ")": "tandem.tune.search.space",
    "TuneContext": "tandem.tune.session",
    "get_checkpoint": "tandem.tune.session",
    "get_context": "tandem.tune.session",
    "is_session_enabled": "tandem.tune.session",
    "report": "tandem.tune.session",
    "Stopper": "tandem.tune.stopper",
    "Trainable": "tandem.tune.trainable",
    "with_parameters": "tandem.tune.trainable",
    "with_resources": "tandem.tune.trainable",
    "TuneConfig": "tandem.tune.tuner",
    "Tuner": "tandem.tune.tuner",
})

#: Looking one of these up shows the program will run trials: the worker side starts now,
#: before the driver imports the tuner (``tandem.tune._early``).
_RUNS_TRIALS = frozenset({"Tuner", "run", "run_experiments"})


def __getattr__(name: str) -> object:
    if name in _RUNS_TRIALS:
        from tandem.tune._early import start_trial_workers_early

        start_trial_workers_early()
    return _lazy_getattr(name)
