"""The ``Searcher`` interface: where new trial configs come from."""

from __future__ import annotations

import logging
import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import cloudpickle

from tandem._core.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = ["ConcurrencyLimiter", "Searcher", "check_mode", "merge_metric_mode"]


def check_mode(mode: object, where: str) -> None:
    """Raises :class:`ConfigError` unless ``mode`` is None, ``"min"`` or ``"max"`` (or, for
    multi-objective search, a list of those)."""
    if isinstance(mode, (list, tuple)) and mode and all(m in ("min", "max") for m in mode):
        return
    if mode is not None and mode not in ("min", "max"):
        raise ConfigError(
            f"{where}: mode={mode!r} is not allowed; mode must be 'min' or 'max'. "
            "Use mode='min' to minimize the metric (e.g. a loss) or mode='max' to maximize it."
        )


def _check_metric(metric: object, where: str) -> None:
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
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: object
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


class MetricModeOwner(Protocol):
    """A searcher or scheduler: its own metric and mode (None where not given)."""

    @property
    def metric(self) -> str | None: ...

    @property
    def mode(self) -> str | None: ...


def merge_metric_mode(
    owner: MetricModeOwner, metric: str | None, mode: str | None
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


# -- ConcurrencyLimiter: in this module, as in Ray (ray.tune.search.searcher) ---------------


class ConcurrencyLimiter(Searcher):
    """Wraps a searcher so that at most ``max_concurrent`` of its trials are live at once.

    While the cap is reached :meth:`suggest` returns None without asking the wrapped
    searcher; a slot frees when ``on_trial_complete`` is called for one of its trials. With
    ``batch=True`` the wrapped searcher hears of completed trials only once the whole batch
    of ``max_concurrent`` trials has completed, and new suggestions wait until then. If the
    wrapped searcher limits concurrency itself (its ``set_max_concurrency`` returns True),
    the limiter only forwards. Its whole state, the wrapped searcher's included, is saved
    with the experiment, so ``Tuner.restore`` continues with both.

    Args:
        searcher: The searcher to wrap.
        max_concurrent: The cap, an int >= 1.
        batch: Hold back completions until the whole batch has completed.
    """

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        if not isinstance(searcher, Searcher):
            raise ConfigError(
                f"ConcurrencyLimiter(searcher={searcher!r}): searcher must be a tandem Searcher; "
                f"the `ConcurrencyLimiter` only works with `Searcher` objects (got "
                f"{type(searcher)}), e.g. OptunaSearch(), "
                "HyperOptSearch() or BasicVariantGenerator(). To cap concurrent trials "
                "without a searcher, use TuneConfig(max_concurrent_trials=...)."
            )
        if (
            isinstance(max_concurrent, bool)
            or not isinstance(max_concurrent, int)
            or (max_concurrent < 1)
        ):
            raise ConfigError(
                f"ConcurrencyLimiter(max_concurrent={max_concurrent!r}): must be an int >= 1. "
                "Pass e.g. max_concurrent=4."
            )
        if not isinstance(batch, bool):
            raise ConfigError(f"ConcurrencyLimiter(batch={batch!r}): must be True or False.")
        super().__init__()
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple[dict[str, Any] | None, bool]] = {}
        self._limit_concurrency = True
        self._set_searcher_max_concurrency()

    def _set_searcher_max_concurrency(self) -> None:
        # a searcher with its own concurrency logic gets the cap; the limiter then forwards
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    @property
    def num_live(self) -> int:
        """Suggested trials that have not completed yet (as far as the limiter counts)."""
        return len(self.live_trials)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: object
    ) -> bool:
        self._set_searcher_max_concurrency()
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def set_num_samples(self, num_samples: int) -> bool:
        return self.searcher.set_num_samples(num_samples)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self.live_trials:
            raise ConfigError(f"Trial ID {trial_id} must be unique: already found in set.")
        if len(self.live_trials) >= self.max_concurrent:
            logger.debug(
                "Not providing a suggestion for %s due to concurrency limit: %s/%s.",
                trial_id,
                len(self.live_trials),
                self.max_concurrent,
            )
            return None
        suggestion = self.searcher.suggest(trial_id)
        if isinstance(suggestion, dict):
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if not self._limit_concurrency:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        if trial_id not in self.live_trials:
            return
        if self.batch:
            self.cached_results[trial_id] = (result, error)
            self.num_unfinished_live_trials -= 1
            if self.num_unfinished_live_trials > 0:
                return
            # the whole batch has completed: the wrapped searcher learns of all of it
            for tid, (res, err) in self.cached_results.items():
                self.searcher.on_trial_complete(tid, result=res, error=err)
                self.live_trials.discard(tid)
            self.cached_results = {}
            self.num_unfinished_live_trials = 0
            return
        self.searcher.on_trial_complete(trial_id, result=result, error=error)
        self.live_trials.discard(trial_id)
        self.num_unfinished_live_trials -= 1

    def add_evaluated_point(
        self,
        parameters: Mapping[str, object],
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        self.searcher.add_evaluated_point(  # type: ignore[attr-defined]
            parameters, value, error, pruned, intermediate_values
        )

    def on_pause(self, trial_id: str) -> None:
        self.searcher.on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        self.searcher.on_unpause(trial_id)

    def save(self, checkpoint_path: str) -> None:  # type: ignore[override]
        """Saves the wrapped searcher's state (Ray's behaviour)."""
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:  # type: ignore[override]
        """Restores the wrapped searcher's state (Ray's behaviour)."""
        self.searcher.restore(checkpoint_path)
