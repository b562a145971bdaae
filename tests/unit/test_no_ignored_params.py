"""No parameter is accepted and ignored (issue 17, item 9).

Walks the public signatures users call (the config classes, trainers, Tuner, tune.run, the
schedulers and searchers, tandem.init, the model layer, the boosted-tree trainers) and fails
on a parameter that is stored but never read. See ``tests/unit/_param_audit.py`` for how a
parameter counts as read; ``TABLE`` names, for every stored setting, the function that acts
on it (checked by AST), or the value that is refused (checked by calling).

A new public parameter makes this test fail until it is either wired to code that uses it
(then name that function in ``TABLE``) or refused with an error that names it.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.unit import _param_audit as A
from tests.unit._param_audit import Reader as R
from tests.unit._param_audit import Refused, Same

#: The modules users import from; optional ones (added by later work) are walked if present.
MODULES = [
    "tandem", "tandem.train", "tandem.train.torch", "tandem.train.xgboost",
    "tandem.train.lightgbm", "tandem.tune", "tandem.tune.schedulers", "tandem.tune.search",
    "tandem.tune.stopper", "tandem.tune.logger", "tandem.tune.integration",
    "tandem.tune.integration.ray_train", "tandem.model",
    "tandem.air.integrations.mlflow", "tandem.air.integrations.wandb",
    "tandem.train.v2.api.config", "tandem.train.v2.api.data_parallel_trainer",
    "tandem.train.v2.api.context", "tandem.train.v2.api.result",
    "tandem.train.v2.api.train_fn_utils", "tandem.train.v2.api.callback",
    "tandem.train.v2.api.report_config", "tandem.train.v2.api.reported_checkpoint",
    "tandem.train.v2.api.validation_config",
    "tandem.train.backend", "tandem.train.collective", "tandem.train.context",
    "tandem.tune.utils", "tandem.tune.experiment", "tandem.tune.search.sample",
    "tandem.tune.schedulers.async_hyperband", "tandem.tune.schedulers.median_stopping_rule",
    "tandem.tune.schedulers.trial_scheduler",
]

#: Classes the framework builds and hands to users (results, contexts, handles, decisions);
#: users read them and never pass them settings.
NOT_USER_BUILT = {
    "tandem.train.Result", "tandem.model.ModelResult", "tandem.tune.ResultGrid",
    "tandem.train.TrainContext", "tandem.tune.TuneContext", "tandem.train.StorageContext",
    "tandem.train.RunCallbackContext", "tandem.tune.schedulers.Decision",
    "tandem.tune.schedulers.TrialSuggestion", "tandem.tune.search.Variant",
    "tandem.model.ServeHandle", "tandem.model.ModelJobHandle", "tandem.train.PreemptionInfo",
    "tandem.train.ReportedCheckpoint", "tandem.tune.experiment.Trial",
    "tandem.train.v2.api.context.DistributedTrainContext",
    "tandem.train.v2.api.context.LocalTrainContext",
}

#: Methods the framework calls on objects users give it (hooks and interface methods): their
#: parameters are what tandem passes, not what users pass, so a hook may ignore some.
HOOKS = {
    "set_search_properties", "suggest", "sample", "forward", "training_step",
    "validation_step", "handle_result", "choose_trial_to_run", "setup", "step",
    "save_checkpoint", "load_checkpoint", "reset_config", "after_iteration",
    "after_training", "before_training", "configure_optimizers", "preprocess", "postprocess",
    "setup_data", "log_trial_result", "log_trial_start", "log_trial_end",
    "init_params", "apply",  # JaxModel's hooks: the user's model defines them
    "initial_config",  # PopulationBasedTrainingReplay: the tune controller asks it
}

_TRAIN = "tandem.train.api"
_TUNE = "tandem.tune"
_CTRL = "tandem.train._internal.controller:TrainController"
_SCHED = "tandem.tune.schedulers"
_MODEL = "tandem.model"
_GBDT = "tandem.train._internal.gbdt.callbacks"


def _trainer(**kw: Any) -> Any:
    from tandem.train import DataParallelTrainer

    return DataParallelTrainer(lambda: None, **kw)


_BASE = ("a log-uniform distribution is the same in every base; Ray deprecated `base` "
         "and ignores it too")
_DEPRECATED = "deprecated in Ray Train V2: every call raises DeprecationWarning, as Ray's does"


def _experiment(**kw: Any) -> Any:
    from tandem import tune

    return tune.Experiment("e", run=lambda config: None, **kw)


def _tune_run(**kw: Any) -> Any:
    from tandem import tune

    # a trainable tune.run refuses: if the parameter under test were accepted, the call
    # still fails (naming the trainable, not the parameter) before any trial starts
    return tune.run("not-a-trainable", **kw)


#: entry point -> parameter -> what happens to it. Function parameters that their function
#: reads need no entry (the audit checks the body); every stored setting needs one.
TABLE: dict[str, dict[str, A.Disposition]] = {
    "tandem.train.Checkpoint": {
        "path": R(f"{_TRAIN}.checkpoint:Checkpoint.as_directory"),
    },
    "tandem.train.CheckpointConfig": {
        "num_to_keep": R("tandem.train._internal.checkpoints:CheckpointManager._enforce_limit"),
        "checkpoint_score_attribute": R("tandem.train._internal.checkpoints:CheckpointManager._score"),
        "checkpoint_score_order": R("tandem.train._internal.checkpoints:CheckpointManager._score"),
        "checkpoint_frequency": R("tandem.tune.tuner:Tuner._classify"
                                  "|tandem.train._internal.gbdt.trainer:BoostedTreeTrainer.__init__"),
        "checkpoint_at_end": R("tandem.tune.tuner:Tuner._classify"),
    },
    "tandem.train.CheckpointStrategy": {
        "num_to_keep": R("tandem.train.legacy._trainer:CheckpointStrategy.to_checkpoint_config"),
        "checkpoint_score_attribute": R(
            "tandem.train.legacy._trainer:CheckpointStrategy.score_attribute"),
        "checkpoint_score_order": R(
            "tandem.train.legacy._trainer:CheckpointStrategy.to_checkpoint_config"),
    },
    "tandem.train.DataConfig": {
        "datasets_to_split": R(f"{_TRAIN}.run:job_spec"
                               f"|{_TRAIN}.config:DataConfig.check_names"),
        "execution_options": Refused({"x": 1}),
        "enable_shard_locality": Same(
            "a placement hint in Ray (read shards from the node holding the blocks): which "
            "rows each worker gets does not change; tandem's shards are local already"),
    },
    "tandem.train.DataParallelTrainer": {
        "train_loop_per_worker": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description",
                                   attr="train_loop_per_worker"),
        "train_loop_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "backend_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "datasets": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "dataset_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "validation_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "metadata": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "resume_from_checkpoint": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "scaling_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
        "run_config": R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description"),
    },
    "tandem.train.RunDescription": {
        **{name: R(f"{_TRAIN}.run:job_spec") for name in (
            "train_fn", "config", "scaling_config", "run_config", "datasets", "backend_config",
            "resume_from_checkpoint", "metadata", "trainer_name", "trial", "priority", "tags",
            "echo_prefix", "preload", "legacy", "call_handlers", "dataset_config",
            "validation_config")},
        "storage": R(f"{_TRAIN}.run:RunDescription.run_storage"),
    },
    "tandem.train.FailureConfig": {
        "max_failures": R("tandem.train._internal.failure:FailurePolicy.within_budget"),
        "fail_fast": R("tandem.tune.tuner:Tuner.fit"),
        "max_preemption_failures": R(
            "tandem.train._internal.failure:FailurePolicy.within_preemption_budget"),
        "preemption_grace_s": R(f"{_CTRL}._on_preempt"),
        "controller_failure_limit": Same(
            "tandem's controller is code in the driver process, not an actor on a node that "
            "can be lost: its failure is a bug that a restart would repeat, so the run ends "
            "with ControllerError whatever the limit"),
        "relax_collectives_on_preemption": Same(
            "tandem stops a preempted gang whole (a scheduler preemption takes every rank), "
            "so no collective ever waits on a lost rank: there is nothing to relax"),
    },
    "tandem.train.RunConfig": {
        "name": R(f"{_TRAIN}.run:RunDescription.run_storage|tandem.tune.tuner:Tuner.fit"),
        "storage_path": R(f"{_TRAIN}.config:RunConfig.resolved_storage_path"),
        "storage_filesystem": R(f"{_TRAIN}.config:RunConfig.resolved_storage_path"),
        "failure_config": R(f"{_TRAIN}.run:job_spec|tandem.tune.tuner:Tuner.fit"),
        "checkpoint_config": R(f"{_TRAIN}.run:job_spec|tandem.tune.tuner:Tuner._make_launcher"),
        "callbacks": R(f"{_TRAIN}.run:job_spec|tandem.tune.tuner:Tuner.fit"),
        "stop": R("tandem.tune.tuner:Tuner.__init__"),
        "verbose": R(f"{_TRAIN}.run:job_spec|tandem.tune.tuner:Tuner.fit"
                     "|tandem.train.progress:console_progress"),
        "sync_config": Refused(object()),
        "log_to_file": R(f"{_TRAIN}.config:RunConfig.log_files"),
        "priority": R(f"{_TRAIN}.run:job_spec"),
        "owner": R(f"{_TRAIN}.run:job_spec"),
        "worker_runtime_env": R(f"{_TRAIN}.run:job_spec"),
        "logging_config": R(f"{_TRAIN}.run:job_spec"),
        "progress_reporter": R("tandem.tune.tuner:Tuner.fit"),
        "local_dir": Refused("/tmp/somewhere"),
    },
    "tandem.train.LoggingConfig": {"log_level": R(f"{_TRAIN}.run:job_spec")},
    "tandem.train.SyncConfig": {
        "sync_artifacts": R(f"{_TRAIN}.config:RunConfig.__post_init__"),
        **{name: Same("workers write results and checkpoints straight to storage_path, so "
                      "nothing is ever left to sync: there is no sync for these to time")
           for name in ("sync_period", "sync_timeout", "sync_artifacts_on_checkpoint")},
    },
    **{f"tandem.train.{mod}.{cls}": {"path": R(f"{_TRAIN}.checkpoint:Checkpoint.as_directory")}
       for mod, cls in (("torch", "TorchCheckpoint"), ("xgboost", "XGBoostCheckpoint"),
                        ("lightgbm", "LightGBMCheckpoint"))},
    "tandem.train.torch.accelerate": {"amp": Same(_DEPRECATED)},
    "tandem.train.torch.backward": {"tensor": Same(_DEPRECATED)},
    "tandem.train.torch.prepare_optimizer": {"optimizer": Same(_DEPRECATED)},
    "tandem.tune.PlacementGroupFactory": {
        "strategy": R("tandem.tune.execution.placement_groups:PlacementGroupFactory.strategy",
                      attr="_strategy"),
        "*args": R("tandem.tune.execution.placement_groups:PlacementGroupFactory._key",
                   attr="_args"),
        "**kwargs": R("tandem.tune.execution.placement_groups:PlacementGroupFactory._key",
                      attr="_kwargs"),
    },
    **{f"{_SCHED}.{cls}": {
        "add_bundles": R(f"{_SCHED}.resource_changing_scheduler:DistributeResources._validate"),
        "increase_by": R(f"{_SCHED}.resource_changing_scheduler:DistributeResources.__call__"),
        "increase_by_times": R(
            f"{_SCHED}.resource_changing_scheduler:DistributeResources._add_two_bundles"),
        "reserve_resources": R(f"{_SCHED}.resource_changing_scheduler:"
                               "DistributeResources._get_total_available_resources"),
        **({"metric": R(f"{_SCHED}.resource_changing_scheduler:"
                        "DistributeResourcesToTopJob._get_new_added_bundles"),
            "mode": R(f"{_SCHED}.resource_changing_scheduler:"
                      "DistributeResourcesToTopJob._metric_op")} if "Top" in cls else {}),
    } for cls in ("DistributeResources", "DistributeResourcesToTopJob")},
    "tandem.tune.search.SearchGenerator": {
        "searcher": R("tandem.tune.tuner:TuneConfig.__post_init__"),
    },
    "tandem.tune.search.SearchGenerator.add_configurations": {"experiments": Same(
        "tandem's loop takes the param space from the Tuner: the call raises, saying so")},
    "tandem.train.ValidationConfig": {
        "fn": R("tandem.train._internal.validation:_child"),
        "task_config": R("tandem.train.v2.api.validation_config:merged_kwargs"),
        "ray_remote_kwargs": R("tandem.train._internal.validation:ValidationPlan.of"),
    },
    "tandem.train.ValidationTaskConfig": {
        "fn_kwargs": R("tandem.train.v2.api.validation_config:merged_kwargs"),
        "timeout_s": R("tandem.train._internal.validation:_timeout"),
    },
    "tandem.train.ScalingConfig": {
        "num_workers": R(f"{_TRAIN}.config:ScalingConfig.max_workers"),
        "elastic_resize_monitor_interval_s": R(f"{_TRAIN}.run:job_spec"),
        "use_gpu": R(f"{_TRAIN}.config:ScalingConfig.worker_bundle"),
        "resources_per_worker": R(f"{_TRAIN}.config:ScalingConfig.worker_bundle"),
        "placement_strategy": R(f"{_TRAIN}.run:job_spec"),
        "trainer_resources": Refused({"CPU": 1}),
        "accelerator_type": R(f"{_TRAIN}.config:ScalingConfig._with_accelerator"),
        "label_selector": Refused({"zone": "a"}),
        "use_tpu": Refused(True),
        "topology": Refused("2x2"),
    },
    "tandem.train.Trainer": {
        "max_retries": R("tandem.train.legacy._trainer:Trainer._start", attr="_max_retries"),
        "backend": R("tandem.train.legacy._trainer:Trainer._start", attr="_backend_config"),
        "num_workers": R("tandem.train.legacy._trainer:Trainer._start", attr="_scaling"),
        "logdir": R("tandem.train.legacy._trainer:Trainer._next_run_name", attr="_logdir"),
    },
    "tandem.train.torch.TorchTrainer": {"train_loop_per_worker": R(
        f"{_TRAIN}.trainer:DataParallelTrainer.run_description", attr="train_loop_per_worker")},
    "tandem.train.torch.TorchConfig": {
        "backend": R("tandem.train.backends.torch:TorchConfig.backend", attr="backend_name"),
        "init_method": Same(
            "Ray's 'env' and 'tcp' only say how ranks find rank 0; both build the same "
            "process group. tandem's ranks meet through a TCPStore whose port rank 0 picks, "
            "and MASTER_ADDR/MASTER_PORT are set as with 'env'; other values are refused"),
        "timeout_s": R("tandem.train.backends.torch:TorchConfig.backend"),
    },
    "tandem.tune.Trainable": {
        "config": R("tandem.tune.trainable:Trainable.__init__"),
    },
    "tandem.tune.TuneConfig": {
        "chdir_to_trial_dir": Refused(False),
        "metric": R("tandem.tune.tuner:Tuner.fit"),
        "mode": R("tandem.tune.tuner:Tuner.fit"),
        "num_samples": R("tandem.tune.tuner:Tuner.fit"),
        "search_alg": R("tandem.tune.tuner:Tuner.fit"),
        "scheduler": R("tandem.tune.tuner:Tuner.fit"),
        "max_concurrent_trials": R("tandem.tune.tuner:Tuner.fit"),
        "time_budget_s": R("tandem.tune.tuner:Tuner.fit"),
        "reuse_actors": R("tandem.tune.tuner:Tuner.fit"),
        "trial_name_creator": R("tandem.tune.tuner:Tuner.fit"
                                "|tandem.tune.controller:TuneController._new_trial",
                                attr="trial_name_creator"),
        "trial_dirname_creator": R("tandem.tune.tuner:Tuner.fit"
                                   "|tandem.tune.controller:TuneController._new_trial",
                                   attr="trial_dirname_creator"),
        "seed": R("tandem.tune.tuner:Tuner.fit"),
    },
    "tandem.tune.CLIReporter": {
        "metric_columns": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_metric_columns"),
        "parameter_columns": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_parameter_columns"),
        "total_samples": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_total_samples"),
        "max_progress_rows": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_max_progress_rows"),
        "max_error_rows": R("tandem.tune.progress_reporter:TuneReporterBase._errors", attr="_max_error_rows"),
        "max_column_length": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_max_column_length"),
        "max_report_frequency": R("tandem.tune.progress_reporter:TuneReporterBase.should_report", attr="_max_report_freqency"),
        "infer_limit": R("tandem.tune.progress_reporter:TuneReporterBase._infer_user_metrics", attr="_infer_limit"),
        "print_intermediate_tables": R("tandem.tune.progress_reporter:TuneReporterBase._progress_str", attr="_print_intermediate_tables"),
        "metric": R("tandem.tune.progress_reporter:TuneReporterBase._current_best_trial", attr="_metric"),
        "mode": R("tandem.tune.progress_reporter:TuneReporterBase._current_best_trial", attr="_mode"),
        "sort_by_metric": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_sort_by_metric"),
    },
    "tandem.tune.JupyterNotebookReporter": {
        "metric_columns": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_metric_columns"),
        "parameter_columns": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_parameter_columns"),
        "total_samples": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_total_samples"),
        "max_progress_rows": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_max_progress_rows"),
        "max_error_rows": R("tandem.tune.progress_reporter:TuneReporterBase._errors", attr="_max_error_rows"),
        "max_column_length": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_max_column_length"),
        "max_report_frequency": R("tandem.tune.progress_reporter:TuneReporterBase.should_report", attr="_max_report_freqency"),
        "infer_limit": R("tandem.tune.progress_reporter:TuneReporterBase._infer_user_metrics", attr="_infer_limit"),
        "print_intermediate_tables": R("tandem.tune.progress_reporter:TuneReporterBase._progress_str", attr="_print_intermediate_tables"),
        "metric": R("tandem.tune.progress_reporter:TuneReporterBase._current_best_trial", attr="_metric"),
        "mode": R("tandem.tune.progress_reporter:TuneReporterBase._current_best_trial", attr="_mode"),
        "sort_by_metric": R("tandem.tune.progress_reporter:TuneReporterBase._table", attr="_sort_by_metric"),
        "overwrite": R("tandem.tune.progress_reporter:JupyterNotebookReporter.report", attr="_overwrite"),
    },
    "tandem.tune.ResumeConfig": {
        "finished": R("tandem.tune.resume:requeue_trials"),
        "unfinished": R("tandem.tune.resume:requeue_trials"),
        "errored": R("tandem.tune.resume:requeue_trials"),
    },
    "tandem.tune.Tuner": {
        "param_space": R("tandem.tune.tuner:Tuner.fit"),
        "tune_config": R("tandem.tune.tuner:Tuner.fit"),
        "run_config": R("tandem.tune.tuner:Tuner.fit"),
    },
    "tandem.tune.run": {
        "progress_reporter": Refused(object(), call=_tune_run),
        "sync_config": Refused(object(), call=_tune_run),
        "log_to_file": R("tandem.tune._run:run"),
    },
    f"{_SCHED}.ASHAScheduler": {
        "time_attr": R(f"{_SCHED}.asha:ASHAScheduler.on_trial_result", attr="_time_attr"),
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
        # the rungs (built from these) decide every promotion
        **{name: R(f"{_SCHED}.asha:ASHAScheduler.on_trial_result", attr="_brackets")
           for name in ("max_t", "grace_period", "reduction_factor", "brackets",
                        "stop_last_trials")},
        "seed": R(f"{_SCHED}.asha:ASHAScheduler.on_trial_add", attr="_rng"),
    },
    f"{_SCHED}.FIFOScheduler": {
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
    },
    f"{_SCHED}.HyperBandScheduler": {
        "time_attr": R(f"{_SCHED}.hyperband:HyperBandScheduler.on_trial_result",
                       attr="_time_attr"),
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
        "stop_last_trials": R(f"{_SCHED}.hyperband:HyperBandScheduler.on_trial_add",
                              attr="_stop_last_trials"),
        "max_t": R(f"{_SCHED}.hyperband:HyperBandScheduler.on_trial_add", attr="_max_t_attr"),
        "reduction_factor": R(f"{_SCHED}.hyperband:HyperBandScheduler.on_trial_add",
                              attr="_eta"),
    },
    f"{_SCHED}.MedianStoppingRule": {
        "time_attr": R(f"{_SCHED}.median:MedianStoppingRule.on_trial_result", attr="_time_attr"),
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
        "grace_period": R(f"{_SCHED}.median:MedianStoppingRule.on_trial_result",
                          attr="_grace_period"),
        "min_samples_required": R(f"{_SCHED}.median:MedianStoppingRule.on_trial_result",
                                  attr="_min_samples_required"),
        "min_time_slice": R(f"{_SCHED}.median:MedianStoppingRule._on_insufficient_samples",
                            attr="_min_time_slice"),
        "hard_stop": R(f"{_SCHED}.median:MedianStoppingRule.on_trial_result", attr="_hard_stop"),
    },
    f"{_SCHED}.PopulationBasedTraining": {
        "time_attr": R(f"{_SCHED}.pbt:PopulationBasedTraining.on_trial_result",
                       attr="_time_attr"),
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
        "perturbation_interval": R(f"{_SCHED}.pbt:PopulationBasedTraining.on_trial_result",
                                   attr="_perturbation_interval"),
        "burn_in_period": R(f"{_SCHED}.pbt:PopulationBasedTraining.on_trial_result",
                            attr="_burn_in_period"),
        "quantile_fraction": R(f"{_SCHED}.pbt:PopulationBasedTraining._quantiles",
                               attr="_quantile_fraction"),
        "resample_probability": R(f"{_SCHED}.pbt:PopulationBasedTraining._get_new_config",
                                  attr="_resample_probability"),
        "custom_explore_fn": R(f"{_SCHED}.pbt:PopulationBasedTraining._get_new_config",
                               attr="_custom_explore_fn"),
        "log_config": R(f"{_SCHED}.pbt:PopulationBasedTraining._exploit", attr="_log_config"),
        "require_attrs": R(f"{_SCHED}.pbt:PopulationBasedTraining.on_trial_result",
                           attr="_require_attrs"),
        "seed": R(f"{_SCHED}.pbt:PopulationBasedTraining._get_new_config", attr="_rng"),
        "synch": R(f"{_SCHED}.pbt:PopulationBasedTraining.on_trial_result", attr="_synch"),
    },
    f"{_SCHED}.TrialScheduler": {
        "metric": R(f"{_SCHED}.base:TrialScheduler.metric", attr="_metric"),
    },
    # the library searchers and schedulers (issue 21, item 2)
    "tandem.tune.schedulers.HyperBandForBOHB": {
        "time_attr": R("tandem.tune.schedulers.hb_bohb:HyperBandForBOHB.on_trial_add", attr="_time_attr"),
        "metric": R("tandem.tune.schedulers.base:TrialScheduler.metric", attr="_metric"),
        "stop_last_trials": R("tandem.tune.schedulers.hb_bohb:HyperBandForBOHB.on_trial_add", attr="_stop_last_trials"),
        "max_t": R("tandem.tune.schedulers.hb_bohb:HyperBandForBOHB.on_trial_add", attr="_max_t_attr"),
        "reduction_factor": R("tandem.tune.schedulers.hb_bohb:HyperBandForBOHB.on_trial_add", attr="_eta"),
    },
    "tandem.tune.search.AxSearch": {
        "points_to_evaluate": R("tandem.tune.search.ax.ax_search:AxSearch._suggest", attr="_points_to_evaluate"),
        "parameter_constraints": R("tandem.tune.search.ax.ax_search:AxSearch._setup_experiment", attr="_parameter_constraints"),
        "outcome_constraints": R("tandem.tune.search.ax.ax_search:AxSearch._setup_experiment", attr="_outcome_constraints"),
        "ax_client": R("tandem.tune.search.ax.ax_search:AxSearch._process_result", attr="_ax"),
        "**ax_kwargs": R("tandem.tune.search.ax.ax_search:AxSearch._setup_experiment", attr="_ax_kwargs"),
    },
    "tandem.tune.search.BayesOptSearch": {
        "points_to_evaluate": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._suggest", attr="_points_to_evaluate"),
        "random_state": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._setup_optimizer", attr="_random_state"),
        "random_search_steps": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._suggest", attr="random_search_trials"),
        "verbose": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._setup_optimizer", attr="_verbose"),
        "patience": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._suggest", attr="_patience"),
        "skip_duplicate": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._suggest", attr="_skip_duplicate"),
        "analysis": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._setup_optimizer", attr="_analysis"),
        "repeat_float_precision": R("tandem.tune.search.bayesopt.bayesopt_search:BayesOptSearch._suggest"),
    },
    "tandem.tune.search.HEBOSearch": {
        "points_to_evaluate": R("tandem.tune.search.hebo.hebo_search:HEBOSearch._setup_optimizer", attr="_points_to_evaluate"),
        "evaluated_rewards": R("tandem.tune.search.hebo.hebo_search:HEBOSearch._setup_optimizer", attr="_evaluated_rewards"),
        "**kwargs": R("tandem.tune.search.hebo.hebo_search:HEBOSearch._setup_optimizer", attr="_hebo_config"),
    },
    "tandem.tune.search.HyperOptSearch": {
        "points_to_evaluate": R("tandem.tune.search.hyperopt.hyperopt_search:HyperOptSearch._setup_hyperopt", attr="_points_to_evaluate"),
        "random_state_seed": R("tandem.tune.search.hyperopt.hyperopt_search:HyperOptSearch._suggest", attr="rstate"),
    },
    "tandem.tune.search.NevergradSearch": {
        "optimizer_kwargs": R("tandem.tune.search.nevergrad.nevergrad_search:NevergradSearch._setup_nevergrad", attr="_optimizer_kwargs"),
    },
    "tandem.tune.search.Repeater": {
        "searcher": R("tandem.tune.search.repeater:Repeater.suggest"),
        "repeat": R("tandem.tune.search.repeater:Repeater.suggest"),
        "set_index": R("tandem.tune.search.repeater:Repeater.suggest", attr="_set_index"),
    },
    "tandem.tune.search.TuneBOHB": {
        "bohb_config": R("tandem.tune.search.bohb.bohb_search:TuneBOHB._setup_bohb", attr="_bohb_config"),
        "metric": R("tandem.tune.search.searcher:Searcher.metric", attr="_metric"),
        "points_to_evaluate": R("tandem.tune.search.bohb.bohb_search:TuneBOHB._suggest", attr="_points_to_evaluate"),
        "seed": R("tandem.tune.search.bohb.bohb_search:TuneBOHB._setup_bohb", attr="_seed"),
        "max_concurrent": R("tandem.tune.search.bohb.bohb_search:TuneBOHB._suggest", attr="_max_concurrent"),
    },
    "tandem.tune.search.ZOOptSearch": {
        "metric": R("tandem.tune.search.searcher:Searcher.metric", attr="_metric"),
        "points_to_evaluate": R("tandem.tune.search.zoopt.zoopt_search:ZOOptSearch._setup_zoopt", attr="_points_to_evaluate"),
        "parallel_num": R("tandem.tune.search.zoopt.zoopt_search:ZOOptSearch._setup_zoopt"),
        "**kwargs": R("tandem.tune.search.zoopt.zoopt_search:ZOOptSearch._setup_zoopt", attr="kwargs"),
    },
    "tandem.tune.search.BasicVariantGenerator": {
        "points_to_evaluate": R("tandem.tune.search.basic_variant:"
                                "BasicVariantGenerator._make_iterator", attr="_points"),
        "constant_grid_search": R("tandem.tune.search.basic_variant:"
                                  "BasicVariantGenerator._make_iterator",
                                  attr="_constant_grid_search"),
        "max_concurrent": R("tandem.tune.search.basic_variant:BasicVariantGenerator.suggest",
                            attr="_max_concurrent"),
    },
    "tandem.tune.search.Categorical": {
        "categories": R("tandem.tune.search.space:Categorical._sample_one"),
    },
    "tandem.tune.search.Float.loguniform": {"base": Same(_BASE)},
    "tandem.tune.search.Normal": {
        "mean": R("tandem.tune.search.space:Float._apply_sampler"),
        "sd": R("tandem.tune.search.space:Float._apply_sampler")},
    "tandem.tune.search.sample.LogUniform": {
        "base": R("tandem.tune.search.space:Float._apply_sampler")},
    "tandem.tune.search.sample.Quantized": {
        "sampler": R("tandem.tune.search.space:_unwrap"),
        "q": R("tandem.tune.search.space:_unwrap")},
    "tandem.tune.search.Integer.loguniform": {"base": Same(_BASE)},
    "tandem.train.DataParallelTrainer.restore": {
        "*args": Same(_DEPRECATED), "**kwargs": Same(_DEPRECATED)},
    "tandem.train.DataParallelTrainer.can_restore": {
        "*args": Same(_DEPRECATED), "**kwargs": Same(_DEPRECATED)},
    "tandem.tune.Experiment": {
        **{name: R("tandem.tune.experiment.experiment:Experiment.run_kwargs")
           for name in ("name", "stop", "config", "resources_per_trial", "num_samples",
                        "trial_name_creator", "trial_dirname_creator", "max_failures",
                        "time_budget_s", "storage_path", "checkpoint_config", "log_to_file")},
        "run": R("tandem.tune._run:run"),
        "export_formats": Refused(["h5"], call=_experiment),
        "restore": Refused("/tmp/somewhere", call=_experiment),
        "local_dir": Refused("/tmp/somewhere", call=_experiment),
    },
    "tandem.tune.run_experiments": {
        "concurrent": Same("the experiments run one after the other; each one's trials run "
                           "concurrently, and the results are those of concurrent runs"),
    },
    "tandem.tune.utils.UtilMonitor": {"delay": R("tandem.tune.utils:UtilMonitor.run")},
    "tandem.tune.utils.warn_if_slow": {
        name: R("tandem.tune.utils:warn_if_slow.__exit__")
        for name in ("name", "threshold", "message", "disable")},
    "tandem.tune.search.ConcurrencyLimiter": {
        "searcher": R("tandem.tune.search.searcher:ConcurrencyLimiter.suggest"),
        "max_concurrent": R("tandem.tune.search.searcher:ConcurrencyLimiter.suggest"),
        "batch": R("tandem.tune.search.searcher:ConcurrencyLimiter.on_trial_complete"),
    },
    "tandem.tune.search.Integer": {
        "lower": R("tandem.tune.search.space:Integer._bounds", attr="lower"),
        "upper": R("tandem.tune.search.space:Integer._bounds", attr="upper"),
        "log": R("tandem.tune.search.space:Integer._sample_one", attr="log"),
        "q": R("tandem.tune.search.space:Integer._sample_one"),
        "base": Same("a log-uniform distribution is the same in every base (Ray's "
                     "lograndint samples the same way); the base is kept for repr"),
    },
    "tandem.tune.search.OptunaSearch": {
        "space": R("tandem.tune.search.optuna:OptunaSearch._setup", attr="_space"),
        "points_to_evaluate": R("tandem.tune.search.optuna:OptunaSearch._setup",
                                attr="_points"),
        "study_name": R("tandem.tune.search.optuna:OptunaSearch._setup", attr="_study_name"),
        "storage": R("tandem.tune.search.optuna:OptunaSearch._setup", attr="_storage"),
        "evaluated_rewards": R("tandem.tune.search.optuna:OptunaSearch._setup",
                               attr="_rewards"),
    },
    **{f"tandem.train.{lib}.RayTrainReportCallback": {
        "metrics": R(f"{_GBDT}:ReportCallbackBase._report_metrics", attr="_metrics"),
        "results_postprocessing_fn": R(f"{_GBDT}:ReportCallbackBase._report_metrics",
                                       attr="_post"),
        "frequency": R(f"{_GBDT}:ReportCallbackBase._due", attr="_frequency"),
        "filename": R(f"{_GBDT}:ReportCallbackBase._save", attr="_filename"),
        "extra_files": R(f"{_GBDT}:ReportCallbackBase._save", attr="_extra"),
        "checkpoint_at_end": R(at_end, attr="_checkpoint_at_end"),
    } for lib, at_end in (
        ("xgboost", "tandem.train.xgboost.callback:RayTrainReportCallback.after_training"),
        ("lightgbm", "tandem.train.lightgbm.callback:RayTrainReportCallback.__call__"))},
    **{f"tandem.train.{path}": {
        name: R(f"{_TRAIN}.trainer:DataParallelTrainer.run_description")
        for name in ("train_loop_config", "metadata", "validation_config")
    } for path in ("xgboost.XGBoostTrainer", "lightgbm.LightGBMTrainer")},
    "tandem.tune.stopper.CombinedStopper": {
        "*stoppers": R(f"{_TUNE}.stopper:CombinedStopper.__call__", attr="_stoppers"),
    },
    "tandem.tune.stopper.ExperimentPlateauStopper": {
        name: R(f"{_TUNE}.stopper:ExperimentPlateauStopper.{where}", attr=f"_{name}")
        for name, where in (("metric", "__call__"), ("mode", "__call__"),
                            ("std", "has_plateaued"), ("top", "__call__"),
                            ("patience", "stop_all"))
    },
    "tandem.tune.stopper.FunctionStopper": {
        "function": R(f"{_TUNE}.stopper:FunctionStopper.__call__", attr="fn"),
    },
    "tandem.tune.stopper.MaximumIterationStopper": {
        "max_iter": R(f"{_TUNE}.stopper:MaximumIterationStopper.__call__", attr="_max_iter"),
    },
    "tandem.tune.stopper.TrialPlateauStopper": {
        name: R(f"{_TUNE}.stopper:TrialPlateauStopper.__call__", attr=f"_{name}")
        for name in ("metric", "std", "num_results", "grace_period", "metric_threshold", "mode")
    },
    "tandem.train.xgboost.XGBoostConfig": {
        "timeout_s": R("tandem.train.xgboost.trainer:XGBoostConfig.backend"),
        "xgboost_communicator": Refused("federated"),
    },
    "tandem.train.lightgbm.LightGBMConfig": {
        "timeout_s": R("tandem.train.lightgbm.trainer:LightGBMConfig.backend"),
    },
    **{f"{_MODEL}.{cls}": {"config": R(f"{_MODEL}._api:_resolve_model")}
       for cls in ("Model", "TorchModel", "XGBoostModel", "LightGBMModel", "TensorflowModel",
                   "JaxModel")},
    f"{_MODEL}.TrainSettings": {
        "num_workers": R(f"{_MODEL}._api:_build"),
        "use_gpu": R(f"{_MODEL}._api:_build|{_MODEL}._loop:run_worker"),
        "num_epochs": R(f"{_MODEL}._loop:run_worker"),
        "batch_size": R(f"{_MODEL}._data:WorkerData._batches"),
        "resources_per_worker": R(f"{_MODEL}._api:_build"),
        "checkpoint_every": R(f"{_MODEL}._loop:run_worker|{_MODEL}._trees:tree_model_loop"),
        "max_failures": R(f"{_MODEL}._api:_build"),
        "label_column": R(f"{_MODEL}._loop:_worker_data|{_MODEL}._trees:_worker_state"),
        "precision": R(f"{_MODEL}._loop:run_worker"),
        "seed": R(f"{_MODEL}._loop:run_worker"),
        "on_nonfinite_loss": R(f"{_MODEL}._loop:run_worker"),
        "shuffle": R(f"{_MODEL}._loop:_worker_data"),
    },
    f"{_MODEL}.TuneSettings": {
        name: R(f"{_MODEL}._api:tune")
        for name in ("num_samples", "metric", "mode", "scheduler", "search_alg",
                     "max_concurrent_trials")
    },
    f"{_MODEL}.ModelRef": {
        name: R(f"{_MODEL}.registry._api:resolve") for name in ("name", "version", "alias")
    },
    f"{_MODEL}.ServeSettings": {
        "expose": R(f"{_MODEL}.serve._api:serve|{_MODEL}.serve._settings:ServeSettings.needs_key"),
        "api_key": R(f"{_MODEL}.serve._api:serve|{_MODEL}.serve._runner:ServeRunner._start_http"),
        "route_prefix": R(f"{_MODEL}.serve._settings:ServeSettings.prefix_for"),
        "host": R(f"{_MODEL}.serve._runner:ServeRunner.prepare"),
        "port": R(f"{_MODEL}.serve._runner:ServeRunner.prepare"),
        "num_replicas": R(f"{_MODEL}.serve._api:serve"),
        "resources_per_replica": R(f"{_MODEL}.serve._settings:ServeSettings.bundle"),
        "num_gpus": R(f"{_MODEL}.serve._settings:ServeSettings.bundle"),
        "ray_actor_options": R(f"{_MODEL}.serve._settings:ServeSettings.bundle"),
        "max_batch_size": R(f"{_MODEL}.serve._runner:ServeRunner._make_front"),
        "batch_wait_ms": R(f"{_MODEL}.serve._runner:ServeRunner._make_front"),
        "max_request_bytes": R(f"{_MODEL}.serve._runner:ServeRunner._start_http"),
        "request_timeout_s": R(f"{_MODEL}.serve._runner:ServeRunner._make_front"),
        "max_queued_requests": R(f"{_MODEL}.serve._runner:ServeRunner._make_front"),
        "max_restarts": R(f"{_MODEL}.serve._runner:ServeRunner._on_replica_event"),
    },
    "tandem.tune.MLflowLoggerCallback": {
        **{name: R("tandem.tune.integration.mlflow:MLflowLoggerCallback.setup") for name in (
            "tracking_uri", "registry_uri", "experiment_name", "tracking_token")},
        "tags": R("tandem.tune.integration.mlflow:MLflowLoggerCallback.log_trial_start"),
        "save_artifact": R("tandem.tune.integration.mlflow:MLflowLoggerCallback.log_trial_end",
                           attr="should_save_artifact"),
        "log_params_on_trial_end": R(
            "tandem.tune.integration.mlflow:MLflowLoggerCallback.log_trial_start"),
    },
    "tandem.tune.WandbLoggerCallback": {
        "project": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_start"),
        "group": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_start"),
        "api_key_file": R("tandem.tune.integration.wandb:WandbLoggerCallback.setup",
                          attr="api_key_path"),
        "api_key": R("tandem.tune.integration.wandb:WandbLoggerCallback.setup"),
        "excludes": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_start"),
        "log_config": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_start"),
        "upload_checkpoints": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_save"),
        "upload_timeout": R("tandem.tune.integration.wandb:WandbLoggerCallback.on_experiment_end",
                            attr="_upload_timeout"),
        "video_kwargs": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_result"),
        "image_kwargs": R("tandem.tune.integration.wandb:WandbLoggerCallback.log_trial_result"),
    },
    "tandem.init": {
        "**ray_kwargs": Refused({"object_store_memory": 10**9}),
    },
}


@pytest.fixture(scope="module")
def index() -> A.SourceIndex:
    return A.SourceIndex()


def _params(index: A.SourceIndex) -> list[A.Param]:
    return [p for p in A.walk_params(MODULES, NOT_USER_BUILT, index)
            if p.is_constructor or p.entry.rsplit(".", 1)[-1] not in HOOKS
            and not p.entry.rsplit(".", 1)[-1].startswith("on_")]


def test_no_public_parameter_is_accepted_and_ignored(index: A.SourceIndex) -> None:
    params = _params(index)
    assert len(params) > 300, "the walk found too few parameters: is a module missing?"
    problems = A.audit(params, TABLE, index)
    assert not problems, "\n" + "\n".join(problems)


def test_the_table_names_only_real_parameters(index: A.SourceIndex) -> None:
    """A stale entry (a parameter renamed or removed) would hide nothing, but says the
    table is no longer what it claims: every entry must match a walked parameter."""
    walked = {(p.entry, p.name) for p in _params(index)}
    stale = [f"{e}({n})" for e, d in TABLE.items() for n in d if (e, n) not in walked]
    assert not stale, stale


def test_entry_points_the_issue_names_are_walked(index: A.SourceIndex) -> None:
    entries = {p.entry for p in _params(index)}
    for name in ("tandem.init", "tandem.train.ScalingConfig", "tandem.train.RunConfig",
                 "tandem.train.FailureConfig", "tandem.train.CheckpointConfig",
                 "tandem.train.DataConfig", "tandem.tune.TuneConfig", "tandem.tune.Tuner",
                 "tandem.tune.Tuner.restore", "tandem.tune.run",
                 "tandem.train.DataParallelTrainer", "tandem.train.torch.TorchTrainer",
                 "tandem.train.torch.TorchConfig", "tandem.train.Trainer",
                 "tandem.train.xgboost.XGBoostTrainer", "tandem.train.lightgbm.LightGBMTrainer",
                 "tandem.tune.schedulers.ASHAScheduler", "tandem.tune.search.OptunaSearch",
                 "tandem.model.train", "tandem.model.tune", "tandem.model.TrainSettings",
                 "tandem.model.serve"):
        assert name in entries, name


# -- the audit can fail: a dummy ignored setting is caught -------------------------------------
_DUMMY = textwrap.dedent('''
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Settings:
        workers: int = 1
        colour: str = "red"

        def __post_init__(self):
            if self.colour not in ("red", "blue"):
                raise ValueError("colour")

        def __repr__(self):
            return f"Settings({self.workers}, {self.colour})"

    def run(settings: Settings) -> int:
        return settings.workers * 2

    class Runner:
        def __init__(self, n: int, label: str, flavour: str = "x") -> None:
            if n < 0:
                raise ValueError(n)
            self.n = n
            self.label = label

        def go(self) -> int:
            return self.n

    def entry(a: int, unused: int = 0) -> int:
        return a
''')


def _dummy_audit(table: dict[str, dict[str, A.Disposition]]) -> list[str]:
    import sys
    import types

    mod = types.ModuleType("tandem_dummy_settings")
    sys.modules["tandem_dummy_settings"] = mod
    try:
        exec(compile(_DUMMY, "tandem_dummy_settings", "exec"), mod.__dict__)  # noqa: S102
        index = A.SourceIndex(extra={"tandem_dummy_settings": _DUMMY})
        params = [A.Param("dummy.Settings", n, mod.Settings, True) for n in ("workers", "colour")]
        params += [A.Param("dummy.Runner", n, mod.Runner, True) for n in ("n", "label", "flavour")]
        params += [A.Param("dummy.entry", n, mod.entry, False) for n in ("a", "unused")]
        return A.audit(params, table, index)
    finally:
        del sys.modules["tandem_dummy_settings"]


def test_the_audit_catches_settings_stored_and_never_read() -> None:
    table = {"dummy.Settings": {"workers": R("tandem_dummy_settings:run")},
             "dummy.Runner": {"n": R("tandem_dummy_settings:Runner.go")}}
    problems = _dummy_audit(table)
    text = "\n".join(problems)
    # colour: only validated and printed; label: stored, never read; flavour: never read;
    # unused: a function parameter its body never loads
    assert "dummy.Settings(colour)" in text
    assert "dummy.Runner(label)" in text
    assert "dummy.Runner(flavour)" in text
    assert "dummy.entry(unused)" in text
    assert len(problems) == 4, text


def test_the_audit_refuses_a_reader_that_does_not_read() -> None:
    # naming the validation or a function that never loads the attribute is not enough
    table = {"dummy.Settings": {"workers": R("tandem_dummy_settings:run"),
                                "colour": R("tandem_dummy_settings:Settings.__post_init__")},
             "dummy.Runner": {"n": R("tandem_dummy_settings:Runner.go"),
                              "label": R("tandem_dummy_settings:Runner.go")}}
    text = "\n".join(_dummy_audit(table))
    assert "Settings.__post_init__' is the class's own bookkeeping" in text
    assert "Runner.go' never loads .label" in text


def test_the_audit_checks_a_refusal_by_calling(index: A.SourceIndex) -> None:
    from tandem.train import ScalingConfig

    accepted = A.Param("tandem.train.ScalingConfig", "num_workers", ScalingConfig, True)
    problems = A.audit([accepted], {"tandem.train.ScalingConfig": {
        "num_workers": Refused(3)}}, index)
    assert problems and "was accepted" in problems[0]
