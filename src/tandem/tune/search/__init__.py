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
    from tandem.tune.search.optuna import OptunaSearch

__all__ = [
    "BasicVariantGenerator",
    "Categorical",
    "ConcurrencyLimiter",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "Normal",
    "OptunaSearch",
    "Searcher",
    "Variant",
    "choice",
    "count_variants",
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


def __getattr__(name: str) -> Any:
    if name == "OptunaSearch":
        from tandem.tune.search.optuna import OptunaSearch

        return OptunaSearch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
