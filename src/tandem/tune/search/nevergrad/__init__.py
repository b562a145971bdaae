"""``ray.tune.search.nevergrad``'s path: ``NevergradSearch``."""

from tandem.tune.search.nevergrad.nevergrad_search import NevergradSearch

__all__ = ["NevergradSearch"]
