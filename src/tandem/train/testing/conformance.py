"""``TrainConformanceJobs``: the conformance suite's jobs as real train runs (worker
processes, ``train.report``), for services that run train jobs (a train server, Ray,
the nested service inside a worker)."""

from __future__ import annotations

import os
import time
from typing import Any

from tandem.jobs.spec import JobSpec
from tandem.train.api.config import RunConfig, ScalingConfig
from tandem.train.api.run import RunDescription, job_spec


def conformance_train_fn(config: dict[str, Any]) -> None:
    """The per-worker function of every conformance job (see ``ConformanceJobs``)."""
    from tandem.train import get_context, report

    rank = get_context().get_world_rank()
    print(f"hello from rank {rank}", flush=True)
    i = 0
    for _ in range(config["before_gate"]):
        report({"i": i})
        i += 1
    if config["mode"] == "failing":
        raise ValueError("conformance failure")
    while config["mode"] == "endless" or not os.path.exists(config["gate_path"]):
        time.sleep(0.01)
    for _ in range(config["after_gate"]):
        report({"i": i})
        i += 1


class TrainConformanceJobs:
    """``ConformanceJobs`` as train runs of ``num_workers`` workers under ``storage_path``."""

    def __init__(self, storage_path: str, num_workers: int = 1) -> None:
        self.storage_path = storage_path
        self.num_workers = num_workers

    def _spec(self, name: str, **config: object) -> JobSpec:
        run = RunDescription(
            train_fn=conformance_train_fn,
            config={"before_gate": 1, "after_gate": 0, "gate_path": "", **config},
            scaling_config=ScalingConfig(num_workers=self.num_workers),
            run_config=RunConfig(name=f"{name}-{time.monotonic_ns()}",
                                 storage_path=self.storage_path, verbose=0),
        )
        return job_spec(run)

    def reporting(self, name: str, before_gate: int, after_gate: int, gate_path: str) -> JobSpec:
        return self._spec(name, mode="reporting", before_gate=before_gate,
                          after_gate=after_gate, gate_path=gate_path)

    def failing(self, name: str) -> JobSpec:
        return self._spec(name, mode="failing")

    def endless(self, name: str) -> JobSpec:
        return self._spec(name, mode="endless")
