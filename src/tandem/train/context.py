"""``TrainContext``: who this worker is, and where its run lives (Ray's
``ray.train.context`` path)."""

from __future__ import annotations

from tandem.train._internal.run_context import (
    AWAIT_VERDICT,
    AskSubmitter,
    StorageContext,
    TrainContext,
)
from tandem.train.session import get_context

__all__ = ["AWAIT_VERDICT", "AskSubmitter", "StorageContext", "TrainContext", "get_context"]
