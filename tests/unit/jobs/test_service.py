"""The job service with a scripted runner (no processes): reports window, stop, forget."""

from __future__ import annotations

import threading

import pytest

from tandem.cluster.local import LocalCluster
from tandem.jobs.handle import JobHandle
from tandem.jobs.service import LocalJobService
from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec, JobStatus


class ScriptedRunner(JobRunner):
    def __init__(self, n_reports: int, gate: threading.Event | None = None) -> None:
        self.n = n_reports
        self.gate = gate

    def run(self, ctx):
        for i in range(self.n):
            ctx.publish([{"i": i}])
        if self.gate is not None:
            self.gate.wait(10)
        return JobOutcome(JobStatus.FINISHED, value=self.n)


def test_long_runs_keep_a_bounded_window_of_reports():
    svc = LocalJobService(LocalCluster(num_cpus=1), report_window=10)
    job = svc.submit(JobSpec("long", ({"CPU": 1},), ScriptedRunner(25)))
    handle = JobHandle(job)
    assert handle.wait(timeout=10) == 25
    window = job.read_reports(0, timeout_s=0)
    assert window.ended and 0 < len(window.rows) <= 10 and window.rows[-1] == {"i": 24}
    assert window.first == 25 - len(window.rows)  # the older ones were dropped
    seen = [r["i"] for r in handle.results()]
    assert seen == list(range(window.first, 25))  # the newest, in order
    svc.shutdown()


def test_report_window_must_be_a_sensible_size():
    with pytest.raises(ValueError, match="report_window=1 is invalid"):
        LocalJobService(LocalCluster(num_cpus=1), report_window=1)


def test_pending_job_stop_and_forget():
    gate = threading.Event()
    svc = LocalJobService(LocalCluster(num_cpus=1))
    first = svc.submit(JobSpec("first", ({"CPU": 1},), ScriptedRunner(1, gate)))
    second = svc.submit(JobSpec("second", ({"CPU": 1},), ScriptedRunner(1)))
    assert second.status is JobStatus.PENDING  # the only CPU is taken
    svc.stop(second.job_id)
    assert second.status is JobStatus.STOPPED
    gate.set()
    assert JobHandle(first, svc).wait(timeout=10) == 1
    svc.forget(first.job_id)
    with pytest.raises(KeyError, match="No job with id"):
        svc.get(first.job_id)
    svc.shutdown()
