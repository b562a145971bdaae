"""ASHA quality over many seeds: tandem vs Ray Tune vs Optuna, paired seed by seed.

Runs the ``asha`` case (``benchmarks/cases/asha.py``: 81 synthetic learning curves, ASHA
with grace 1, reduction factor 3, max_t 27, 2 trials at once) once per seed and system,
each in a fresh subprocess, appending one JSON line per run to ``--out`` (so a long run
can be polled and resumed: seeds already in the file are skipped). ``--table`` prints the
per-system median and spread of regret, best loss, steps and wall time, and the paired
per-seed comparison of tandem's regret with each peer's.

    python -m benchmarks.asha_seeds --systems tandem,ray,optuna --seeds 0-23 \\
        --out /tmp/asha_seeds.jsonl
    python -m benchmarks.asha_seeds --table --out /tmp/asha_seeds.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cases._common import quiet_ray_env

_TARGETS = {
    "tandem": "benchmarks.cases.asha:run_tandem",
    "ray": "benchmarks.cases.asha:run_ray",
    "optuna": "benchmarks.cases.asha:run_optuna",
}
_PARAMS = {"trials": 81, "max_t": 27, "grace": 1, "rf": 3, "step_s": 0.01}


def _seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _done(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["system"], int(r["seed"])) for r in rows if "error" not in r}


def run_one(system: str, seed: int, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One measurement in a fresh subprocess (``benchmarks._child``)."""
    with tempfile.TemporaryDirectory(prefix=f"asha-{system}-{seed}-") as tmp:
        result = Path(tmp) / "result.json"
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        env = {
            **os.environ,
            "BENCH_RESULT_FILE": str(result),
            "BENCH_WORKDIR": str(workdir),
            **(quiet_ray_env() if system == "ray" else {}),
        }
        args = [sys.executable, "-m", "benchmarks._child", _TARGETS[system]]
        args.append(json.dumps({**params, "seed": seed, "trace": True}))
        t0 = time.time()
        proc = subprocess.run(
            args, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if proc.returncode != 0 or not result.exists():
            return {"system": system, "seed": seed, "error": proc.stderr[-2000:]}
        row: dict[str, Any] = json.loads(result.read_text())
        row.update(system=system, seed=seed, started=t0, params=params)
        return row


def _summary(values: list[float]) -> str:
    if not values:
        return "—"
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):.4g} ({q[0]:.4g}–{q[2]:.4g})"


def _sign_test(less: int, more: int) -> float:
    """Two-sided sign test p-value of ``less`` vs ``more`` (ties dropped)."""
    n = less + more
    if n == 0:
        return 1.0
    k = min(less, more)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "error" not in r]
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["system"], {})[int(r["seed"])] = r
    systems = [s for s in ("tandem", "ray", "optuna") if by.get(s)]
    common = sorted(set.intersection(*(set(by[s]) for s in systems))) if systems else []
    lines = [
        "| system | seeds | regret | best final loss | steps | wall s |",
        "|---|---|---|---|---|---|",
    ]

    def row(system: str, seeds: list[int], label: str) -> str:
        runs = [by[system][s] for s in seeds]
        cells = [
            _summary([float(r[k]) for r in runs])
            for k in ("regret", "best_loss", "total_steps", "wall_s")
        ]
        return f"| {system} | {label} | " + " | ".join(cells) + " |"

    for system in systems:
        lines.append(row(system, common, f"{len(common)} (common)"))
    for system in systems:
        if len(by[system]) > len(common):
            lines.append(row(system, sorted(by[system]), f"{len(by[system])} (all)"))
    lines.append("")
    lines.append("median (interquartile range) over the seeds")
    lines.append("")
    for peer in ("ray", "optuna"):
        paired = sorted(set(by.get("tandem", {})) & set(by.get(peer, {})))
        if not paired:
            continue
        t = [float(by["tandem"][s]["regret"]) for s in paired]
        p = [float(by[peer][s]["regret"]) for s in paired]
        same = sum(1 for a, b in zip(t, p) if abs(a - b) < 1e-12)
        less = sum(1 for a, b in zip(t, p) if a < b - 1e-12)
        more = sum(1 for a, b in zip(t, p) if a > b + 1e-12)
        lines.append(
            f"tandem vs {peer}, {len(paired)} paired seeds: tandem's regret lower in {less}, "
            f"equal in {same}, higher in {more} (<= in {less + same}; sign test "
            f"p = {_sign_test(less, more):.2f}); mean regret {statistics.mean(t):.4f} vs "
            f"{statistics.mean(p):.4f}"
        )
    return "\n".join(lines)


