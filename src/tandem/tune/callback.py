"""Experiment callbacks (``RunConfig(callbacks=[...])``) and the TensorBoard logger.

Hooks are called by the tune controller with keyword arguments, as Ray Tune's are:
``setup(stop, num_samples, total_num_samples)`` once before any trial starts (an error
raised there fails ``fit()`` before trials start), ``on_trial_start(iteration, trials,
trial)``, ``on_trial_result(iteration, trials, trial, result)``, ``on_trial_save(iteration,
trials, trial)`` (the trial committed a checkpoint: ``trial.checkpoint``),
``on_trial_complete(...)``, ``on_trial_error(...)``, ``on_experiment_end(trials)``, and
``on_step_begin`` / ``on_step_end(iteration, trials)`` around each step of the loop.
Per-trial ``result.json``, ``params.json`` and ``progress.csv`` are written by the logger
callbacks of ``tandem.tune.logger``, which ``Tuner.fit()`` adds as Ray's does.

``LoggerCallback`` is Ray's base of the experiment loggers (``log_trial_start``,
``log_trial_result``, ``log_trial_save``, ``log_trial_end(trial, failed)``); the MLflow and
W&B callbacks (``tandem.tune.integration.mlflow`` / ``.wandb``, also importable from Ray's
paths ``tandem.air.integrations.mlflow`` / ``.wandb``) build on it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.extras import import_optional
from tandem.train.api.callback import Callback as RunCallback

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial


class Callback(RunCallback):
    """An experiment callback (``RunConfig(callbacks=[...])`` of a ``Tuner``): the tune
    controller calls its ``on_trial_*`` / ``on_experiment_end`` hooks in the driver. It is
    a ``tandem.train.Callback`` too (its run hooks are no-ops unless overridden)."""

    def setup(self, **info: object) -> None:
        """Called once by ``Tuner.fit()`` before any trial starts, with ``stop``,
        ``num_samples`` and ``total_num_samples``; raise here to refuse the experiment."""

    def on_step_begin(self, iteration: int, trials: Sequence[TuneTrial], **info: object) -> None:
        """Called at the start of each step of the tuning loop (Ray's hook)."""

    def on_step_end(self, iteration: int, trials: Sequence[TuneTrial], **info: object) -> None:
        """Called at the end of each step of the tuning loop, after the results that
        arrived in it were handled (Ray's hook)."""

    def on_trial_start(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                       **info: object) -> None:
        pass

    def on_trial_result(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                        result: dict[str, Any], **info: object) -> None:
        pass

    def on_trial_save(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                      **info: object) -> None:
        """The trial committed a checkpoint (``trial.checkpoint``)."""

    def on_trial_complete(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                          **info: object) -> None:
        pass

    def on_trial_error(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                       **info: object) -> None:
        pass

    def on_experiment_end(self, trials: Sequence[TuneTrial], **info: object) -> None:
        pass


class LoggerCallback(Callback):
    """Ray Tune's base class of experiment loggers: override ``log_trial_start``,
    ``log_trial_result``, ``log_trial_save`` and ``log_trial_end``; the ``on_trial_*`` hooks
    call them (``on_trial_complete`` -> ``log_trial_end(trial, failed=False)``,
    ``on_trial_error`` -> ``log_trial_end(trial, failed=True)``)."""

    def log_trial_start(self, trial: TuneTrial) -> None:
        """The trial started running (again, after a pause or restart)."""

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        """The trial reported ``result``."""

    def log_trial_save(self, trial: TuneTrial) -> None:
        """The trial committed a checkpoint."""

    def log_trial_end(self, trial: TuneTrial, failed: bool = False) -> None:
        """The trial ended: finished or stopped (``failed=False``), or failed for good."""

    def on_trial_start(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                       **info: object) -> None:
        self.log_trial_start(trial)

    def on_trial_result(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                        result: dict[str, Any],
                        **info: object) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_save(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                      **info: object) -> None:
        self.log_trial_save(trial)

    def on_trial_complete(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                          **info: object) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                       **info: object) -> None:
        self.log_trial_end(trial, failed=True)


def refuse_in_train_run(callback: Callback, setup_fn: str) -> None:
    """Raises for an experiment logger given to a train run's ``RunConfig`` (a Trainer's
    ``fit()``): it only hears a Tuner's trials there, so it would log nothing. Ray Train
    refuses Tune callbacks in its ``RunConfig`` too."""
    from tandem._core.errors import ConfigError

    name = type(callback).__name__
    raise ConfigError(
        f"{name} is a tuning callback: it logs a Tuner's trials, and a Trainer's fit() has "
        f"none, so it would log nothing. Put it in a Tuner's "
        f"tune.RunConfig(callbacks=[{name}(...)]), or call {setup_fn}(...) inside the train "
        f"function to log a train run."
    )


class TBXLoggerCallback(Callback):
    """Writes each trial's numeric metrics as TensorBoard scalars into its trial folder
    (needs ``tensorboardX``: ``pip install "tandem-ml[tensorboard]"``)."""

    def __init__(self) -> None:
        import_optional("tensorboardX", "tensorboard", "TBXLoggerCallback")
        self._writers: dict[str, Any] = {}

    def _writer(self, trial: TuneTrial) -> Any:
        w = self._writers.get(trial.trial_id)
        if w is None:
            from tensorboardX import SummaryWriter

            w = SummaryWriter(logdir=trial.path, flush_secs=5)
            self._writers[trial.trial_id] = w
        return w

    def on_trial_result(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                        result: dict[str, Any], **info: object) -> None:
        step = result.get("training_iteration", 0)
        w = self._writer(trial)
        for key, value in result.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                w.add_scalar(key, value, global_step=step)

    def _close(self, trial: TuneTrial) -> None:
        w = self._writers.pop(trial.trial_id, None)
        if w is not None:
            w.close()

    def on_trial_complete(self, iteration: int, trials: Sequence[TuneTrial], trial: TuneTrial,
                          **info: object) -> None:
        self._close(trial)

    on_trial_error = on_trial_complete

    def on_experiment_end(self, trials: Sequence[TuneTrial], **info: object) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()


def trial_dir_exists(path: str) -> bool:
    return os.path.isdir(path)
