"""``ConcurrencyLimiter``: cap how many suggested trials are unfinished at once.

Behaviour follows Ray's ``ray.tune.search.ConcurrencyLimiter`` (Ray 2.60, Apache-2.0),
including ``batch`` and the ``set_max_concurrency`` hand-off to searchers that limit
concurrency themselves (BOHB, HEBO).
"""

from __future__ import annotations

import logging
from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.search.searcher import Searcher

__all__ = ["ConcurrencyLimiter"]

logger = logging.getLogger(__name__)


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
    def metric(self) -> Any:
        return self.searcher.metric

    @property
    def mode(self) -> Any:
        return self.searcher.mode

    @property
    def num_live(self) -> int:
        """Suggested trials that have not completed yet (as far as the limiter counts)."""
        return len(self.live_trials)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
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
        parameters: dict[str, Any],
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
