"""Admission policies against a simulated cluster with scripted queues (no processes)."""

from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.jobs.admission import (
    FairSharePolicy,
    FifoGangPolicy,
    Preempt,
    PriorityPreemptionPolicy,
    Quota,
    QuotaExceededError,
    RunningSet,
    Start,
    Wait,
    dominant_share,
    make_policy,
)
from tandem.jobs.testing.sim import SimCluster, SimJob

_seq = iter(range(10**6))


def job(name, gpus=8, owner="default", priority=0, submitted_at=0.0, per=8):
    n, rest = divmod(gpus, per)
    bundles = [{"GPU": float(per), "CPU": 1.0}] * n + ([{"GPU": float(rest), "CPU": 1.0}]
                                                       if rest else [])
    return SimJob(name, bundles, owner=owner, priority=priority, seq=next(_seq),
                  submitted_at=submitted_at)


def run(cluster, j, started_at=0.0, ckpt=None):
    j.placement = cluster.place(j.bundles, "PACK")
    assert j.placement is not None
    j.started_at, j.last_checkpoint_at = started_at, ckpt
    return j


def decide(policy, queue, running, cluster, now=0.0):
    queue = sorted(queue, key=lambda j: (-j.priority, j.seq))
    return policy.make_decision(queue, RunningSet(running), cluster, now)


def by_kind(decisions):
    out = {"start": [], "wait": {}, "preempt": []}
    for d in decisions:
        if isinstance(d, Start):
            out["start"].append(d.job.job_id)
        elif isinstance(d, Wait):
            out["wait"][d.job.job_id] = d.reason
        else:
            assert isinstance(d, Preempt)
            out["preempt"].append(d.job.job_id)
    return out


def test_fifo_backfills_then_holds_the_line_and_says_why():
    cluster = SimCluster(2)
    busy = run(cluster, job("busy", 8))
    big, small = job("big", 16), job("small", 4)
    got = by_kind(decide(FifoGangPolicy(reserve_after_s=30), [big, small], [busy], cluster))
    assert got["start"] == ["small"]
    assert got["wait"]["big"].startswith("waits: resources (GPU 16 needed, 8 free)")
    late = job("late", 1)
    got = by_kind(decide(FifoGangPolicy(reserve_after_s=30), [big, late], [busy], cluster,
                         now=31.0))
    assert got["start"] == []
    assert got["wait"]["late"] == "waits behind big (held for it)"


def test_fair_share_prefers_the_owner_holding_least():
    cluster = SimCluster(4)
    running = [run(cluster, job(f"a{i}", 8, owner="alice")) for i in range(3)]
    a_next, b_next = job("a-next", 8, owner="alice"), job("b-next", 8, owner="bob")
    decisions = decide(FairSharePolicy(), [a_next, b_next], running, cluster)
    assert by_kind(decisions)["start"] == ["b-next"]  # alice holds 3/4 of the GPUs, bob none
    cluster.release(decisions[0].placement)
    # FIFO would have started alice's job, which came first
    assert by_kind(decide(FifoGangPolicy(), [a_next, b_next], running, cluster))["start"] == [
        "a-next"]
    assert dominant_share({"GPU": 24.0, "CPU": 3.0}, cluster.total()) == pytest.approx(0.75)


def test_fair_share_alternates_between_owners_with_equal_shares():
    cluster = SimCluster(4)
    queue = [job(f"a{i}", 8, owner="alice") for i in range(3)] + \
        [job(f"b{i}", 8, owner="bob") for i in range(3)]
    got = by_kind(decide(FairSharePolicy(), queue, [], cluster))
    assert got["start"] == ["a0", "b0", "a1", "b1"]


