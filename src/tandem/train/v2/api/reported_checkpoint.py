"""``ray.train.v2.api.reported_checkpoint``: what ``train.get_all_reported_checkpoints()``
returns."""

from __future__ import annotations

from enum import Enum
from typing import Any

from tandem._core.records import record
from tandem.train.api.checkpoint import Checkpoint

__all__ = ["ReportedCheckpoint", "ReportedCheckpointStatus"]


class ReportedCheckpointStatus(Enum):
    """A reported checkpoint's status (Ray's members). tandem has no validation step, so
    every checkpoint it returns is ``COMMITTED``: saved to the run's storage and kept."""

    COMMITTED = "COMMITTED"
    PENDING_VALIDATION = "PENDING_VALIDATION"
    VALIDATED = "VALIDATED"
    VALIDATION_TIMEOUT = "VALIDATION_TIMEOUT"
    VALIDATION_FAILED = "VALIDATION_FAILED"


@record(frozen=False)
class ReportedCheckpoint:
    """A checkpoint reported with ``train.report`` and the metrics reported with it."""

    checkpoint: Checkpoint
    metrics: dict[str, Any]
    status: ReportedCheckpointStatus
