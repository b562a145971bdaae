"""Admission at scale, simulated: the real policies over a simulated clock and cluster.

``python -m benchmarks.sched_sim`` runs the full size (1,000 nodes x 8 GPUs, 100,000 jobs)
for every policy and prints a Markdown table; ``--jobs N --nodes M`` runs a smaller one.
No processes: ``tandem.jobs.testing.sim`` is the cluster, ``tandem._core.clock.SimulatedClock``
the clock, and the policies (``tandem.jobs.admission``) are called exactly as the job service
calls them — with the queue in queue order and a ``RunningSet`` — on every event batch.

Workload (a mix in the spirit of the published Philly / Helios traces): gang sizes of
1-128 GPUs (half the jobs on one GPU; 8-GPU bundles for gangs of 8 and more), log-normal
run times (median 20 min, heavy tail, capped at 3 days), 50 users whose activity follows
a Zipf law (a few heavy users), priorities 0 (80 %), 1 (15 %) and 10 (5 %), Poisson
arrivals sized for ``--load`` of the cluster. Jobs checkpoint every 30 min; 80 % of them
also checkpoint when asked (``get_preemption_info``) within the 30 s notice, the rest lose
the work since their last checkpoint. A preempted job resumes from its checkpoint with
60 s of restart overhead.

Decision time is the CPU time of the thread making the decision (``time.thread_time_ns``):
on a shared machine, wall time would also count whatever else ran meanwhile.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import heapq
import json
import math
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

from tandem._core.clock import SimulatedClock
from tandem.jobs.admission import (
    AdmissionPolicy,
    FairSharePolicy,
    FifoGangPolicy,
    Preempt,
    PriorityPreemptionPolicy,
    RunningSet,
    Start,
)
from tandem.jobs.testing.sim import SimCluster, SimJob

SIZES = [(1, .50), (2, .12), (4, .13), (8, .15), (16, .05), (32, .03), (64, .015), (128, .005)]
PRIORITIES = [(0, .80), (1, .15), (10, .05)]
NOTICE_S = 30.0
RESTART_S = 60.0
BACKFILL_WINDOW = 128


def _pick(rng: random.Random, table: list[tuple[int, float]]) -> int:
    x, acc = rng.random(), 0.0
    for value, p in table:
        acc += p
        if x < acc:
            return value
    return table[-1][0]


def workload(num_jobs: int, gpus: int, load: float, seed: int = 0,
             num_users: int = 50) -> list[SimJob]:
    rng = random.Random(seed)
    mean_g = sum(g * p for g, p in SIZES)
    median_s, sigma = 1200.0, 1.5
    mean_d = median_s * math.exp(sigma ** 2 / 2)
    rate = load * gpus / (mean_g * mean_d)  # jobs per second
    weights = [1 / (i + 1) for i in range(num_users)]
    users = [f"user{i:02d}" for i in range(num_users)]
    t, jobs = 0.0, []
    for i in range(num_jobs):
        t += rng.expovariate(rate)
        g = _pick(rng, SIZES)
        per = min(g, 8)
        bundles = [{"GPU": float(per), "CPU": 12.0 * per}] * (g // per)
        d = min(rng.lognormvariate(math.log(median_s), sigma), 3 * 86400.0)
        jobs.append(SimJob(
            f"j{i}", bundles, owner=rng.choices(users, weights)[0],
            priority=_pick(rng, PRIORITIES), seq=i, submitted_at=t, duration_s=d,
            saves_on_request=rng.random() < 0.8, checkpoint_every_s=1800.0,
        ))
    return jobs


@dataclass
class Outcome:
    policy: str
    decisions: list[float]
    jobs: list[SimJob]
    busy_gpu_s: float
    horizon_s: float
    """The steady window's length (10 % to 90 % of the arrivals)."""
    span_s: float
    """From the first to the last arrival."""
    offered_gpu_s: float
    """GPU-seconds of work that arrived in the steady window."""
    gpus: int
    preemptions: int
    lost_gpu_s: float
    notice_gpu_s: float
    wall_s: float


