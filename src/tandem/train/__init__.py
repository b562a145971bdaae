"""tandem.train: run a training function on one or many workers.

Public API (the names Ray Train V2 users know)::

    from tandem import train
    from tandem.train import ScalingConfig, RunConfig, FailureConfig, CheckpointConfig
    from tandem.train.torch import TorchTrainer
"""

from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import (
    CheckpointConfig,
    DataConfig,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from tandem.train.api.errors import TrainingFailedError
from tandem.train.api.result import Result
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.base import Backend, BackendConfig
from tandem.train.context import StorageContext, TrainContext
from tandem.train.session import get_checkpoint, get_context, get_dataset_shard, report

__all__ = [
    "Backend",
    "BackendConfig",
    "Checkpoint",
    "CheckpointConfig",
    "DataConfig",
    "DataParallelTrainer",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "StorageContext",
    "TrainContext",
    "TrainingFailedError",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "report",
]
