"""The gang scheduler's policy, against a scripted cluster and a simulated clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tandem._core.clock import SimulatedClock
from tandem.cluster.local import LocalCluster
from tandem.jobs.scheduler import GangScheduler


@dataclass
class J:
    name: str
    n: int
    priority: int = 0
    seq: int = 0
    submitted_at: float = 0.0
    strategy: str = "PACK"
    bundles: list = field(default_factory=list)
    owner: str = "default"

    @property
    def job_id(self):
        return self.name

    @property
    def demand(self):
        return {"CPU": float(self.n)}

    def __post_init__(self):
        self.bundles = [{"CPU": 1.0}] * self.n


def names(decisions):
    return [d.job.name for d in decisions]


def test_whole_gang_or_nothing():
    cluster = LocalCluster(num_cpus=3)
    s = GangScheduler(SimulatedClock())
    started = s.select([J("a", 2, seq=0), J("b", 2, seq=1)], cluster)
    assert names(started) == ["a"]
    assert cluster.available()["CPU"] == 1


def test_priority_then_fifo():
    cluster = LocalCluster(num_cpus=2)
    s = GangScheduler(SimulatedClock())
    jobs = [J("low", 2, 0, seq=0), J("high", 2, 5, seq=1), J("high2", 2, 5, seq=2)]
    assert names(s.select(jobs, cluster)) == ["high"]


def test_backfill_then_reservation():
    clock = SimulatedClock()
    cluster = LocalCluster(num_cpus=4)
    s = GangScheduler(clock, reserve_after_s=30)
    hold = cluster.place([{"CPU": 1.0}] * 2)  # something is running on 2 of 4 CPUs
    big = J("big", 4, seq=0, submitted_at=0.0)
    small = J("small", 1, seq=1, submitted_at=0.0)
    # The big job waits; the small one fits next to it: backfill.
    assert names(s.select([big, small], cluster)) == ["small"]
    cluster.release(hold)
    cluster2 = LocalCluster(num_cpus=4)
    hold2 = cluster2.place([{"CPU": 1.0}] * 2)
    clock.advance(31)  # the big job has now waited past reserve_after_s
    small2 = J("small2", 1, seq=2, submitted_at=31.0)
    assert names(s.select([big, small2], cluster2)) == []  # nothing jumps it any more
    cluster2.release(hold2)
    assert names(s.select([big, small2], cluster2)) == ["big"]


@pytest.mark.parametrize("gpus,asks,expect", [
    (2, [0.5, 0.5, 0.5], [(0,), (0,), (1,)]),
    (2, [1, 1], [(0,), (1,)]),
    (2, [2], [(0, 1)]),
])
def test_gpu_assignment(gpus, asks, expect):
    cluster = LocalCluster(num_cpus=8, num_gpus=gpus)
    p = cluster.place([{"CPU": 1.0, "GPU": float(a)} for a in asks])
    assert p is not None and list(p.gpu_ids) == expect
    assert cluster.place([{"GPU": 1.0}]) is None
    cluster.release(p)
    assert cluster.available()["GPU"] == gpus
