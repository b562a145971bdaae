"""``ray.tune.search.ax``'s path: ``AxSearch``."""

from tandem.tune.search.ax.ax_search import AxSearch

__all__ = ["AxSearch"]
