"""``ray.tune.schedulers.async_hyperband``'s path (the scheduler is in :mod:`.asha`)."""

from __future__ import annotations

from tandem.tune.schedulers.asha import ASHAScheduler, AsyncHyperBandScheduler

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]
