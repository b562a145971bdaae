"""Search spaces and searchers: where trial configs come from.

``OptunaSearch`` is imported lazily, so ``tandem.tune.search`` works without optuna.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tandem.tune.search.basic_variant import BasicVariantGenerator
from tandem.tune.search.concurrency import ConcurrencyLimiter
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
    from tandem.tune.search.optuna import OptunaSearch

__all__ = [
    "Searcher",
    "BasicVariantGenerator",
    "OptunaSearch",
    "ConcurrencyLimiter",
    "Domain",
    "Float",
    "Integer",
    "Normal",
    "Categorical",
    "Function",
    "choice",
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "randint",
    "qrandint",
    "lograndint",
    "randn",
    "qrandn",
    "grid_search",
    "sample_from",
    "Variant",
    "count_variants",
    "generate_variants",
    "iter_variants",
    "flatten_dict",
    "unflatten_dict",
    "format_vars",
]


def __getattr__(name: str) -> Any:
    if name == "OptunaSearch":
        from tandem.tune.search.optuna import OptunaSearch

        return OptunaSearch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
