"""``ray.train.v2.api.preemption``: what ``train.get_preemption_info()`` returns."""

from __future__ import annotations

from tandem.train.api.preemption import PreemptionInfo

__all__ = ["PreemptionInfo"]
