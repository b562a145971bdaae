"""``ray.train.v2.api.config``: the run configuration classes (same as ``tandem.train``'s)."""

from __future__ import annotations

from tandem.train.api.config import (
    CheckpointConfig,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
)

__all__ = [
    "CheckpointConfig",
    "FailureConfig",
    "LoggingConfig",
    "RunConfig",
    "ScalingConfig",
]
