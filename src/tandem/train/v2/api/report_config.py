"""``ray.train.v2.api.report_config``: the modes of ``train.report`` and
``train.get_all_reported_checkpoints``."""

from __future__ import annotations

from enum import Enum

__all__ = ["CheckpointConsistencyMode", "CheckpointUploadMode"]


class CheckpointUploadMode(Enum):
    """How ``train.report`` stores a checkpoint. ``SYNC`` (the default): copied to the run's
    storage before ``report`` returns. ``ASYNC``: tandem copies synchronously too (the
    result is the same, only later for Ray). ``NO_UPLOAD``: the checkpoint is already in
    storage (e.g. written there by the user) and is registered where it is."""

    ASYNC = "ASYNC"
    SYNC = "SYNC"
    NO_UPLOAD = "NO_UPLOAD"

    def default_delete_local_checkpoint_after_upload(self) -> bool:
        return self == CheckpointUploadMode.ASYNC


class CheckpointConsistencyMode(Enum):
    """What ``train.get_all_reported_checkpoints`` waits for: ``COMMITTED`` (the latest
    report's checkpoint is in storage and kept by every rank) or ``VALIDATED`` (the same in
    tandem, which has no separate validation step)."""

    COMMITTED = "COMMITTED"
    VALIDATED = "VALIDATED"
