"""``LibrarySearcher``: the common base of the searchers that wrap an optimization library.

The wrappers (HyperOpt, BayesOpt, Ax, Nevergrad, HEBO, ZOOpt, BOHB) are ported from Ray's,
whose ``suggest`` returns only the parameters the library chose, as a nested dict; Ray's
``SearchGenerator`` then merges that into the param space. tandem's controller asks the
searcher for the trial's full config, so this base does the merge: a subclass implements
Ray's ``suggest`` body as :meth:`_suggest` and Ray's ``set_search_properties`` body as
:meth:`_set_search_properties`; :meth:`suggest` returns the param space with the chosen
values in place, constants kept and ``sample_from`` values computed.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from tandem._core.errors import ConfigError
from tandem._core.extras import install_command
from tandem.tune.search.searcher import Searcher, merge_metric_mode

__all__ = ["LibrarySearcher", "import_library"]


def import_library(module: str, searcher: str, extra: str, pip_name: str) -> ModuleType:
    """Imports ``module`` or raises ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{searcher} needs {pip_name}, which is not installed (import {module!r} failed: "
            f"{exc}). Install it with: {install_command(extra)}."
        ) from exc


class LibrarySearcher(Searcher):
    """A searcher whose suggestions come from a third-party optimization library.

    Subclasses implement :meth:`_suggest` (the chosen parameters, a nested dict, or None /
    :attr:`FINISHED`) and :meth:`_set_search_properties` (convert the param space; return
    False when the searcher already has a space of its own).
    """

    #: Whether ``metric``/``mode`` may be lists (multi-objective search).
    supports_multi_objective: ClassVar[bool] = False

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        name = type(self).__name__
        if isinstance(metric, (list, tuple)) and not self.supports_multi_objective:
            raise ConfigError(
                f"{name}(metric={metric!r}): {name} optimizes one metric; multi-objective "
                "search (a list of metrics) is supported by OptunaSearch. Pass one metric "
                "name, or use OptunaSearch(metric=[...], mode=[...])."
            )
        super().__init__(metric=metric, mode=mode)
        self._param_space: dict[str, Any] | None = None
        self._merge_rng = np.random.default_rng()

    # ---------------------------------------------------------------- controller side

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, object] | None, **spec: object
    ) -> bool:
        """Takes TuneConfig's metric/mode and the Tuner's param space (see Searcher).

        Returns:
            False when the searcher was built with a space of its own (Ray's contract).

        Raises:
            ConfigError: if metric/mode conflict.
        """
        merge_metric_mode(self, metric, mode)
        self._param_space = dict(config) if config else None
        # False: the searcher has a space of its own (Ray's contract); the Tuner then
        # refuses a param_space that holds search-space objects too, with Ray's message
        return self._set_search_properties(metric, mode, dict(config or {}), **spec)

    def _set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, object], **spec: object
    ) -> bool:
        """Ray's ``set_search_properties`` body: convert ``config`` for the library."""
        return super().set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        from tandem.tune.search._ray_compat import merge_suggestion

        params = self._suggest(trial_id)
        if params is None or isinstance(params, str):
            return params
        return merge_suggestion(self._param_space, params, self._merge_rng)

    def _suggest(self, trial_id: str) -> dict[str, object] | str | None:
        """The library's choice for trial ``trial_id`` (Ray's ``suggest``)."""
        raise NotImplementedError

    def add_evaluated_point(
        self,
        parameters: dict[str, object],
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Ray's ``Searcher.add_evaluated_point``: tell the library about a point evaluated
        elsewhere. Only some libraries can (Ray raises the same NotImplementedError)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not support adding evaluated points (as in Ray); "
            "pass them as points_to_evaluate (and evaluated_rewards where supported)."
        )
