"""Issue 25, trials per second: with the defaults (no ``reuse_actors``), a sweep of trivial
function trials runs trial after trial in the same few worker processes (no process start
per trial), and every trial keeps what Ray gives it: its folder and files, its result in
the ``ResultGrid``, its own config. A trial that leaves a thread running, or that seeded
``random``, does not leak that into the next trial: the process it ran in is not reused,
and a reused process is reseeded from the OS."""

from __future__ import annotations

import json
import os
import random
import threading

from tandem import tune


def _trivial(config):
    tune.report({"x": config["i"], "pid": os.getpid(), "draw": random.random()})
    random.seed(0)  # the next trial in this process must not draw what a fresh seed 0 gives
    if config["i"] == 7:  # left running: this process must not run another trial
        threading.Thread(target=threading.Event().wait, daemon=True).start()


def test_a_sweep_of_trivial_trials_reuses_its_worker_processes(tmp_path):
    n = 40
    grid = tune.Tuner(
        _trivial, param_space={"i": tune.grid_search(list(range(n)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="sweep", verbose=0),
    ).fit()

    results = list(grid)
    assert len(results) == n and not [r.error for r in results if r.error is not None]
    by_x = {r.metrics["x"]: r for r in results}
    assert sorted(by_x) == list(range(n))  # each trial ran its own config, once
    pids = [by_x[i].metrics["pid"] for i in range(n)]
    # two at a time, back to back: a handful of processes, not one per trial (the trial
    # that left a thread behind forces one more)
    assert len(set(pids)) <= 8, sorted(set(pids))
    seeded = random.Random(0).random()
    assert all(by_x[i].metrics["draw"] != seeded for i in range(n))  # reseeded, not seed 0
    pid7 = pids[7]
    later = [i for i in range(n) if pids[i] == pid7 and i != 7]
    assert all(i < 7 for i in later), later  # nothing ran in that process after trial 7

    # Ray's files for every trial, written by the default loggers
    for r in results:
        folder = r.path
        with open(os.path.join(folder, "params.json")) as f:
            assert json.load(f) == {"i": r.metrics["x"]}
        with open(os.path.join(folder, "result.json")) as f:
            rows = [json.loads(line) for line in f]
        assert [row["x"] for row in rows] == [r.metrics["x"]]
        with open(os.path.join(folder, "progress.csv")) as f:
            lines = f.read().splitlines()
        assert len(lines) == 2 and lines[0].split(",")[0] == "x"
        assert os.path.exists(os.path.join(folder, "params.pkl"))
    assert os.path.exists(os.path.join(str(tmp_path), "sweep", "experiment_state.json"))


def _uses_torch(config):
    import torch

    tune.report({"pid": os.getpid(), "draw": float(torch.rand(1)), "i": config["i"]})
    torch.manual_seed(0)  # a next trial in this process would draw what seed 0 gives


def test_trials_that_use_torch_each_get_a_fresh_process(tmp_path):
    """torch's global generator and settings cannot be reset as a fresh process has them,
    so a process that loaded torch runs no other trial (without ``reuse_actors``)."""
    import pytest

    pytest.importorskip("torch")
    grid = tune.Tuner(
        _uses_torch, param_space={"i": tune.grid_search([0, 1, 2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="torch", verbose=0),
    ).fit()
    rows = sorted((r.metrics["i"], r.metrics["pid"], r.metrics["draw"]) for r in grid)
    assert [i for i, _, _ in rows] == [0, 1, 2]
    assert len({pid for _, pid, _ in rows}) == 3, rows
