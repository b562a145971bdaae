"""tandem.train: run a training function on one or many workers.

Public API (the names Ray Train V2 users know)::

    from tandem import train
    from tandem.train import ScalingConfig, RunConfig, FailureConfig, CheckpointConfig
    from tandem.train.torch import TorchTrainer

To start a run without a Trainer object (what ``Tuner`` and the model layer do), describe
it with ``RunDescription`` and pass it to ``submit``, which returns a ``JobHandle``.
"""

from tandem.train.api.callback import Callback, CallbackSite, RunCallbackContext, UserCallback
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import (
    CheckpointConfig,
    DataConfig,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
    SyncConfig,
)
from tandem.train.api.errors import (
    ControllerError,
    NCCLHangError,
    TrainingFailedError,
    WorkerGroupError,
)
from tandem.train.api.preemption import PreemptionError, PreemptionInfo
from tandem.train.api.result import Result
from tandem.train.api.run import RunDescription, submit
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.base import Backend, BackendConfig
from tandem.train.context import StorageContext, TrainContext
from tandem.train.legacy import (  # the 1.x trainer API, see docs/migration.md
    CheckpointStrategy,
    Trainer,
    load_checkpoint,
    local_rank,
    save_checkpoint,
    world_rank,
    world_size,
)
from tandem.train.session import (
    get_all_reported_checkpoints,
    get_checkpoint,
    get_context,
    get_dataset_shard,
    get_preemption_info,
    report,
)
from tandem.train.v2.api.report_config import CheckpointConsistencyMode, CheckpointUploadMode
from tandem.train.v2.api.reported_checkpoint import ReportedCheckpoint, ReportedCheckpointStatus
from tandem.train.v2.api.validation_config import (
    ValidationConfig,
    ValidationFn,
    ValidationTaskConfig,
)

TRAIN_DATASET_KEY = "train"
"""The dataset name trainers treat as the training set (Ray's constant)."""

__all__ = [
    "Backend",
    "BackendConfig",
    "Callback",
    "CallbackSite",
    "Checkpoint",
    "CheckpointConfig",
    "CheckpointConsistencyMode",
    "CheckpointStrategy",
    "CheckpointUploadMode",
    "ControllerError",
    "DataConfig",
    "DataParallelTrainer",
    "FailureConfig",
    "LoggingConfig",
    "NCCLHangError",
    "PreemptionError",
    "PreemptionInfo",
    "ReportedCheckpoint",
    "ReportedCheckpointStatus",
    "Result",
    "RunCallbackContext",
    "RunConfig",
    "RunDescription",
    "ScalingConfig",
    "StorageContext",
    "SyncConfig",
    "TRAIN_DATASET_KEY",
    "TrainContext",
    "Trainer",
    "TrainingFailedError",
    "UserCallback",
    "ValidationConfig",
    "ValidationFn",
    "ValidationTaskConfig",
    "WorkerGroupError",
    "get_all_reported_checkpoints",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "get_preemption_info",
    "load_checkpoint",
    "local_rank",
    "report",
    "save_checkpoint",
    "submit",
    "world_rank",
    "world_size",
]
