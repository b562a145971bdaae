"""``FailurePolicy``: after a worker failure, retry the gang or give up."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tandem.train.api.config import FailureConfig


class FailureDecision(enum.Enum):
    RETRY = "RETRY"
    RAISE = "RAISE"


@dataclass(frozen=True)
class FailureStatus:
    num_failures: int
    rank: int | None
    reason: str


class FailurePolicy:
    """Retries while ``num_failures <= max_failures`` (always with -1)."""

    def __init__(self, config: FailureConfig | None) -> None:
        self.config = config or FailureConfig()

    def make_decision(self, status: FailureStatus) -> FailureDecision:
        m = self.config.max_failures
        if m == -1 or status.num_failures <= m:
            return FailureDecision.RETRY
        return FailureDecision.RAISE
