"""``ray.tune.search.sample``'s path: the search-space domains and their factories (defined
in :mod:`tandem.tune.search.space`)."""

from __future__ import annotations

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

__all__ = [
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "Normal",
    "choice",
    "grid_search",
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
    "uniform",
]
