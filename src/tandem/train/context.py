"""``TrainContext``: who this worker is, and where its run lives (Ray's
``ray.train.context`` path)."""

from __future__ import annotations

from tandem.train._internal.run_context import (  # noqa: F401 - their public path
    AWAIT_VERDICT,
    TRIAL_RESOURCES,
    AskSubmitter,
    StorageContext,
    TrainContext,
    VerdictGate,
)
from tandem.train.session import get_context  # noqa: F401 - Ray's ray.train.context.get_context