def test_quota_makes_a_job_wait_with_its_reason_and_others_pass():
    cluster = SimCluster(4)
    running = [run(cluster, job("a0", 8, owner="alice"))]
    policy = FairSharePolicy({"alice": {"gpus": 8}, "*": Quota(gpus=16)})
    a1, b1 = job("a1", 4, owner="alice"), job("b1", 16, owner="bob")
    decisions = decide(policy, [a1, b1], running, cluster)
    got = by_kind(decisions)
    assert got["start"] == ["b1"]
    b1.placement = next(d.placement for d in decisions if isinstance(d, Start))
    assert got["wait"]["a1"] == "waits: alice's quota GPU 8/8 (this job needs 4 more)"
    # bob's default quota (16 GPUs) now blocks his next job too
    b2 = job("b2", 1, owner="bob")
    got = by_kind(decide(policy, [b2], running + [b1], cluster))
    assert got["wait"]["b2"].startswith("waits: bob's quota GPU 16/16")


def test_queued_jobs_quota_refuses_at_submission():
    policy = FairSharePolicy({"alice": Quota(queued_jobs=1)})
    queued = [job("a0", 1, owner="alice")]
    with pytest.raises(QuotaExceededError, match="queued_jobs=1"):
        policy.check_submit(job("a1", 1, owner="alice"), queued)
    policy.check_submit(job("b0", 1, owner="bob"), queued)  # no quota for bob


def test_group_quota_makes_members_wait_together_beside_their_own_quotas():
    cluster = SimCluster(4)
    policy = FairSharePolicy({"group:ml": {"gpus": 16, "queued_jobs": 2}, "alice": {"gpus": 16}})
    for owner in ("alice", "bob"):
        policy.set_group(owner, "ml")
    running = [run(cluster, job("a0", 8, owner="alice")), run(cluster, job("b0", 8, owner="bob"))]
    a1, c1 = job("a1", 4, owner="alice"), job("c1", 8, owner="carol")  # carol: no group
    got = by_kind(decide(policy, [a1, c1], running, cluster))
    # alice's own quota (16) has room, her group's (16, held by alice 8 + bob 8) has not
    assert got["wait"]["a1"] == "waits: group ml's quota GPU 16/16 (this job needs 4 more)"
    assert got["start"] == ["c1"]
    with pytest.raises(QuotaExceededError, match="group ml .* queued_jobs=2"):
        policy.check_submit(job("b9", 1, owner="bob"), [a1, job("b1", 1, owner="bob")])
    policy.check_submit(job("c9", 1, owner="carol"), [a1, job("b1", 1, owner="bob")])
    policy.set_group_quota("ml", None)  # removed: alice's job starts
    assert by_kind(decide(policy, [a1], running, cluster))["start"] == ["a1"]


def test_a_quotas_dict_names_groups_and_their_members():
    policy = FairSharePolicy({"group:ml": {"gpus": 4, "members": ["alice", "bob"]},
                              "alice": {"gpus": 2}})
    assert policy.quotas.group_of == {"alice": "ml", "bob": "ml"}
    assert policy.quotas.by_group["ml"] == Quota(gpus=4)
    assert policy.describe()["group_quotas"] == {"ml": {"gpus": 4}}
    with pytest.raises(ConfigError, match="one group at most"):
        FairSharePolicy({"group:a": {"members": ["x"]}, "group:b": {"members": ["x"]}})
    with pytest.raises(ConfigError, match="list of owner names"):
        FairSharePolicy({"group:a": {"members": "alice"}})
    with pytest.raises(ConfigError, match="unknown key"):
        FairSharePolicy({"group:a": {"member": ["alice"]}})


def test_fair_share_goes_across_groups_first_then_users():
    cluster = SimCluster(8)
    policy = FairSharePolicy()
    for owner, group in (("alice", "ml"), ("bob", "ml"), ("carol", "vision")):
        policy.set_group(owner, group)
    # ml holds 2 nodes (alice 2, bob 0); vision 1 (carol)
    running = [run(cluster, job(f"a{i}", 8, owner="alice")) for i in range(2)] + \
        [run(cluster, job("c0", 8, owner="carol"))]
    queue = [job(f"a{i}", 8, owner="alice") for i in range(2, 5)] + \
        [job(f"b{i}", 8, owner="bob") for i in range(3)] + \
        [job(f"c{i}", 8, owner="carol") for i in range(1, 4)]
    got = by_kind(decide(policy, queue, running, cluster))
    # vision (1/8) goes first; then the groups alternate; inside ml, bob (holding none)
    # goes before alice — user-level DRF would have taken both of bob's jobs first
    assert got["start"] == ["c1", "b0", "c2", "b1", "c3"]


