"""``ray.tune.search.hebo``'s path: ``HEBOSearch``."""

from tandem.tune.search.hebo.hebo_search import HEBOSearch

__all__ = ["HEBOSearch"]
