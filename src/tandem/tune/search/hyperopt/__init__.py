"""``ray.tune.search.hyperopt``'s path: ``HyperOptSearch``."""

from tandem.tune.search.hyperopt.hyperopt_search import HyperOptSearch

__all__ = ["HyperOptSearch"]
