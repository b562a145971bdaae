"""The ``Searcher`` interface: where new trial configs come from."""

from __future__ import annotations

import os
import pickle
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import cloudpickle

from tandem._core.errors import ConfigError

__all__ = ["Searcher", "check_mode", "merge_metric_mode"]


def check_mode(mode: Any, where: str) -> None:
    """Raises :class:`ConfigError` unless ``mode`` is None, ``"min"`` or ``"max"`` (or, for
    multi-objective search, a list of those)."""
    if isinstance(mode, (list, tuple)) and mode and all(m in ("min", "max") for m in mode):
        return
    if mode is not None and mode not in ("min", "max"):
        raise ConfigError(
            f"{where}: mode={mode!r} is not allowed; mode must be 'min' or 'max'. "
            "Use mode='min' to minimize the metric (e.g. a loss) or mode='max' to maximize it."
        )


def _check_metric(metric: Any, where: str) -> None:
    if isinstance(metric, (list, tuple)) and metric and all(isinstance(m, str) for m in metric):
        return  # multi-objective; the searchers that cannot do it refuse it themselves
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(
            f"{where}: metric={metric!r} is not allowed; metric must be the name (a str) of a "
            "value the trials report, e.g. metric='loss'."
        )


class Searcher(ABC):
    """Suggests configurations for new trials and learns from their results.

    Contract (the tune controller is the only caller; all calls come from one thread):

    1. ``set_search_properties(metric, mode, param_space)`` once, before anything else.
    2. ``set_num_samples(num_samples)`` once; its return value says who ends the experiment.
    3. ``suggest(trial_id)`` whenever the controller wants a new trial. It returns the
       trial's full config, ``None`` ("nothing right now, ask again later", e.g. waiting on
       results) or :attr:`FINISHED` ("never again").
    4. ``on_trial_result(trial_id, result)`` for every intermediate result of a suggested
       trial, and ``on_trial_complete(trial_id, result, error)`` exactly once when it ends
       (``result`` is its last result, or None if it reported none).
    5. ``save(path)`` / ``restore(path)`` around an interrupted experiment.

    Implementations must not start processes or touch trials; they only compute.

    Args:
        metric: The metric to optimize; TuneConfig's is used when None.
        mode: ``"min"`` or ``"max"``; TuneConfig's is used when None.
    """

    #: Returned by :meth:`suggest` when the searcher will never suggest again.
    FINISHED: ClassVar[str] = "FINISHED"

    def __init__(
        self, metric: str | list[str] | None = None, mode: str | list[str] | None = None
    ) -> None:
        where = type(self).__name__
        check_mode(mode, where)
        _check_metric(metric, where)
        self._metric: Any = metric  # a list for multi-objective search (OptunaSearch)
        self._mode: Any = mode

    @property
    def metric(self) -> str | None:
        """The metric this searcher optimizes (None if it does not need one)."""
        return self._metric

    @property
    def mode(self) -> str | None:
        """``"min"`` or ``"max"`` (None if it does not need one)."""
        return self._mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Called once by the controller with TuneConfig's metric/mode and the param space.

        The searcher's own metric/mode (from its constructor) win; a different value given
        both here and there is an error.

        Returns:
            True when the properties were applied.

        Raises:
            ConfigError: on conflicting metric/mode, a bad mode, or an unusable space.
        """
        self._metric, self._mode = merge_metric_mode(self, metric, mode)
        return True

    def set_num_samples(self, num_samples: int) -> bool:
        """Called once by the controller with ``TuneConfig.num_samples``.

        Returns:
            True if this searcher enforces it itself (it returns :attr:`FINISHED` when done;
            e.g. BasicVariantGenerator runs ``num_samples * grid size`` trials). False (the
            default): the controller stops calling :meth:`suggest` after ``num_samples``
            trials (``-1`` = no limit).
        """
        return False

    @abstractmethod
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The full config for new trial ``trial_id``, None for "not now", or FINISHED."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """An intermediate result of a suggested trial. No-op by default."""

    @abstractmethod
    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Trial ``trial_id`` ended (``error=True`` if it failed); called exactly once."""

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Called by :class:`ConcurrencyLimiter` with its cap (Ray's hook).

        Returns:
            True if this searcher limits concurrency itself (the limiter then only
            forwards); False (the default) to let the limiter hold back suggestions.
        """
        return False

    def on_pause(self, trial_id: str) -> None:
        """Trial ``trial_id`` was paused by the scheduler (Ray's hook; BOHB uses it)."""

    def on_unpause(self, trial_id: str) -> None:
        """Trial ``trial_id`` was resumed by the scheduler (Ray's hook; BOHB uses it)."""

    def get_state(self) -> dict[str, Any]:
        """What :meth:`save` persists; override to drop unpicklable members."""
        return self.__dict__.copy()

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`get_state` returned."""
        self.__dict__.update(state)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the searcher's state to ``path`` (cloudpickle, so lambdas survive)."""
        with open(path, "wb") as f:
            cloudpickle.dump(self.get_state(), f)

    def restore(self, path: str | os.PathLike[str]) -> None:
        """Loads state written by :meth:`save` into this (freshly constructed) searcher."""
        with open(path, "rb") as f:
            self.set_state(pickle.load(f))


def merge_metric_mode(
    owner: Any, metric: str | None, mode: str | None
) -> tuple[str | None, str | None]:
    """Combines an object's own metric/mode with the ones the controller passes in.

    The object's own values win; if both are set and differ, that is an error.
    """
    where = type(owner).__name__
    check_mode(mode, "TuneConfig")
    _check_metric(metric, "TuneConfig")
    own_metric, own_mode = owner.metric, owner.mode
    for name, own, given in (("metric", own_metric, metric), ("mode", own_mode, mode)):
        if own is not None and given is not None and own != given:
            raise ConfigError(
                f"{where} was created with {name}={own!r} but TuneConfig has {name}={given!r}. "
                f"Set {name} in only one place (remove it from {where}(...) or from "
                "TuneConfig(...))."
            )
    return (own_metric if own_metric is not None else metric, own_mode or mode)


def __getattr__(name: str) -> Any:
    if name == "ConcurrencyLimiter":  # Ray defines it in this module; tandem's own is next door
        from tandem.tune.search.concurrency import ConcurrencyLimiter

        return ConcurrencyLimiter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
