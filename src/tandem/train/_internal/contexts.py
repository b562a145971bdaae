"""The two kinds of ``TrainContext`` Ray 2.60's ``train.get_context()`` returns:
``DistributedTrainContext`` in a training worker, ``LocalTrainContext`` outside one (Ray's
local mode; here, any process that is not a worker of a run)."""

from __future__ import annotations

from dataclasses import dataclass

from tandem._core.records import record
from tandem.train._internal.run_context import TrainContext


@record
class DistributedTrainContext(TrainContext):
    """The context of a worker of a run: its ranks, run storage, trial and metadata."""


@dataclass(frozen=True, init=False)
class LocalTrainContext(TrainContext):
    """The context outside a training worker (Ray's local mode): one worker of rank 0 unless
    given, no run storage."""

    experiment_name: str | None = None

    def __init__(self, experiment_name: str | None, world_size: int = 1, world_rank: int = 0,
                 local_rank: int = 0, local_world_size: int = 1, node_rank: int = 0) -> None:
        TrainContext.__init__(self, world_size=world_size, world_rank=world_rank,
                              local_rank=local_rank, local_world_size=local_world_size,
                              node_rank=node_rank)
        object.__setattr__(self, "experiment_name", experiment_name)

    def get_experiment_name(self) -> str | None:
        return self.experiment_name

    def get_storage(self) -> None:
        raise NotImplementedError("Local storage context not yet implemented. ")