def test_bad_quotas_and_policy_names_are_refused():
    with pytest.raises(ConfigError, match="cpus=-1"):
        Quota(cpus=-1)
    with pytest.raises(ConfigError, match="unknown key"):
        Quota.from_dict({"gpu": 1})
    with pytest.raises(ConfigError, match="fifo"):
        make_policy("lottery")


def test_preemption_picks_the_lowest_priority_then_least_work_lost():
    cluster = SimCluster(3)
    mid = run(cluster, job("mid", 8, priority=1), started_at=0.0)
    old = run(cluster, job("old", 8, priority=0), started_at=0.0, ckpt=95.0)  # 5 s lost
    young = run(cluster, job("young", 8, priority=0), started_at=50.0)  # 50 s lost
    urgent = job("urgent", 8, priority=10, submitted_at=100.0)
    got = by_kind(decide(PriorityPreemptionPolicy(), [urgent], [mid, old, young], cluster,
                         now=100.0))
    assert got["preempt"] == ["old"]
    assert got["wait"]["urgent"] == "waits: preempting old to make room"
    # while it yields, nobody else is asked to
    old.preempting = True
    got = by_kind(decide(PriorityPreemptionPolicy(), [urgent], [mid, old, young], cluster,
                         now=101.0))
    assert got["preempt"] == [] and "old yield(s)" in got["wait"]["urgent"]


def test_preemption_takes_few_victims_and_never_equal_priority_or_protected_ones():
    cluster = SimCluster(2)
    small = [run(cluster, job(f"s{i}", 4, priority=0), started_at=90.0) for i in range(2)]
    same = run(cluster, job("same", 8, priority=5), started_at=0.0)
    urgent = job("urgent", 8, priority=0)
    # equal (or higher) priority: nothing is preempted
    assert by_kind(decide(PriorityPreemptionPolicy(), [urgent], small + [same], cluster,
                          now=100.0))["preempt"] == []
    urgent = job("urgent2", 8, priority=9)
    got = by_kind(decide(PriorityPreemptionPolicy(), [urgent], small + [same], cluster,
                         now=100.0))
    assert sorted(got["preempt"]) == ["s0", "s1"]  # both needed: 4 + 4 GPUs on one node
    # young jobs are protected by min_run_s; then "same" has priority 5 < 9: it yields
    got = by_kind(decide(PriorityPreemptionPolicy(min_run_s=60), [urgent], small + [same],
                         cluster, now=100.0))
    assert got["preempt"] == ["same"]


def test_no_preemption_when_it_could_not_make_room_or_for_a_quota_wait():
    cluster = SimCluster(1)
    low = run(cluster, job("low", 4, priority=0))
    huge = job("huge", 16, priority=9)  # 16 GPUs never fit on one 8-GPU node
    assert by_kind(decide(PriorityPreemptionPolicy(), [huge], [low], cluster))["preempt"] == []
    capped = job("capped", 8, owner="alice", priority=9)
    got = by_kind(decide(PriorityPreemptionPolicy({"alice": Quota(gpus=4)}), [capped], [low],
                         cluster))
    assert got["preempt"] == [] and "alice's quota" in got["wait"]["capped"]
    # a job that cannot checkpoint (a served model) is never a victim
    low.preemptible = False
    got = by_kind(decide(PriorityPreemptionPolicy(), [job("u", 8, priority=9)], [low], cluster))
    assert got["preempt"] == []


def test_sim_cluster_best_fit_keeps_whole_nodes_for_gangs():
    cluster = SimCluster(2)
    a = cluster.place([{"GPU": 1.0}], "PACK")
    b = cluster.place([{"GPU": 1.0}], "PACK")
    assert a is not None and b is not None and a[0][0] == b[0][0]  # same node
    assert cluster.place([{"GPU": 8.0}], "PACK") is not None  # the other node is whole
    assert cluster.free()["GPU"] == 6.0
