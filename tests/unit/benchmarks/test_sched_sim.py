"""Issue 24 item 5: the admission simulation (``benchmarks/sched_sim.py``) drives the real
policies over a simulated clock and cluster, on a small seeded workload (no processes).

What a reader of docs/benchmarks.md relies on: every job of the workload ends under each
policy; only the priority policy preempts, and it serves the urgent jobs far sooner than the
FIFO baseline; the figures the table prints are there. Speed is not checked (noisy CI)."""

from __future__ import annotations

import pytest

from benchmarks import sched_sim


@pytest.mark.timeout(120)
def test_the_simulation_runs_the_three_policies_and_priority_serves_urgent_jobs_first(
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["policy"]: r for r in sched_sim.run(1000, 16, 0.95, 0,
                                                   ["fifo", "fair", "priority"])}
    capsys.readouterr()  # each row is echoed as JSON on stderr
    for name, r in rows.items():
        assert r["jobs"] == r["finished"] == 1000, (name, r)
        assert r["decisions"] > 0 and 0 < r["decision_p50_us"] <= r["decision_p99_us"]
        assert 0 < r["utilisation"] <= r["ideal"] <= 1.0
        assert 0 < r["jain_user_slowdown"] <= 1.0
    assert rows["fifo"]["preemptions_per_hour"] == rows["fair"]["preemptions_per_hour"] == 0
    assert rows["priority"]["preemptions_per_hour"] > 0
    # priority-10 jobs wait far less under the priority policy than under FIFO
    urgent = {n: r["wait_p99_s_by_priority"][10] for n, r in rows.items()}
    assert urgent["priority"] * 10 < urgent["fifo"], urgent
    # the work preemptions lose is small (most jobs checkpoint when told)
    assert rows["priority"]["lost_pct_of_work"] < 1.0
    table = sched_sim.table(list(rows.values()))
    for name in rows:
        assert f"| {name} |" in table
