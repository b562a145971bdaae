"""``ConcurrencyLimiter``: cap how many suggested trials are unfinished at once."""

from __future__ import annotations

from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.search.searcher import Searcher

__all__ = ["ConcurrencyLimiter"]


class ConcurrencyLimiter(Searcher):
    """Wraps a searcher so that at most ``max_concurrent`` of its trials are live at once.

    While the cap is reached :meth:`suggest` returns None without asking the wrapped
    searcher; a slot frees when ``on_trial_complete`` is called for one of its trials.
    Everything else is forwarded to the wrapped searcher.

    Args:
        searcher: The searcher to wrap.
        max_concurrent: The cap, an int >= 1.
    """

    def __init__(self, searcher: Searcher, max_concurrent: int) -> None:
        if not isinstance(searcher, Searcher):
            raise ConfigError(
                f"ConcurrencyLimiter(searcher={searcher!r}): searcher must be a tandem Searcher "
                "(e.g. OptunaSearch() or BasicVariantGenerator())."
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
        super().__init__()
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self._live: set[str] = set()

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    @property
    def num_live(self) -> int:
        """Suggested trials that have not completed yet."""
        return len(self._live)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def set_num_samples(self, num_samples: int) -> bool:
        return self.searcher.set_num_samples(num_samples)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if len(self._live) >= self.max_concurrent:
            return None
        suggestion = self.searcher.suggest(trial_id)
        if isinstance(suggestion, dict):
            self._live.add(trial_id)
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id not in self._live:
            return
        self._live.discard(trial_id)
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def get_state(self) -> dict[str, Any]:
        return {"_live": set(self._live), "searcher": self.searcher.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._live = set(state["_live"])
        self.searcher.set_state(state["searcher"])
