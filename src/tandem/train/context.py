"""``TrainContext``: who this worker is, and where its run lives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AWAIT_VERDICT = "__tandem_await_verdict__"
# a tune trial's resources (a PlacementGroupFactory as data), for tune.get_context()
TRIAL_RESOURCES = "__tandem_trial_resources__"
"""Metadata key a tuner sets on a trial's run: rank 0 waits, after each report, for the
tuner's verdict on it (driver call ``tune_verdict``), so a stop, pause or exploit decided at
a result takes effect there."""


@dataclass(frozen=True)
class AskSubmitter:
    """A ``call_handlers`` entry: the workers' call is a question for whoever submitted
    the run. It reaches the job listener as ``(kind, tandem.jobs.spec.JobCall)`` whose
    ``reply`` answers the worker, in this process or across a train server's connection;
    a run nobody follows gets ``default``."""

    kind: str
    default: Any = None


@dataclass(frozen=True)
class StorageContext:
    """Where a run writes: ``run_path = storage_path/run_name`` (local path or fsspec URL)."""

    storage_path: str
    run_name: str
    experiment_name: str | None = None

    @property
    def run_path(self) -> str:
        return self.storage_path.rstrip("/") + "/" + self.run_name


@dataclass(frozen=True)
class TrainContext:
    """Returned by ``train.get_context()`` inside a worker."""

    world_size: int = 1
    world_rank: int = 0
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    storage: StorageContext | None = None
    trial_id: str | None = None
    trial_name: str | None = None
    trial_dir: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def get_world_size(self) -> int:
        return self.world_size

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_node_rank(self) -> int:
        return self.node_rank

    def get_trial_id(self) -> str | None:
        return self.trial_id

    def get_trial_name(self) -> str | None:
        return self.trial_name

    def get_trial_dir(self) -> str | None:
        return self.trial_dir

    def get_experiment_name(self) -> str | None:
        if self.storage is None:
            return None
        return self.storage.experiment_name or self.storage.run_name

    def get_storage(self) -> StorageContext | None:
        return self.storage

    def get_run_path(self) -> str | None:
        return self.storage.run_path if self.storage else None

    def get_metadata(self) -> Mapping[str, Any]:
        return {k: v for k, v in self.metadata.items() if k not in (AWAIT_VERDICT, TRIAL_RESOURCES)}


def get_context() -> TrainContext:
    """``ray.train.context.get_context``'s path: the same as ``tandem.train.get_context()``."""
    from tandem.train.session import get_context as _get_context

    return _get_context()
