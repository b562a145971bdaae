"""``ray.tune.search.bayesopt``'s path: ``BayesOptSearch``."""

from tandem.tune.search.bayesopt.bayesopt_search import BayesOptSearch

__all__ = ["BayesOptSearch"]
