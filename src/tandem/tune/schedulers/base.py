"""The ``TrialScheduler`` interface and the values it returns.

Policies decide; the controller acts. A scheduler never receives the controller: it gets
``Trial`` objects (read-only) and result dicts, and answers with a :class:`Decision` for the
trial that reported, or :class:`TrialSuggestion` objects (from :meth:`TrialScheduler.suggest`)
about other trials, such as paused trials to resume.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.tune.search.searcher import check_mode
from tandem.tune.trial import Trial

if TYPE_CHECKING:
    from tandem.train.api.checkpoint import Checkpoint

__all__ = [
    "CONTINUE",
    "Action",
    "Decision",
    "SuggestionAction",
    "TrialScheduler",
    "TrialSuggestion",
]


class Action(enum.Enum):
    """What the controller does with the trial that just reported."""

    #: Keep training.
    CONTINUE = "CONTINUE"
    #: Stop the trial, keep its latest checkpoint, and wait for a ``TrialSuggestion.resume``.
    PAUSE = "PAUSE"
    #: End the trial (status TERMINATED); it will not run again.
    STOP = "STOP"
    #: Stop the trial and start it again from ``Decision.checkpoint`` with
    #: ``Decision.config`` (PBT's exploit step).
    RESTART = "RESTART"


@record(slots=True)
class Decision:
    """A scheduler's answer to one result: an :class:`Action` plus why.

    Build them with the factories: ``Decision.continue_()`` (a shared constant, no
    allocation), ``Decision.pause(reason)``, ``Decision.stop(reason)`` and
    ``Decision.restart(config, checkpoint, reason)``.

    Attributes:
        action: What to do.
        reason: Why, in words, for logs (empty for CONTINUE).
        config: RESTART only: the trial's new config.
        checkpoint: RESTART only: the checkpoint to restart from (another trial's, for PBT).
    """

    action: Action
    reason: str = ""
    config: dict[str, Any] | None = None
    checkpoint: Checkpoint | None = None

    def __post_init__(self) -> None:
        if self.action is Action.RESTART:
            if not isinstance(self.config, dict):
                raise ConfigError(
                    f"Decision(action=RESTART) needs the new config as a dict, got "
                    f"config={self.config!r}."
                )
        elif self.config is not None or self.checkpoint is not None:
            raise ConfigError(
                f"Decision(action={self.action.value}) cannot carry a config or a checkpoint; "
                "only RESTART does."
            )

    @staticmethod
    def continue_() -> Decision:
        """The shared CONTINUE decision."""
        return CONTINUE

    @staticmethod
    def pause(reason: str) -> Decision:
        return Decision(Action.PAUSE, reason)

    @staticmethod
    def stop(reason: str) -> Decision:
        return Decision(Action.STOP, reason)

    @staticmethod
    def restart(config: dict[str, Any], checkpoint: Checkpoint | None, reason: str) -> Decision:
        return Decision(Action.RESTART, reason, config=config, checkpoint=checkpoint)

    def __repr__(self) -> str:
        extra = f", config={self.config!r}" if self.config is not None else ""
        return (
            f"Decision({self.action.value}{', ' + repr(self.reason) if self.reason else ''}{extra})"
        )


#: The one CONTINUE decision; ``Decision.continue_()`` returns it.
CONTINUE = Decision(Action.CONTINUE)


class SuggestionAction(enum.Enum):
    """What a :class:`TrialSuggestion` asks the controller to do with a (paused) trial."""

    RESUME = "RESUME"
    STOP = "STOP"
    RESTART = "RESTART"


@record(slots=True)
class TrialSuggestion:
    """A scheduler's request about a trial other than the one reporting.

    ``RESUME``: start the paused trial again from its latest checkpoint, same config.
    ``STOP``: end the trial (paused, or in rare cases running) for good.
    ``RESTART``: start the paused trial again with ``config`` from ``checkpoint`` (another
    trial's, for synchronous PBT's exploit step).
    """

    action: SuggestionAction
    trial_id: str
    reason: str = ""
    config: dict[str, Any] | None = None
    checkpoint: Checkpoint | None = None
    #: RESUME only: the resources the trial runs with from now on (a
    #: ``PlacementGroupFactory``; ``ResourceChangingScheduler``), None to keep its own.
    resources: Any = None

    @staticmethod
    def resume(trial_id: str, reason: str = "", resources: object = None) -> TrialSuggestion:
        return TrialSuggestion(SuggestionAction.RESUME, trial_id, reason, resources=resources)

    @staticmethod
    def stop(trial_id: str, reason: str) -> TrialSuggestion:
        return TrialSuggestion(SuggestionAction.STOP, trial_id, reason)

    @staticmethod
    def restart(
        trial_id: str, config: Mapping[str, object], checkpoint: Checkpoint | None, reason: str
    ) -> TrialSuggestion:
        if not isinstance(config, dict):
            raise ConfigError(
                f"TrialSuggestion.restart needs the new config as a dict, got {config!r}."
            )
        return TrialSuggestion(SuggestionAction.RESTART, trial_id, reason, config, checkpoint)


class TrialScheduler(ABC):
    """Decides, from results, which trials continue, pause, stop or restart.

    Contract (the tune controller is the only caller; all calls come from one thread):

    1. ``set_search_properties(metric, mode, config=param_space)`` once, before any trial
       is added. The scheduler's own metric/mode win; a different value in both places is
       an error, and so is a missing one the scheduler needs.
    2. ``on_trial_add(trial)`` when a trial is created.
    3. ``on_trial_result(trial, result) -> Decision`` for every result of a RUNNING trial;
       the controller updates ``trial.checkpoint`` first if the result came with one.
       After a PAUSE or STOP the controller delivers no more results of that trial until it
       is resumed.
    4. Exactly one of, when a trial ends: ``on_trial_complete(trial, result)`` (it finished,
       or was stopped while running by a STOP decision or a stop criterion; ``result`` is its
       last result or None); ``on_trial_error(trial)`` (it failed for good);
       ``on_trial_remove(trial)`` (it was stopped while PENDING or PAUSED, e.g. acting on a
       ``TrialSuggestion.stop``).
    5. ``suggest()`` in every step of the controller loop, acting on each returned
       :class:`TrialSuggestion` and calling again until it returns None. Call it before
       asking the searcher for new trials, so paused trials resume first.

    Schedulers read trials (``status``, ``config``, ``checkpoint``) but never change them.
    """

    #: Whether this scheduler needs a metric and mode to work.
    requires_metric: ClassVar[bool] = True

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        check_mode(mode, type(self).__name__)
        if metric is not None and not isinstance(metric, str):
            raise ConfigError(
                f"{type(self).__name__}(metric={metric!r}): metric must be the name (a str) of "
                "a reported value, e.g. metric='loss'."
            )
        self._metric = metric
        self._mode = mode

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def mode(self) -> str | None:
        return self._mode

    @property
    def _metric_op(self) -> float:
        """+1 to maximize, -1 to minimize: ``score = metric_op * result[metric]``."""
        return 1.0 if self._mode == "max" else -1.0

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None = None
    ) -> bool:
        """Takes TuneConfig's metric/mode (and the param space) before any trial starts.

        Returns:
            True (failures raise).

        Raises:
            ConfigError: if metric/mode conflict, mode is invalid, or a needed one is missing.
        """
        from tandem.tune.search.searcher import merge_metric_mode

        self._metric, self._mode = merge_metric_mode(self, metric, mode)
        if self.requires_metric and (self._metric is None or self._mode is None):
            name = type(self).__name__
            raise ConfigError(
                f"{name} needs a metric and a mode, got metric={self._metric!r}, "
                f"mode={self._mode!r}. Pass them to {name}(metric=..., mode=...) or to "
                "TuneConfig(metric=..., mode=...), e.g. metric='loss', mode='min'."
            )
        return True

    def on_trial_add(self, trial: Trial) -> None:
        """A trial was created (PENDING). No-op by default."""

    @abstractmethod
    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        """Decides what ``trial`` does after reporting ``result``."""

    def on_trial_complete(self, trial: Trial, result: dict[str, Any] | None) -> None:
        """``trial`` finished or was stopped while running. No-op by default."""

    def on_trial_error(self, trial: Trial) -> None:
        """``trial`` failed for good. No-op by default."""

    def on_trial_remove(self, trial: Trial) -> None:
        """``trial`` was stopped while pending or paused. No-op by default."""

    def suggest(self) -> TrialSuggestion | None:
        """The next action on a trial other than a reporting one, or None. None by default."""
        return None

    def debug_string(self) -> str:
        """One-line summary for progress output."""
        return f"Using {type(self).__name__}"

    def _check_result(self, result: dict[str, Any], time_attr: str) -> bool:
        """True if ``result`` has both ``time_attr`` and the metric."""
        return time_attr in result and self._metric is not None and self._metric in result
