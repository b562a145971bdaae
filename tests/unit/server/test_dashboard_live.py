"""The dashboard's live state: why queued jobs wait, who holds what on which node, and the
allocation history, over a scripted job service and cluster."""

from __future__ import annotations

import time
from types import SimpleNamespace

from tandem._core.clock import SimulatedClock
from tandem.cluster.base import Placement
from tandem.jobs.spec import JobStatus
from tandem.server.dashboard.live import DashboardLive, Progress, main_metric


class Service:
    def __init__(self, jobs, clock):
        self.jobs, self.clock = jobs, clock
        self.scheduler = SimpleNamespace(reserve_after_s=30.0)
        self.subscribers = []

    def list(self):
        return list(self.jobs)

    def subscribe(self, cb):
        self.subscribers.append(cb)


def job(job_id, status, bundles, *, seq, submitted_at=0.0, priority=0, placement=None):
    return SimpleNamespace(job_id=job_id, name=job_id + "-name", status=status, bundles=bundles,
                           strategy="PACK", priority=priority, seq=seq, submitted_at=submitted_at,
                           submitted_time=time.time() - 5, started_time=time.time() - 3,
                           placement=placement)


def make(jobs, clock, cap, avail):
    cluster = SimpleNamespace(resources=lambda: cap, available=lambda: avail)
    server = SimpleNamespace(service=Service(jobs, clock), cluster=cluster,
                             hub=SimpleNamespace(num_reports=lambda j: 0),
                             sampler=SimpleNamespace(latest={}))
    return DashboardLive(server, interval_s=3600)


def test_queue_says_which_resource_is_short_and_who_blocks():
    clock = SimulatedClock(start=100.0)
    two_nodes = Placement("pg1", ({"CPU": 2.0}, {"CPU": 2.0}), ("nodeA", "nodeB"),
                          ("10.0.0.1", "10.0.0.2"), ((), ()))
    jobs = [
        job("run", JobStatus.RUNNING, [{"CPU": 2.0}, {"CPU": 2.0}], seq=0, placement=two_nodes),
        job("big", JobStatus.PENDING, [{"CPU": 4.0, "GPU": 1.0}], seq=1, submitted_at=10.0),
        job("small", JobStatus.PENDING, [{"CPU": 1.0}], seq=2, submitted_at=90.0),
        job("urgent", JobStatus.PENDING, [{"CPU": 8.0}], seq=3, submitted_at=95.0, priority=5),
    ]
    live = make(jobs, clock, {"CPU": 5.0, "GPU": 1.0, "accel": 4.0},
                {"CPU": 1.0, "GPU": 1.0, "accel": 3.0})
    try:
        q = live.queue()
        assert [x["job_id"] for x in q] == ["urgent", "big", "small"]  # the scheduler's order
        assert q[0]["reason"] == "needs CPU 8 (free 1)"
        assert q[1]["reason"] == "needs CPU 4 (free 1)" and q[1]["short"] == {
            "CPU": {"need": 4.0, "free": 1.0}}
        # big has waited 90 s > 30 s: nothing behind it may start, though small fits
        assert q[2]["reason"].startswith("held behind big (big-name), which has waited over 30")
        nodes = {n["node_id"]: n for n in live.nodes()}
        assert nodes["nodeA"]["allocated"] == {"CPU": 2.0} and nodes["nodeB"]["ip"] == "10.0.0.2"
        assert [h["job_id"] for h in nodes["nodeB"]["holders"]] == ["run"]
        [holder] = live.holders()
        assert holder["holds"] == {"CPU": 4.0} and holder["nodes"] == ["nodeA", "nodeB"]
        s = live.sample()
        # custom resources are charted like the standard ones
        assert s["allocated"] == {"CPU": 4.0, "GPU": 0.0, "accel": 1.0}
        assert s["capacity"]["accel"] == 4.0 and live.history()[-1] is s
    finally:
        live.close()


def test_progress_follows_the_main_metric():
    assert main_metric({"training_iteration": 3, "epoch": 1, "val_loss": 0.5, "acc": 1}) == \
        "val_loss"
    assert main_metric({"training_iteration": 3, "reward": float("nan"), "f1": 0.7}) == "f1"
    p = Progress()
    p.add([{"training_iteration": i, "loss": 1 / i} for i in range(1, 101)])
    d = p.as_dict()
    assert d["iteration"] == 100 and d["metric"] == "loss" and len(d["spark"]) == 60
    assert d["value"] == 0.01 and p.last == {"training_iteration": 100, "loss": 0.01}


