"""``ray.tune.schedulers.median_stopping_rule``'s path (the scheduler is in :mod:`.median`)."""

from __future__ import annotations

from tandem.tune.schedulers.median import MedianStoppingRule

__all__ = ["MedianStoppingRule"]
