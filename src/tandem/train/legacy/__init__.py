"""The 1.x trainer API, kept so older scripts run unchanged (see docs/migration.md).

``tandem.train.Trainer`` with ``start`` / ``run`` / ``run_iterator`` / ``shutdown`` /
``to_worker_group`` / ``to_tune_trainable``, ``CheckpointStrategy``, the training callbacks
in ``tandem.train.legacy.callbacks``, and the worker functions ``save_checkpoint``,
``load_checkpoint``, ``world_rank``, ``local_rank``, ``world_size``. All of it runs on the
same job service and train controller as ``DataParallelTrainer.fit()``.
"""

from tandem.train.legacy._session import (
    load_checkpoint,
    local_rank,
    save_checkpoint,
    world_rank,
    world_size,
)
from tandem.train.legacy._trainer import (
    CheckpointStrategy,
    Trainer,
    TrainerStateError,
    TrainingIterator,
)
from tandem.train.legacy._worker_group import WorkerGroup, WorkerGroupError, WorkerHandle
from tandem.train.legacy.callbacks import (
    JsonLoggerCallback,
    PrintCallback,
    TBXLoggerCallback,
    TrainingCallback,
)

TrainWorkerGroup = WorkerGroup  # the 1.x name

__all__ = [
    "CheckpointStrategy",
    "JsonLoggerCallback",
    "PrintCallback",
    "TBXLoggerCallback",
    "TrainWorkerGroup",
    "Trainer",
    "TrainerStateError",
    "TrainingCallback",
    "TrainingIterator",
    "WorkerGroup",
    "WorkerGroupError",
    "WorkerHandle",
    "load_checkpoint",
    "local_rank",
    "save_checkpoint",
    "world_rank",
    "world_size",
]