def simulate(policy: AdmissionPolicy, jobs: list[SimJob], num_nodes: int) -> Outcome:
    clock = SimulatedClock()
    cluster = SimCluster(num_nodes)
    gpus = int(cluster.total()["GPU"])
    running = RunningSet()
    queue: list[SimJob] = []
    qkey: list[tuple[int, int]] = []
    events: list[tuple[float, int, str, SimJob, int]] = []
    n = 0
    for j in jobs:
        heapq.heappush(events, (j.submitted_at, n, "arrive", j, 0))
        n += 1
    horizon = jobs[-1].submitted_at
    # figures over the steady part: the first and last 10 % of the arrivals are warm-up
    # (an empty cluster) and wind-down (jobs that arrive and run past the end)
    lo, hi = 0.1 * horizon, 0.9 * horizon
    offered = sum(j.demand["GPU"] * j.duration_s for j in jobs if lo <= j.submitted_at < hi)
    decisions: list[float] = []
    busy = lost = notice = 0.0
    preemptions = 0
    last_t, used_gpus = 0.0, 0.0
    # The workload's 100,000 jobs live for the whole run: keep them out of the cyclic
    # garbage collector's scans, whose pauses would otherwise be timed as decisions.
    gc.collect()
    gc.freeze()
    wall0 = time.perf_counter()

    def enqueue(j: SimJob) -> None:
        k = (-j.priority, j.seq)
        i = bisect.bisect(qkey, k)
        qkey.insert(i, k)
        queue.insert(i, j)

    while events:
        t = events[0][0]
        a, b = max(last_t, lo), min(t, hi)
        if b > a:
            busy += used_gpus * (b - a)
        last_t = t
        clock.advance(max(0.0, t - clock.now()))
        while events and events[0][0] == t:
            _, _, kind, j, epoch = heapq.heappop(events)
            if kind == "arrive":
                enqueue(j)
            elif epoch != j.epoch:
                continue  # a stale event (the job was stopped or restarted since)
            elif kind == "finish":
                j.run_s += t - j.started_at
                j.end = t
                cluster.release(j.placement)
                running.remove(j)
                used_gpus -= j.demand["GPU"]
                j.placement, j.epoch = None, j.epoch + 1
            elif kind == "yield":  # a preempted job's notice ran out: stop, re-queue
                ran = t - j.started_at
                work_now = j.done_s + ran
                if j.saves_on_request:
                    saved = work_now
                else:
                    saved = j.done_s + (ran // j.checkpoint_every_s) * j.checkpoint_every_s
                lost += (work_now - saved) * j.demand["GPU"]
                notice += NOTICE_S * j.demand["GPU"]
                j.done_s = saved
                j.run_s += ran
                cluster.release(j.placement)
                running.remove(j)
                used_gpus -= j.demand["GPU"]
                j.placement, j.epoch, j.preempting = None, j.epoch + 1, False
                j.submitted_at = t
                enqueue(j)
        if not queue:
            continue
        t0 = time.thread_time_ns()
        out = policy.make_decision(queue, running, cluster, clock.now())
        decisions.append((time.thread_time_ns() - t0) / 1e9)
        started = False
        for d in out:
            if isinstance(d, Start):
                j = d.job
                j.placement, j.started_at, j.epoch = d.placement, t, j.epoch + 1
                if j.first_start is None:
                    j.first_start = t
                left = j.duration_s - j.done_s + (RESTART_S if j.preemptions else 0.0)
                j.last_checkpoint_at = t
                running.add(j)
                used_gpus += j.demand["GPU"]
                heapq.heappush(events, (t + left, n, "finish", j, j.epoch))
                n += 1
                started = True
            elif isinstance(d, Preempt) and not d.job.preempting:
                v = d.job
                v.preempting = True
                v.preemptions += 1
                preemptions += 1
                heapq.heappush(events, (t + NOTICE_S, n, "yield", v, v.epoch))
                n += 1
        if started:
            keep = [(k, j) for k, j in zip(qkey, queue) if j.placement is None]
            qkey[:] = [k for k, _ in keep]
            queue[:] = [j for _, j in keep]
    gc.unfreeze()
    return Outcome(type(policy).__name__, decisions, jobs, busy, hi - lo, horizon, offered, gpus,
                   preemptions, lost, notice, time.perf_counter() - wall0)


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs else float("nan")


def summary(o: Outcome) -> dict[str, float | str | int]:
    done = [j for j in o.jobs if j.end is not None]
    per_user: dict[str, list[float]] = defaultdict(list)
    waits: dict[int, list[float]] = defaultdict(list)
    # waits and slowdowns from each job's first arrival (a re-queued job's submitted_at moves)
    first_arrival = {j.job_id: a for j, a in zip(o.jobs, _arrivals(o.jobs))}
    for j in done:
        a = first_arrival[j.job_id]
        jct = j.end - a
        slowdown = jct / max(j.duration_s, 60.0)  # bounded slowdown (60 s floor)
        per_user[j.owner].append(max(1.0, slowdown))
        assert j.first_start is not None
        waits[j.priority].append(j.first_start - a)
    user_means = [sum(v) / len(v) for v in per_user.values()]
    hours = o.span_s / 3600
    total_work = sum(j.demand["GPU"] * j.duration_s for j in o.jobs)
    ideal = min(1.0, o.offered_gpu_s / (o.gpus * o.horizon_s))
    dec_us = [d * 1e6 for d in o.decisions]
    return {
        "policy": o.policy,
        "jobs": len(o.jobs),
        "finished": len(done),
        "decisions": len(o.decisions),
        "decision_p50_us": _pct(dec_us, .5),
        "decision_p99_us": _pct(dec_us, .99),
        "decision_per_job_us": sum(dec_us) / len(o.jobs),
        "utilisation": o.busy_gpu_s / (o.gpus * o.horizon_s),
        "ideal": ideal,
        "jain_user_slowdown": jain([1 / m for m in user_means]),
        "worst_user_mean_slowdown": max(user_means),
        "best_user_mean_slowdown": min(user_means),
        "wait_p50_s_by_priority": {p: _pct(w, .5) for p, w in sorted(waits.items())},
        "wait_p99_s_by_priority": {p: _pct(w, .99) for p, w in sorted(waits.items())},
        "preemptions_per_hour": o.preemptions / hours,
        "lost_gpu_h": o.lost_gpu_s / 3600,
        "lost_pct_of_work": 100 * o.lost_gpu_s / total_work,
        "notice_gpu_h": o.notice_gpu_s / 3600,
        "sim_wall_s": o.wall_s,
    }


_ARRIVALS: dict[int, list[float]] = {}


def _arrivals(jobs: list[SimJob]) -> list[float]:
    return _ARRIVALS[id(jobs)]


def policies() -> dict[str, AdmissionPolicy]:
    return {
        "fifo": FifoGangPolicy(reserve_after_s=1800.0, backfill_window=BACKFILL_WINDOW),
        "fair": FairSharePolicy(reserve_after_s=1800.0, backfill_window=BACKFILL_WINDOW),
        "priority": PriorityPreemptionPolicy(reserve_after_s=1800.0,
                                             backfill_window=BACKFILL_WINDOW, min_run_s=600.0),
    }


def run(num_jobs: int, num_nodes: int, load: float, seed: int,
        names: list[str]) -> list[dict]:
    out = []
    for name in names:
        jobs = workload(num_jobs, num_nodes * 8, load, seed)
        _ARRIVALS[id(jobs)] = [j.submitted_at for j in jobs]
        o = simulate(policies()[name], jobs, num_nodes)
        s = summary(o)
        s["policy"] = name
        out.append(s)
        print(json.dumps(s), file=sys.stderr, flush=True)
    return out


def table(rows: list[dict]) -> str:
    head = ("| policy | decision p50 / p99 (µs) | per job (µs) | utilisation (ideal) | "
            "Jain (users) | worst / best user slowdown | wait p50 / p99 by priority 0, 1, 10 "
            "(min) | preemptions / h | work lost (GPU-h, % of work) |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        w50, w99 = r["wait_p50_s_by_priority"], r["wait_p99_s_by_priority"]
        waits = ", ".join(f"{w50.get(p, float('nan')) / 60:.0f}/{w99.get(p, float('nan')) / 60:.0f}"
                          for p in (0, 1, 10))
        lines.append(
            f"| {r['policy']} | {r['decision_p50_us']:.0f} / {r['decision_p99_us']:.0f} | "
            f"{r['decision_per_job_us']:.0f} | {100 * r['utilisation']:.1f} % "
            f"({100 * r['ideal']:.1f} %) | {r['jain_user_slowdown']:.3f} | "
            f"{r['worst_user_mean_slowdown']:.1f} / {r['best_user_mean_slowdown']:.1f} | "
            f"{waits} | {r['preemptions_per_hour']:.1f} | "
            f"{r['lost_gpu_h']:.0f} ({r['lost_pct_of_work']:.2f} %) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--load", type=float, default=0.95, help="offered load (1.0 = capacity)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", default="fifo,fair,priority")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args(argv)
    rows = run(a.jobs, a.nodes, a.load, a.seed, a.policies.split(","))
    print(f"{a.nodes} nodes x 8 GPUs, {a.jobs} jobs, offered load {a.load}, seed {a.seed}\n")
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
