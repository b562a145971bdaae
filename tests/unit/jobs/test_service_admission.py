"""The job service acting on admission decisions, with scripted runners (no processes):
quotas and their reasons, fair share, preemption and re-queuing."""

from __future__ import annotations

import threading

import pytest

from tandem._core.errors import ConfigError
from tandem.cluster.local import LocalCluster
from tandem.jobs.admission import (
    FairSharePolicy,
    PriorityPreemptionPolicy,
    QuotaExceededError,
)
from tandem.jobs.service import LocalJobService
from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec, JobStatus


class Runner(JobRunner):
    """Runs until ``gate`` is set; when preempted, yields its placement and waits to be
    placed again (as a train run does, without workers)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.asked = threading.Event()
        self.placements = 0
        self.requests: list = []

    @property
    def preemptible(self) -> bool:
        return True

    def preempt(self, request) -> bool:
        self.requests.append(request)
        self.asked.set()
        return True

    def run(self, ctx):
        self.placements += 1
        while not self.gate.wait(0.01):
            if ctx.stop_event.is_set():
                return JobOutcome(JobStatus.STOPPED)
            if self.asked.is_set():
                self.asked.clear()
                ctx.set_status(JobStatus.RESTARTING, self.requests[-1].reason)
                if not ctx.replace_placement():
                    return JobOutcome(JobStatus.STOPPED)
                self.placements += 1
                ctx.set_status(JobStatus.RUNNING, "resumed")
        return JobOutcome(JobStatus.FINISHED, value=self.placements)


def spec(name, cpus, owner="default", priority=0, runner=None):
    return JobSpec(name, tuple({"CPU": 1.0} for _ in range(cpus)), runner or Runner(),
                   owner=owner, priority=priority)


def wait_for(cond, what):
    ev = threading.Event()
    for _ in range(1000):
        if cond():
            return
        ev.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_without_configuration_the_service_behaves_as_before():
    svc = LocalJobService(LocalCluster(num_cpus=2))
    try:
        a, b = spec("a", 2), spec("b", 2, priority=9)
        ja = svc.submit(a)
        jb = svc.submit(b)
        assert ja.status is JobStatus.RUNNING and jb.status is JobStatus.PENDING
        assert ja.owner == "default" and not a.runner.requests  # FIFO never preempts
        assert jb.status_reason == "waits: resources (CPU 2 needed, 0 free)"
        with pytest.raises(ConfigError, match="no quotas"):
            svc.set_quota("alice", {"cpus": 1})
        a.runner.gate.set()
        wait_for(lambda: jb.status is JobStatus.RUNNING, "b to start")
        b.runner.gate.set()
        assert jb.wait_outcome(10).value == 1
    finally:
        svc.shutdown()


def test_quota_waits_with_its_reason_while_others_run_then_starts():
    svc = LocalJobService(LocalCluster(num_cpus=4),
                          scheduler=FairSharePolicy({"alice": {"cpus": 1, "queued_jobs": 1}}))
    try:
        a1, a2, b1 = spec("a1", 1, "alice"), spec("a2", 1, "alice"), spec("b1", 2, "bob")
        j1, j2, jb = svc.submit(a1), svc.submit(a2), svc.submit(b1)
        assert j1.status is JobStatus.RUNNING and jb.status is JobStatus.RUNNING
        assert j2.status is JobStatus.PENDING
        assert j2.status_reason == "waits: alice's quota CPU 1/1 (this job needs 1 more)"
        with pytest.raises(QuotaExceededError, match="alice has 1 job"):
            svc.submit(spec("a3", 1, "alice"))
        svc.set_quota("alice", {"cpus": 2})  # raised: a2 starts at once
        wait_for(lambda: j2.status is JobStatus.RUNNING, "a2 to start")
        for r in (a1, a2, b1):
            r.runner.gate.set()
    finally:
        svc.shutdown()


def test_a_higher_priority_job_preempts_the_least_work_lost_and_it_resumes():
    svc = LocalJobService(LocalCluster(num_cpus=2), scheduler=PriorityPreemptionPolicy(),
                          preemption_notice_s=5.0)
    try:
        low, urgent = spec("low", 2, "alice"), spec("urgent", 2, "bob", priority=5)
        jl = svc.submit(low)
        assert jl.status is JobStatus.RUNNING
        ju = svc.submit(urgent)
        wait_for(lambda: ju.status is JobStatus.RUNNING, "the urgent job to start")
        (request,) = low.runner.requests
        assert request.reason == f"preempted for {ju.job_id} (priority 5 > 0)"
        assert request.for_job == ju.job_id and jl.num_preemptions == 1
        assert jl.status is JobStatus.RESTARTING
        wait_for(lambda: jl.wait_reason is not None, "the low job to wait in the queue")
        assert jl.wait_reason.startswith("waits: resources")
        urgent.runner.gate.set()
        wait_for(lambda: jl.status is JobStatus.RUNNING, "the low job to resume")
        low.runner.gate.set()
        assert jl.wait_outcome(10).value == 2  # placed twice: started, then resumed
        assert [s for s, _ in jl.reasons] == ["PENDING", "RUNNING", "RESTARTING", "RUNNING",
                                             "FINISHED"]
    finally:
        svc.shutdown()
