"""``ray.train.v2.api.data_parallel_trainer``: the trainer every tandem trainer builds on."""

from __future__ import annotations

from tandem.train.api.trainer import DataParallelTrainer

__all__ = ["DataParallelTrainer"]
