"""Issue 25, trials per second: trial streams (``TANDEM_TRIAL_STREAMS=1``; off by default
for now). A function trainable's trials run in at most ``max_concurrent_trials`` slot jobs whose workers take one trial after another (no
job, controller or gang per trial), and each trial still gets everything it gets as a job
of its own: its folder and Ray's files, its results in order, its error alone, and a stop
verdict at the same iteration."""

from __future__ import annotations

import json
import os

import pytest

from tandem import tune
from tandem.jobs.runtime import get_service
from tandem.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining


def _trivial(config):
    tune.report({"i": config["i"], "pid": os.getpid(),
                 "trial": tune.get_context().get_trial_id()})
    tune.report({"i": config["i"], "step": 2})
    if config["i"] == 150:
        raise ValueError("trial 150 fails on purpose")


def test_300_trials_run_in_two_slot_jobs_with_their_files_and_one_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")
    n = 300
    tuner = tune.Tuner(
        _trivial, param_space={"i": tune.grid_search(list(range(n)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="sweep", verbose=0),
    )
    grid = tuner.fit()
    assert tuner._slot_jobs <= 2  # slot jobs, not one job per trial

    results = list(grid)
    assert len(results) == n
    failed = [r for r in results if r.error is not None]
    assert len(failed) == 1 and failed[0].metrics["i"] == 150  # it failed alone
    assert "trial 150 fails on purpose" in str(failed[0].error)
    with open(os.path.join(failed[0].path, "error.txt")) as f:
        assert "ValueError: trial 150 fails on purpose" in f.read()
    by_i = {r.metrics["i"]: r for r in results}
    assert sorted(by_i) == list(range(n))
    pids = set()
    for i, r in by_i.items():
        assert r.metrics["training_iteration"] == 2 and r.metrics["step"] == 2
        with open(os.path.join(r.path, "params.json")) as f:
            assert json.load(f) == {"i": i}
        with open(os.path.join(r.path, "result.json")) as f:
            rows = [json.loads(line) for line in f]
        assert [row["training_iteration"] for row in rows] == [1, 2]
        assert rows[0]["trial"] == rows[0]["trial_id"] == rows[1]["trial_id"]  # its context
        pids.add(rows[0]["pid"])
        with open(os.path.join(r.path, "progress.csv")) as f:
            assert len(f.read().splitlines()) == 3
        assert os.path.exists(os.path.join(r.path, "params.pkl"))
        assert os.path.isdir(os.path.join(r.path, "logs"))
    assert len(pids) <= 2  # two worker processes ran them all, the sweep went on past 150


def _climb(config):
    for step in range(1, 9):
        tune.report({"score": config["rate"] * step})


def _iterations(monkeypatch, tmp_path, streams: str, scheduler, stop):
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", streams)
    tuner = tune.Tuner(
        _climb, param_space={"rate": tune.grid_search([0.1, 0.9, 0.3, 0.7, 0.2, 0.8])},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=scheduler,
                                    max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=f"s{streams}", stop=stop,
                                  verbose=0),
    )
    grid = tuner.fit()
    assert not grid.errors
    return ({r.config["rate"]: r.metrics["training_iteration"] for r in grid},
            tuner._slot_jobs)


@pytest.mark.slow
def test_stop_verdicts_end_a_streamed_trial_where_a_job_would_end(monkeypatch, tmp_path):
    # stop criteria and ASHA on one seeded, sequential sweep: the same iterations per trial
    # with streams as with a job per trial
    def asha():
        return ASHAScheduler(max_t=8, grace_period=2, reduction_factor=2)

    jobs, none = _iterations(monkeypatch, tmp_path, "0", asha(), {"training_iteration": 6})
    streams, slots = _iterations(monkeypatch, tmp_path, "1", asha(), {"training_iteration": 6})
    assert none == 0 and slots >= 1
    assert streams == jobs
    assert max(jobs.values()) == 6 and min(jobs.values()) < 6  # both verdicts took effect


def test_streams_are_off_for_pbt_and_a_train_server(monkeypatch, tmp_path):
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")
    tuner = tune.Tuner(_climb, param_space={"rate": 0.5},
                       run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
    service = get_service()
    key = tuner._reuse_key(tuner.tune_config, "abcde")
    assert tuner._stream_refusal(service, FIFOScheduler(), str(tmp_path), 0, key) is None
    pbt = PopulationBasedTraining(metric="score", mode="max",
                                  hyperparam_mutations={"rate": [0.1, 0.5]})
    assert "may pause" in tuner._stream_refusal(service, pbt, str(tmp_path), 0, key)

    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "0")  # the switch, off
    assert "TANDEM_TRIAL_STREAMS" in tuner._stream_refusal(service, FIFOScheduler(),
                                                           str(tmp_path), 0, key)
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")

    class _ServerClient:  # what a job service on a train server is not: the embedded one
        pass

    assert "train server" in tuner._stream_refusal(_ServerClient(), FIFOScheduler(),
                                                   str(tmp_path), 0, key)
