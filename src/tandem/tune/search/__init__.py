"""Search spaces and searchers: where trial configs come from.

The searchers that wrap a library (``OptunaSearch``, ``HyperOptSearch``, ``BayesOptSearch``,
``AxSearch``, ``NevergradSearch``, ``HEBOSearch``, ``ZOOptSearch``, ``TuneBOHB``) are
imported lazily, so ``tandem.tune.search`` works without those libraries; so is every other
name (``tandem._core.lazy``), so a program that uses none of them does not load NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem.tune.search._ray_compat import (
        UNDEFINED_METRIC_MODE,
        UNDEFINED_SEARCH_SPACE,
        UNRESOLVED_SEARCH_SPACE,
    )
    from tandem.tune.search.ax import AxSearch
    from tandem.tune.search.basic_variant import BasicVariantGenerator
    from tandem.tune.search.bayesopt import BayesOptSearch
    from tandem.tune.search.bohb import TuneBOHB
    from tandem.tune.search.concurrency import ConcurrencyLimiter
    from tandem.tune.search.hebo import HEBOSearch
    from tandem.tune.search.hyperopt import HyperOptSearch
    from tandem.tune.search.nevergrad import NevergradSearch
    from tandem.tune.search.optuna import OptunaSearch
    from tandem.tune.search.repeater import Repeater
    from tandem.tune.search.search_algorithm import SearchAlgorithm
    from tandem.tune.search.search_generator import SearchGenerator
    from tandem.tune.search.searcher import Searcher
    from tandem.tune.search.space import (
        Categorical,
        Domain,
        Float,
        Function,
        Integer,
        Normal,
        choice,
        grid_search,
        lograndint,
        loguniform,
        qlograndint,
        qloguniform,
        qrandint,
        qrandn,
        quniform,
        randint,
        randn,
        sample_from,
        uniform,
    )
    from tandem.tune.search.variant_generator import (
        Variant,
        count_variants,
        flatten_dict,
        format_vars,
        generate_variants,
        iter_variants,
        unflatten_dict,
    )
    from tandem.tune.search.zoopt import ZOOptSearch

__all__ = [
    "UNDEFINED_METRIC_MODE",
    "UNDEFINED_SEARCH_SPACE",
    "UNRESOLVED_SEARCH_SPACE",
    "AxSearch",
    "BasicVariantGenerator",
    "BayesOptSearch",
    "Categorical",
    "ConcurrencyLimiter",
    "Domain",
    "Float",
    "Function",
    "HEBOSearch",
    "HyperOptSearch",
    "Integer",
    "NevergradSearch",
    "Normal",
    "OptunaSearch",
    "Repeater",
    "SearchAlgorithm",
    "SearchGenerator",
    "Searcher",
    "TuneBOHB",
    "Variant",
    "ZOOptSearch",
    "choice",
    "count_variants",
    "create_searcher",
    "flatten_dict",
    "format_vars",
    "generate_variants",
    "grid_search",
    "iter_variants",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "unflatten_dict",
    "uniform",
]


#: Ray's ``SEARCH_ALG_IMPORT`` keys -> (module, class) of the searcher.
_SEARCHERS: dict[str, tuple[str, str]] = {
    "variant_generator": ("tandem.tune.search.basic_variant", "BasicVariantGenerator"),
    "random": ("tandem.tune.search.basic_variant", "BasicVariantGenerator"),
    "ax": ("tandem.tune.search.ax", "AxSearch"),
    "hyperopt": ("tandem.tune.search.hyperopt", "HyperOptSearch"),
    "bayesopt": ("tandem.tune.search.bayesopt", "BayesOptSearch"),
    "bohb": ("tandem.tune.search.bohb", "TuneBOHB"),
    "nevergrad": ("tandem.tune.search.nevergrad", "NevergradSearch"),
    "optuna": ("tandem.tune.search.optuna", "OptunaSearch"),
    "zoopt": ("tandem.tune.search.zoopt", "ZOOptSearch"),
    "hebo": ("tandem.tune.search.hebo", "HEBOSearch"),
}
_LAZY = {cls: mod for mod, cls in _SEARCHERS.values()}


def create_searcher(search_alg: str, **kwargs: object) -> Searcher:
    """Ray's ``create_searcher``: a searcher by name (``"hyperopt"``, ``"optuna"``, ...);
    keyword arguments its constructor does not take are dropped, as in Ray."""
    import importlib
    import inspect

    key = search_alg.lower() if isinstance(search_alg, str) else search_alg
    if key not in _SEARCHERS:
        raise ValueError(
            f"The `search_alg` argument must be one of {list(_SEARCHERS)}. Got: {search_alg}"
        )
    module, name = _SEARCHERS[key]
    cls = getattr(importlib.import_module(module), name)
    params = inspect.signature(cls).parameters
    searcher: Searcher = cls(**{k: v for k, v in kwargs.items() if k in params})
    return searcher


__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "UNDEFINED_METRIC_MODE": "tandem.tune.search._ray_compat",
    "UNDEFINED_SEARCH_SPACE": "tandem.tune.search._ray_compat",
    "UNRESOLVED_SEARCH_SPACE": "tandem.tune.search._ray_compat",
    "BasicVariantGenerator": "tandem.tune.search.basic_variant",
    "ConcurrencyLimiter": "tandem.tune.search.concurrency",
    "Repeater": "tandem.tune.search.repeater",
    "SearchAlgorithm": "tandem.tune.search.search_algorithm",
    "SearchGenerator": "tandem.tune.search.search_generator",
    "Searcher": "tandem.tune.search.searcher",
    "Categorical": "tandem.tune.search.space",
    "Domain": "tandem.tune.search.space",
    "Float": "tandem.tune.search.space",
    "Function": "tandem.tune.search.space",
    "Integer": "tandem.tune.search.space",
    "Normal": "tandem.tune.search.space",
    "choice": "tandem.tune.search.space",
    "grid_search": "tandem.tune.search.space",
    "lograndint": "tandem.tune.search.space",
    "loguniform": "tandem.tune.search.space",
    "qlograndint": "tandem.tune.search.space",
    "qloguniform": "tandem.tune.search.space",
    "qrandint": "tandem.tune.search.space",
    "qrandn": "tandem.tune.search.space",
    "quniform": "tandem.tune.search.space",
    "randint": "tandem.tune.search.space",
    "randn": "tandem.tune.search.space",
    "sample_from": "tandem.tune.search.space",
    "uniform": "tandem.tune.search.space",
    "Variant": "tandem.tune.search.variant_generator",
    "count_variants": "tandem.tune.search.variant_generator",
    "flatten_dict": "tandem.tune.search.variant_generator",
    "format_vars": "tandem.tune.search.variant_generator",
    "generate_variants": "tandem.tune.search.variant_generator",
    "iter_variants": "tandem.tune.search.variant_generator",
    "unflatten_dict": "tandem.tune.search.variant_generator",
    **_LAZY,
})
