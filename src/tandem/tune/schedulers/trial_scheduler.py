"""``ray.tune.schedulers.trial_scheduler``'s path: the ``TrialScheduler`` interface (in
:mod:`.base`) and ``FIFOScheduler`` (in :mod:`.fifo`)."""

from __future__ import annotations

from tandem.tune.schedulers.base import TrialScheduler
from tandem.tune.schedulers.fifo import FIFOScheduler

__all__ = ["FIFOScheduler", "TrialScheduler"]
