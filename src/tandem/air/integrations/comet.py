"""Ray's ``ray.air.integrations.comet``: ``CometLoggerCallback`` logs each Tune trial to a
Comet experiment (online, or offline into an archive that ``comet upload`` sends later).

Needs ``comet_ml``: ``pip install 'tandem-ml[comet]'`` (imported when the callback is
built). Behaviour follows Ray 2.60's callback: one experiment per trial named after the
trial, the config as parameters, each result's metrics at step ``training_iteration``
(``node_ip``/``hostname``/``pid``/``date`` as system info, ``trial_id``/``experiment_id``/
``experiment_tag`` as "others", ``done``/``should_checkpoint`` skipped), checkpoints as
model artifacts with ``save_checkpoints=True``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tandem._core.extras import install_command
from tandem.tune.callback import LoggerCallback, refuse_in_train_run
from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial


def _import_comet() -> ModuleType:
    """``comet_ml``, or an error saying how to install it."""
    if "COMET_DISABLE_AUTO_LOGGING" not in os.environ:
        os.environ["COMET_DISABLE_AUTO_LOGGING"] = "1"
    try:
        import comet_ml
    except ImportError:
        raise RuntimeError(
            f"CometLoggerCallback needs comet_ml: {install_command('comet')}"
        ) from None
    return comet_ml


def _trial_name(trial: TuneTrial) -> str:
    return str(getattr(trial, "name", None) or getattr(trial, "trial_id", trial))


class CometLoggerCallback(LoggerCallback):
    """Logs Tune trials to Comet: one ``comet_ml.Experiment`` (``OfflineExperiment`` when
    ``online=False``) per trial.

    Args:
        online: Log to the Comet server (needs ``COMET_API_KEY`` or ``api_key=``), or
            offline into a zip archive per trial (``offline_directory=``), to be uploaded
            later with ``comet upload``.
        tags: Tags added to every trial's experiment.
        save_checkpoints: Log each checkpoint the trial commits as a model artifact.
        **experiment_kwargs: Passed to ``comet_ml.Experiment`` / ``OfflineExperiment``
            (``project_name``, ``workspace``, ``api_key``, ``offline_directory``...).
            Comet's auto-logging of output, git metadata/patch and CPU/GPU stats is off
            unless set here, as in Ray.
    """

    _exclude_autolog = (
        "auto_output_logging",
        "log_git_metadata",
        "log_git_patch",
        "log_env_cpu",
        "log_env_gpu",
    )
    _exclude_results = ("done", "should_checkpoint")
    _system_results = ("node_ip", "hostname", "pid", "date")
    _other_results = ("trial_id", "experiment_id", "experiment_tag")
    _episode_results = ("hist_stats/episode_reward", "hist_stats/episode_lengths")

    def __init__(self, online: bool = True, tags: list[str] | None = None,
                 save_checkpoints: bool = False, **experiment_kwargs: Any) -> None:
        _import_comet()
        self.online = online
        self.tags = tags
        self.save_checkpoints = save_checkpoints
        self.experiment_kwargs = experiment_kwargs
        self._configure_experiment_defaults()
        self._trial_experiments: dict[str, Any] = {}
        self._to_exclude = list(self._exclude_results)
        self._to_system = list(self._system_results)
        self._to_other = list(self._other_results)
        self._to_episodes = list(self._episode_results)

    def _configure_experiment_defaults(self) -> None:
        for option in self._exclude_autolog:
            if not self.experiment_kwargs.get(option):
                self.experiment_kwargs[option] = False

    @staticmethod
    def _check_key_name(key: str, item: str) -> bool:
        return key.startswith(item + "/") or key == item

    def check_run(self) -> None:
        """In a Trainer's ``RunConfig``: refused (see ``refuse_in_train_run``)."""
        refuse_in_train_run(self, "comet_ml.Experiment")

    def log_trial_start(self, trial: TuneTrial) -> None:
        """Creates (or resumes logging to) the trial's experiment and logs its config."""
        _import_comet()
        from comet_ml import Experiment, OfflineExperiment
        from comet_ml.config import set_global_experiment

        key = trial.trial_id
        if key not in self._trial_experiments:
            experiment_cls = Experiment if self.online else OfflineExperiment
            experiment = experiment_cls(**self.experiment_kwargs)
            self._trial_experiments[key] = experiment
            set_global_experiment(None)  # several experiments at once
        else:
            experiment = self._trial_experiments[key]
        experiment.set_name(_trial_name(trial))
        experiment.add_tags(self.tags or [])
        experiment.log_other("Created from", "Ray")
        config = dict(trial.config)
        config.pop("callbacks", None)
        experiment.log_parameters(config)

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        """Logs one result at step ``training_iteration``."""
        if trial.trial_id not in self._trial_experiments:
            self.log_trial_start(trial)
        experiment = self._trial_experiments[trial.trial_id]
        step = result["training_iteration"]

        config_update = dict(result.get("config") or {})
        config_update.pop("callbacks", None)
        for k, v in config_update.items():
            if isinstance(v, dict):
                experiment.log_parameters(flatten_dict({k: v}, "/"), step=step)
            else:
                experiment.log_parameter(k, v, step=step)

        other_logs: dict[str, Any] = {}
        metric_logs: dict[str, Any] = {}
        system_logs: dict[str, Any] = {}
        episode_logs: dict[str, Any] = {}
        flat_result = {k: v for k, v in flatten_dict(result, delimiter="/").items()
                       if k != "config" and not k.startswith("config/")}
        for k, v in flat_result.items():
            if any(self._check_key_name(k, item) for item in self._to_exclude):
                continue
            if any(self._check_key_name(k, item) for item in self._to_other):
                other_logs[k] = v
            elif any(self._check_key_name(k, item) for item in self._to_system):
                system_logs[k] = v
            elif any(self._check_key_name(k, item) for item in self._to_episodes):
                episode_logs[k] = v
            else:
                metric_logs[k] = v

        experiment.log_others(other_logs)
        experiment.log_metrics(metric_logs, step=step)
        for k, v in system_logs.items():
            experiment.log_system_info(k, v)
        for k, v in episode_logs.items():
            experiment.log_curve(k, x=range(len(v)), y=v, step=step)

    def log_trial_save(self, trial: TuneTrial) -> None:
        """With ``save_checkpoints``: the committed checkpoint as a model artifact."""
        comet_ml = _import_comet()
        if not (self.save_checkpoints and trial.checkpoint):
            return
        experiment = self._trial_experiments[trial.trial_id]
        artifact = comet_ml.Artifact(name=f"checkpoint_{_trial_name(trial)}",
                                     artifact_type="model")
        root = trial.checkpoint.path
        if os.path.isdir(root):  # a local folder (a URL's files are not walked, as in Ray)
            for folder, _dirs, files in os.walk(root):
                rel_root = os.path.relpath(folder, root)
                for file in files:
                    logical_path = Path(rel_root, file).as_posix()
                    logical_path = logical_path.removeprefix("./")
                    artifact.add(Path(folder, file).as_posix(), logical_path=logical_path)
        experiment.log_artifact(artifact)

    def log_trial_end(self, trial: TuneTrial, failed: bool = False) -> None:
        """Ends the trial's experiment (offline: writes its archive)."""
        experiment = self._trial_experiments.pop(trial.trial_id, None)
        if experiment is not None:
            experiment.end()

    def __del__(self) -> None:
        for experiment in getattr(self, "_trial_experiments", {}).values():
            experiment.end()
        self._trial_experiments = {}


__all__ = ["CometLoggerCallback"]
