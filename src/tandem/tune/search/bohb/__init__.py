"""``ray.tune.search.bohb``'s path: ``TuneBOHB``."""

from tandem.tune.search.bohb.bohb_search import TuneBOHB

__all__ = ["TuneBOHB"]


def __getattr__(name: str) -> object:
    if name == "BOHB":  # hpbandster's config generator, which Ray's module imports too
        from tandem.tune.search.bohb import bohb_search  # None without hpbandster, as Ray's

        return bohb_search.BOHB
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
