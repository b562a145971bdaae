"""``SearchAlgorithm``: Ray's interface between the tune loop and a config source.

In Ray the loop talks to a ``SearchAlgorithm`` that creates trials; ``SearchGenerator``
is the one that wraps a :class:`~tandem.tune.search.Searcher`. tandem's loop talks to
searchers directly: ``TuneConfig(search_alg=SearchGenerator(searcher))`` runs ``searcher``.
A subclass of ``SearchAlgorithm`` of one's own (one that builds Ray ``Trial`` objects in
``next_trial``) has no counterpart: ``TuneConfig`` refuses it, saying to subclass
``Searcher`` (``suggest(trial_id) -> config``) instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SearchAlgorithm"]


class SearchAlgorithm:
    """Ray's interface of a trial source (its methods and their meaning)."""

    _finished = False
    _metric: str | None = None

    @property
    def metric(self) -> str | None:
        return self._metric

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: object) -> bool:
        """Passes TuneConfig's metric, mode and param space; False if not supported."""
        return True

    @property
    def total_samples(self) -> int:
        return 0

    def add_configurations(self, experiments: Any) -> None:
        raise NotImplementedError

    def next_trial(self) -> Any:
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        pass

    def is_finished(self) -> bool:
        return self._finished

    def set_finished(self) -> None:
        self._finished = True

    def has_checkpoint(self, dirpath: str) -> bool:
        return False

    def save_to_dir(self, dirpath: str, session_str: str) -> None:
        pass

    def restore_from_dir(self, dirpath: str) -> None:
        pass
