"""``ray.tune.search.concurrency_limiter``'s path (``tandem.tune.search`` has it too)."""

from __future__ import annotations

from tandem.tune.search.concurrency import ConcurrencyLimiter

__all__ = ["ConcurrencyLimiter"]