def replay(path: Path) -> str:
    """Feeds each recorded run's results, in the order they arrived (their report times),
    to tandem's and to Ray's ASHA scheduler and checks both stop every trial where the run
    really stopped it: same decisions on the same order means any difference between the
    systems' picks comes from the order results arrived in, not from the bookkeeping."""
    import warnings

    from benchmarks.cases import _curves

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = []
    for r in rows:
        if "trace" not in r:
            continue
        events = sorted(
            (wall, i, t) for i, tr in enumerate(r["trace"]) for t, wall in tr["rows"]
        )
        actual = {i: max(t for t, _ in tr["rows"]) for i, tr in enumerate(r["trace"])}
        verdicts = []
        for system in ("tandem", "ray"):
            sched, stop = _replay_scheduler(system, r)
            last: dict[int, int] = {}
            for _, i, t in events:
                if i in last:
                    continue  # stopped before: the run has no such row if it agrees
                result = {
                    "training_iteration": t,
                    "loss": _curves.observed_loss(r["trace"][i]["cfg"], t, int(r["seed"])),
                }
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if stop(sched, i, result):
                        last[i] = t
            same = sum(1 for i, t in actual.items() if last.get(i, t) == t)
            verdicts.append(f"{system} scheduler agrees on {same}/{len(actual)} trials")
        lines.append(f"{r['system']} seed {r['seed']}: " + "; ".join(verdicts))
    return "\n".join(lines)


def _replay_scheduler(system: str, run: dict[str, Any]) -> tuple[Any, Any]:
    p = {**_PARAMS, **run.get("params", {})}
    kw = {
        "metric": "loss",
        "mode": "min",
        "max_t": int(p["max_t"]),
        "grace_period": int(p["grace"]),
        "reduction_factor": p["rf"],
    }
    if system == "tandem":
        from tandem.tune.schedulers import Action, ASHAScheduler
        from tandem.tune.trial import Trial, TrialStatus

        sched = ASHAScheduler(**kw)
        sched.set_search_properties(None, None)
        trials: dict[int, Trial] = {}

        def stop(s: Any, i: int, result: dict[str, Any]) -> bool:
            if i not in trials:
                trials[i] = Trial("asha_seeds", config={}, trial_id=f"t{i}")
                trials[i].status = TrialStatus.RUNNING
                s.on_trial_add(trials[i])
            return bool(s.on_trial_result(trials[i], result).action is Action.STOP)

        return sched, stop
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.schedulers.async_hyperband import AsyncHyperBandScheduler

    class _T:
        def __init__(self, trial_id: str) -> None:
            self.trial_id = trial_id

    ray_sched = AsyncHyperBandScheduler(**kw)
    ray_trials: dict[int, _T] = {}

    def ray_stop(s: Any, i: int, result: dict[str, Any]) -> bool:
        if i not in ray_trials:
            ray_trials[i] = _T(f"t{i}")
            s.on_trial_add(None, ray_trials[i])
        return bool(s.on_trial_result(None, ray_trials[i], result) == TrialScheduler.STOP)

    return ray_sched, ray_stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--systems", default="tandem,ray,optuna")
    ap.add_argument("--seeds", default="0-23", help="e.g. 0-23 or 0,3,5-9")
    ap.add_argument("--out", type=Path, default=Path("asha_seeds.jsonl"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a case parameter (JSON value), e.g. --set trials=27")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--table", action="store_true", help="print the table of --out and exit")
    ap.add_argument("--replay", action="store_true",
                    help="replay each run of --out through both schedulers and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.out))
        return
    if args.replay:
        print(replay(args.out))
        return
    params = dict(_PARAMS)
    for kv in args.set:
        key, _, value = kv.partition("=")
        params[key] = json.loads(value)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in _TARGETS]
    if unknown:
        sys.exit(f"--systems {','.join(unknown)}: unknown; choose from {', '.join(_TARGETS)}")
    done = _done(args.out)
    for seed in _seeds(args.seeds):
        for system in systems:
            if (system, seed) in done:
                continue
            row = run_one(system, seed, params, args.timeout)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            shown = row.get("error", "")[-300:] or (
                f"regret {row['regret']:.4f} best {row['best_loss']:.4f} "
                f"steps {row['total_steps']} wall {row['wall_s']:.1f} s"
            )
            print(f"seed {seed} {system}: {shown}", flush=True)


if __name__ == "__main__":
    main()
