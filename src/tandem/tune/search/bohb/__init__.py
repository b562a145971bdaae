"""``ray.tune.search.bohb``'s path: ``TuneBOHB``."""

from tandem.tune.search.bohb.bohb_search import TuneBOHB

__all__ = ["TuneBOHB"]
