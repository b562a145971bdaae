"""``SearchGenerator``: Ray's ``SearchAlgorithm`` around a ``Searcher``.

``TuneConfig(search_alg=SearchGenerator(searcher))`` runs ``searcher`` exactly as
``TuneConfig(search_alg=searcher)`` does (that is all Ray's wrapper does for a user: it
turns the searcher's configs into trials). Its own methods delegate to the searcher, as
in Ray.
"""

from __future__ import annotations

from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.search.search_algorithm import SearchAlgorithm
from tandem.tune.search.searcher import Searcher

__all__ = ["SearchGenerator"]


class SearchGenerator(SearchAlgorithm):
    """Generates trials from ``searcher`` (a :class:`Searcher`)."""

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise ConfigError(
                f"SearchGenerator(searcher={searcher!r}): the searcher must subclass "
                "tandem.tune.search.Searcher (e.g. OptunaSearch(), BasicVariantGenerator())."
            )
        self.searcher = searcher
        self._counter = 0
        self._total_samples = 0
        self._finished = False

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: object) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    @property
    def total_samples(self) -> int:
        return self._total_samples

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        return self._finished or (0 < self._total_samples <= self._counter)

    def get_state(self) -> dict[str, Any]:
        return {"counter": self._counter, "total_samples": self._total_samples,
                "finished": self._finished}

    def set_state(self, state: dict[str, Any]) -> None:
        self._counter = state["counter"]
        self._total_samples = state["total_samples"]
        self._finished = state["finished"]

    def add_configurations(self, experiments: object) -> None:
        raise ConfigError(
            "SearchGenerator.add_configurations(): tandem's tune loop takes the param space "
            "from Tuner(param_space=...) and asks the searcher itself; give "
            "TuneConfig(search_alg=SearchGenerator(searcher)) or the searcher."
        )

    def next_trial(self) -> Any:
        raise ConfigError(
            "SearchGenerator.next_trial(): tandem's tune loop creates the trials; to get a "
            "config yourself call searcher.suggest(trial_id)."
        )