def test_owners_quotas_and_preemptions_are_shown():
    from tandem.jobs.admission import FairSharePolicy

    clock = SimulatedClock(start=100.0)
    p = Placement("pg1", ({"CPU": 2.0},), ("nodeA",), ("10.0.0.1",), ((),))
    running = job("run", JobStatus.RUNNING, [{"CPU": 2.0}], seq=0, placement=p)
    running.owner, running.num_preemptions = "alice", 1
    running.preempt_reason = "preempted for job_x (priority 5 > 0)"
    capped = job("capped", JobStatus.PENDING, [{"CPU": 1.0}], seq=1, submitted_at=99.0)
    capped.owner = "alice"
    capped.wait_reason = "waits: alice's quota CPU 2/2 (this job needs 1 more)"
    live = make([running, capped], clock, {"CPU": 4.0}, {"CPU": 2.0})
    live.server.service.scheduler = FairSharePolicy({"alice": {"cpus": 2}})
    try:
        [q] = live.queue()
        assert q["owner"] == "alice" and q["reason"].startswith("waits: alice's quota CPU 2/2")
        [h] = live.holders()
        assert h["owner"] == "alice" and h["preemptions"] == 1 and "job_x" in h["preempted"]
        sched = live.scheduling()
        assert sched["policy"] == "fair" and sched["quotas"] == {"alice": {"cpus": 2}}
        assert sched["in_use"] == {"alice": {"CPU": 2.0}}
    finally:
        live.close()


def test_groups_hold_what_their_members_do_and_the_jobs_list_says_why():
    from tandem.jobs.admission import FairSharePolicy
    from tandem.server.dashboard.routes import _why

    clock = SimulatedClock(start=100.0)
    p = Placement("pg1", ({"CPU": 2.0},), ("nodeA",), ("10.0.0.1",), ((),))
    running = job("run", JobStatus.RUNNING, [{"CPU": 2.0}], seq=0, placement=p)
    running.owner, running.num_preemptions = "alice", 2
    running.preempt_reason = "preempted for job_x (priority 5 > 0)"
    running.status_reason = "all 1 workers restarted from checkpoint_000004"
    held = job("held", JobStatus.PENDING, [{"CPU": 1.0}], seq=1, submitted_at=99.0)
    held.owner, held.num_preemptions, held.status_reason = "bob", 0, None
    held.wait_reason = "waits: group ml's quota CPU 2/2 (this job needs 1 more)"
    live = make([running, held], clock, {"CPU": 4.0}, {"CPU": 2.0})
    live.server.service.scheduler = FairSharePolicy(
        {"group:ml": {"cpus": 2, "members": ["alice", "bob"]}})
    try:
        sched = live.scheduling()
        assert sched["groups"] == {"alice": "ml", "bob": "ml"}
        assert sched["group_quotas"] == {"ml": {"cpus": 2}}
        assert sched["group_in_use"] == {"ml": {"CPU": 2.0}}
        [q] = live.queue()
        assert q["reason"] == held.wait_reason
    finally:
        live.close()
    byid = {"run": running, "held": held}
    server = SimpleNamespace(service=SimpleNamespace(get=lambda i: byid[i]))
    assert _why(server, "held", "PENDING") == {"reason": held.wait_reason}
    assert _why(server, "run", "RUNNING") == {
        "reason": running.status_reason, "preemptions": 2, "preempted": running.preempt_reason}
    assert _why(server, "run", "FINISHED") == {}
    assert _why(server, "gone", "RUNNING") == {}  # not in memory any more


def test_a_preempted_job_waiting_for_its_next_placement_is_in_the_queue():
    """A running job between placements (preempted, resized, rescheduled) waits in the
    scheduler's queue: the cluster view lists it there, saying why it left and what it
    needs; one restarting in place (it still holds its placement) is not queued."""
    clock = SimulatedClock(start=100.0)
    p = Placement("pg1", ({"CPU": 2.0},), ("nodeA",), ("10.0.0.1",), ((),))
    high = job("high", JobStatus.RUNNING, [{"CPU": 2.0}], seq=1, priority=5, placement=p)
    low = job("low", JobStatus.RESTARTING, [{"CPU": 2.0}], seq=0, submitted_at=99.0)
    low.owner = "alice"
    low.status_reason = ("preempted for high (priority 5 > 0); checkpointed; waits to resume "
                         "from checkpoint /r/checkpoint_000004")
    retry = job("retry", JobStatus.RESTARTING, [{"CPU": 1.0}], seq=2, placement=p)
    live = make([high, low, retry], clock, {"CPU": 2.0}, {"CPU": 0.0})
    try:
        [q] = live.queue()
        assert q["job_id"] == "low" and q["owner"] == "alice"
        assert q["reason"] == low.status_reason + " · needs CPU 2 (free 0)"
    finally:
        live.close()
