"""Search spaces and searchers: where trial configs come from.

The searchers that wrap a library (``OptunaSearch``, ``HyperOptSearch``, ``BayesOptSearch``,
``AxSearch``, ``NevergradSearch``, ``HEBOSearch``, ``ZOOptSearch``, ``TuneBOHB``) are
imported lazily, so ``tandem.tune.search`` works without those libraries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tandem.tune.search._ray_compat import (
    UNDEFINED_METRIC_MODE,
    UNDEFINED_SEARCH_SPACE,
    UNRESOLVED_SEARCH_SPACE,
)
from tandem.tune.search.basic_variant import BasicVariantGenerator
from tandem.tune.search.concurrency import ConcurrencyLimiter
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

if TYPE_CHECKING:
    from tandem.tune.search.ax import AxSearch
    from tandem.tune.search.bayesopt import BayesOptSearch
    from tandem.tune.search.bohb import TuneBOHB
    from tandem.tune.search.hebo import HEBOSearch
    from tandem.tune.search.hyperopt import HyperOptSearch
    from tandem.tune.search.nevergrad import NevergradSearch
    from tandem.tune.search.optuna import OptunaSearch
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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
