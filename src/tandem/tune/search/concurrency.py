"""``ConcurrencyLimiter``: cap how many suggested trials are unfinished at once.

Defined in ``tandem.tune.search.searcher`` beside ``Searcher`` (where Ray 2.60 defines it);
this module is its older tandem path.
"""

from __future__ import annotations

from tandem.tune.search.searcher import ConcurrencyLimiter

__all__ = ["ConcurrencyLimiter"]
