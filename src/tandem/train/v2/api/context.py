"""``ray.train.v2.api.context``: what ``train.get_context()`` returns."""

from __future__ import annotations

from tandem.train._internal.contexts import DistributedTrainContext, LocalTrainContext
from tandem.train.context import TrainContext

__all__ = ["DistributedTrainContext", "LocalTrainContext", "TrainContext"]
