"""``ray.train.v2.api.train_fn_utils``: the calls a train function makes on its worker."""

from __future__ import annotations

from tandem.train.session import (
    get_all_reported_checkpoints,
    get_checkpoint,
    get_context,
    get_dataset_shard,
    get_preemption_info,
    report,
)

__all__ = ["get_all_reported_checkpoints", "get_checkpoint", "get_context", "get_dataset_shard",
           "get_preemption_info", "report"]
