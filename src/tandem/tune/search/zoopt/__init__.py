"""``ray.tune.search.zoopt``'s path: ``ZOOptSearch``."""

from tandem.tune.search.zoopt.zoopt_search import ZOOptSearch

__all__ = ["ZOOptSearch"]
