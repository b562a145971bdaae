"""``tune.create_scheduler(name, **kwargs)`` and ``tune.create_searcher(name, **kwargs)``:
Ray's string factories, over tandem's classes (imported when asked for)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from tandem._core.errors import ConfigError

__all__ = ["create_scheduler", "create_searcher"]

# Ray's names -> (tandem module, class)
SCHEDULER_IMPORT: dict[str, tuple[str, str]] = {
    "fifo": ("tandem.tune.schedulers", "FIFOScheduler"),
    "async_hyperband": ("tandem.tune.schedulers", "AsyncHyperBandScheduler"),
    "asynchyperband": ("tandem.tune.schedulers", "AsyncHyperBandScheduler"),
    "median_stopping_rule": ("tandem.tune.schedulers", "MedianStoppingRule"),
    "medianstopping": ("tandem.tune.schedulers", "MedianStoppingRule"),
    "hyperband": ("tandem.tune.schedulers", "HyperBandScheduler"),
    "hb_bohb": ("tandem.tune.schedulers", "HyperBandForBOHB"),
    "pbt": ("tandem.tune.schedulers", "PopulationBasedTraining"),
    "pbt_replay": ("tandem.tune.schedulers", "PopulationBasedTrainingReplay"),
    "pb2": ("tandem.tune.schedulers", "PB2"),
    "resource_changing": ("tandem.tune.schedulers", "ResourceChangingScheduler"),
}

SEARCH_ALG_IMPORT: dict[str, tuple[str, str]] = {
    "variant_generator": ("tandem.tune.search", "BasicVariantGenerator"),
    "random": ("tandem.tune.search", "BasicVariantGenerator"),
    "ax": ("tandem.tune.search.ax", "AxSearch"),
    "hyperopt": ("tandem.tune.search.hyperopt", "HyperOptSearch"),
    "bayesopt": ("tandem.tune.search.bayesopt", "BayesOptSearch"),
    "bohb": ("tandem.tune.search.bohb", "TuneBOHB"),
    "nevergrad": ("tandem.tune.search.nevergrad", "NevergradSearch"),
    "optuna": ("tandem.tune.search.optuna", "OptunaSearch"),
    "zoopt": ("tandem.tune.search.zoopt", "ZOOptSearch"),
    "hebo": ("tandem.tune.search.hebo", "HEBOSearch"),
}


def _build(kind: str, table: dict[str, tuple[str, str]], name: str, kwargs: dict) -> object:
    key = name.lower() if isinstance(name, str) else name
    if key not in table:
        raise ValueError(f"The `{kind}` argument must be one of {list(table)}. Got: {name}")
    module_name, cls_name = table[key]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.startswith("tandem"):
            raise ConfigError(
                f"create_{kind.replace('search_alg', 'searcher')}({name!r}): this tandem has no "
                f"{cls_name} ({module_name} is missing). Choose another of {list(table)}."
            ) from e
        raise
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise ConfigError(
            f"create_{kind.replace('search_alg', 'searcher')}({name!r}): this tandem has no "
            f"{cls_name} in {module_name}. Choose another of {list(table)}."
        )
    # Ray passes on only the keywords the class takes
    params = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return cls(**kwargs)


def create_scheduler(scheduler: str, **kwargs: object) -> Any:
    """A trial scheduler by Ray's name (``"asha"`` is ``"async_hyperband"``, ``"pbt"``,
    ``"hyperband"``, ...), built with the keywords its class takes (others are dropped, as
    in Ray).

    Raises:
        ValueError: an unknown name.
    """
    return _build("scheduler", SCHEDULER_IMPORT, scheduler, kwargs)


def create_searcher(search_alg: str, **kwargs: object) -> Any:
    """A search algorithm by Ray's name (``"random"``, ``"optuna"``, ``"hyperopt"``, ...),
    built with the keywords its class takes.

    Raises:
        ValueError: an unknown name.
    """
    return _build("search_alg", SEARCH_ALG_IMPORT, search_alg, kwargs)
