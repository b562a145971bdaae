"""A served model's job that never runs gives back the route its submission reserved on
the process's serving front: stopped while pending, refused at submission, or still
pending when the service shuts down (the route can then be served again)."""

from __future__ import annotations

import threading

import pytest

from tandem.cluster.local import LocalCluster
from tandem.jobs.service import LocalJobService, ServiceShutdownError
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobSpec, JobStatus
from tandem.model.serve import ServeSettings
from tandem.model.serve._runner import ServeRunner
from tandem.model.serve._shared import front


class _HoldsTheCPU(JobRunner):
    """Holds its placement until ``gate`` is set (keeps the served job pending)."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def run(self, ctx: JobContext) -> JobOutcome:
        while not self.gate.wait(0.05) and not ctx.stop_event.is_set():
            pass
        return JobOutcome(JobStatus.FINISHED)


def _served(svc: LocalJobService, tmp_path, prefix: str):
    settings = ServeSettings.of({"route_prefix": prefix})
    runner = ServeRunner("m", 1, {}, str(tmp_path), settings)
    return svc.submit(JobSpec(f"serve:m@1{prefix}", (settings.bundle(),), runner))


def _routes() -> dict[str, str]:
    return {p: o for lst in front().listeners.values() for p, o in lst.owners.items()}


def test_a_served_job_that_never_runs_frees_its_route(tmp_path):
    assert _routes() == {}
    gate = threading.Event()
    cluster = LocalCluster(num_cpus=1)
    svc = LocalJobService(cluster)
    try:
        svc.submit(JobSpec("holder", ({"CPU": 1},), _HoldsTheCPU(gate)))
        job = _served(svc, tmp_path, "/m")
        assert job.status is JobStatus.PENDING  # the only CPU is taken
        assert _routes() == {"/m": "serve:m@1"}  # reserved at submission
        svc.stop(job.job_id)  # cancelled while pending: run() never starts
        assert job.status is JobStatus.STOPPED
        assert _routes() == {} and front().listeners == {}  # the route and port are free
        again = _served(svc, tmp_path, "/m")  # the same route can be reserved again
        assert again.status is JobStatus.PENDING and _routes() == {"/m": "serve:m@1"}
        svc.shutdown()  # pending at shutdown: freed too
        assert again.status is JobStatus.STOPPED and _routes() == {}
        with pytest.raises(ServiceShutdownError):  # refused after prepare: freed too
            _served(svc, tmp_path, "/m")
        assert _routes() == {}
    finally:
        gate.set()
        svc.shutdown()
        cluster.shutdown()
