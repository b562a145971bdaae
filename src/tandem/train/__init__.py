"""tandem.train: run a training function on one or many workers.

Public API (the names Ray Train V2 users know)::

    from tandem import train
    from tandem.train import ScalingConfig, RunConfig, FailureConfig, CheckpointConfig
    from tandem.train.torch import TorchTrainer

To start a run without a Trainer object (what ``Tuner`` and the model layer do), describe
it with ``RunDescription`` and pass it to ``submit``, which returns a ``JobHandle``.

Each name's module is imported when the name is first used (``tandem._core.lazy``), so
``from tandem import train`` costs almost nothing; building a trainer starts the worker side
early (``tandem.train.early``).
"""

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "Callback": "tandem.train.api.callback",
    "CallbackSite": "tandem.train.api.callback",
    "RunCallbackContext": "tandem.train.api.callback",
    "UserCallback": "tandem.train.api.callback",
    "Checkpoint": "tandem.train.api.checkpoint",
    "CheckpointConfig": "tandem.train.api.config",
    "DataConfig": "tandem.train.api.config",
    "FailureConfig": "tandem.train.api.config",
    "LoggingConfig": "tandem.train.api.config",
    "RunConfig": "tandem.train.api.config",
    "ScalingConfig": "tandem.train.api.config",
    "SyncConfig": "tandem.train.api.config",
    "ControllerError": "tandem.train.api.errors",
    "NCCLHangError": "tandem.train.api.errors",
    "TrainingFailedError": "tandem.train.api.errors",
    "WorkerGroupError": "tandem.train.api.errors",
    "PreemptionError": "tandem.train.api.preemption",
    "PreemptionInfo": "tandem.train.api.preemption",
    "Result": "tandem.train.api.result",
    "RunDescription": "tandem.train.api.run",
    "submit": "tandem.train.api.run",
    "DataParallelTrainer": "tandem.train.api.trainer",
    "Backend": "tandem.train.backends.base",
    "BackendConfig": "tandem.train.backends.base",
    "StorageContext": "tandem.train.context",
    "TrainContext": "tandem.train.context",
    "CheckpointStrategy": "tandem.train.legacy",
    "Trainer": "tandem.train.legacy",
    "load_checkpoint": "tandem.train.legacy",
    "local_rank": "tandem.train.legacy",
    "save_checkpoint": "tandem.train.legacy",
    "world_rank": "tandem.train.legacy",
    "world_size": "tandem.train.legacy",
    "get_all_reported_checkpoints": "tandem.train.session",
    "get_checkpoint": "tandem.train.session",
    "get_context": "tandem.train.session",
    "get_dataset_shard": "tandem.train.session",
    "get_preemption_info": "tandem.train.session",
    "report": "tandem.train.session",
    "CheckpointConsistencyMode": "tandem.train.v2.api.report_config",
    "CheckpointUploadMode": "tandem.train.v2.api.report_config",
    "ReportedCheckpoint": "tandem.train.v2.api.reported_checkpoint",
    "ReportedCheckpointStatus": "tandem.train.v2.api.reported_checkpoint",
    "ValidationConfig": "tandem.train.v2.api.validation_config",
    "ValidationFn": "tandem.train.v2.api.validation_config",
    "ValidationTaskConfig": "tandem.train.v2.api.validation_config",
})
