"""Issue 25, trials per second: trial streams (on by default; ``TANDEM_TRIAL_STREAMS=0``
turns them off). A function trainable's trials run in at most ``max_concurrent_trials``
slot jobs whose workers take one trial after another (no job, controller or gang per
trial), and each trial still gets everything it gets as a job of its own: its folder and
Ray's files, its results in order, its error alone, its own session (context, reported
checkpoints), and a stop verdict at the same iteration. The tests that compare run both
ways; the others run with streams on and off."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

from tandem import train, tune
from tandem.jobs.runtime import get_service
from tandem.tune.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)


def _trivial(config):
    tune.report({"i": config["i"], "pid": os.getpid(),
                 "trial": tune.get_context().get_trial_id()})
    tune.report({"i": config["i"], "step": 2})
    if config["i"] == config["fail"]:
        raise ValueError(f"trial {config['fail']} fails on purpose")


@pytest.mark.parametrize("streams", ["1", pytest.param("0", marks=pytest.mark.slow)])
def test_300_trials_run_in_two_slot_jobs_with_their_files_and_one_error(monkeypatch, tmp_path,
                                                                        streams):
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", streams)
    n = 300 if streams == "1" else 20  # a job per trial: the same checks on fewer trials
    fail = n // 2
    tuner = tune.Tuner(
        _trivial, param_space={"i": tune.grid_search(list(range(n))), "fail": fail},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="sweep", verbose=0),
    )
    grid = tuner.fit()
    if streams == "1":
        assert 1 <= tuner._slot_jobs <= 2  # slot jobs, not one job per trial
    else:
        assert tuner._slot_jobs == 0

    results = list(grid)
    assert len(results) == n
    failed = [r for r in results if r.error is not None]
    assert len(failed) == 1 and failed[0].metrics["i"] == fail  # it failed alone
    assert f"trial {fail} fails on purpose" in str(failed[0].error)
    with open(os.path.join(failed[0].path, "error.txt")) as f:
        assert f"ValueError: trial {fail} fails on purpose" in f.read()
    by_i = {r.metrics["i"]: r for r in results}
    assert sorted(by_i) == list(range(n))
    pids = set()
    for i, r in by_i.items():
        assert r.metrics["training_iteration"] == 2 and r.metrics["step"] == 2
        with open(os.path.join(r.path, "params.json")) as f:
            assert json.load(f) == {"i": i, "fail": fail}
        with open(os.path.join(r.path, "result.json")) as f:
            rows = [json.loads(line) for line in f]
        assert [row["training_iteration"] for row in rows] == [1, 2]
        assert rows[0]["trial"] == rows[0]["trial_id"] == rows[1]["trial_id"]  # its context
        pids.add(rows[0]["pid"])
        with open(os.path.join(r.path, "progress.csv")) as f:
            assert len(f.read().splitlines()) == 3
        assert os.path.exists(os.path.join(r.path, "params.pkl"))
        assert os.path.isdir(os.path.join(r.path, "logs"))
    if streams == "1":
        assert len(pids) <= 2  # two worker processes ran them all, the sweep went on past 150


def _keeps(config):
    """Three checkpoints, each followed by get_all_reported_checkpoints(); then its own
    session as the trial sees it."""
    seen = []
    for step in range(1, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "w.txt"), "w") as f:
                f.write(f"{config['i']}-{step}")
            tune.report({"i": config["i"], "step": step},
                        checkpoint=tune.Checkpoint.from_directory(d))
        kept = train.get_all_reported_checkpoints()
        seen.append([[open(os.path.join(c.checkpoint.path, "w.txt")).read(),
                      c.metrics, c.status.name] for c in kept])
    ctx = tune.get_context()
    try:
        with tempfile.TemporaryDirectory() as d:
            train.report({"x": 1}, checkpoint=tune.Checkpoint.from_directory(d),
                         validation=True)
        validation = "accepted"
    except ValueError as e:
        validation = str(e)
    tune.report({"i": config["i"], "seen": seen,
                 "resumed_from": str(tune.get_checkpoint()),
                 "ctx": [ctx.get_trial_id(), ctx.get_trial_name(), ctx.get_trial_dir(),
                         ctx.get_experiment_name(), ctx.get_world_size(),
                         ctx.get_world_rank(), sorted(ctx.get_metadata())],
                 "validation": validation})


def _sessions(monkeypatch, tmp_path, streams: str):
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", streams)
    tuner = tune.Tuner(
        _keeps, param_space={"i": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=f"s{streams}", verbose=0),
    )
    grid = tuner.fit()
    assert not grid.errors
    assert (tuner._slot_jobs == 1) == (streams == "1")
    out = {}
    for r in grid:
        m = r.metrics
        trial_id, name, trial_dir, exp, *rest = m["ctx"]
        assert trial_id == m["trial_id"] and trial_dir == r.path
        assert exp == f"s{streams}" and name
        out[m["i"]] = (m["seen"], m["resumed_from"], rest, m["validation"],
                       m["training_iteration"], r.checkpoint.path.removeprefix(r.path))
    return out


@pytest.mark.slow
def test_a_streamed_trial_has_its_own_session_as_a_job_of_its_own(monkeypatch, tmp_path):
    # reported checkpoints, get_checkpoint(), the context and validation= per trial: what a
    # trial sees with streams is what it sees with a job of its own
    streams = _sessions(monkeypatch, tmp_path, "1")
    jobs = _sessions(monkeypatch, tmp_path, "0")
    for i in jobs:
        assert streams[i] == jobs[i], i
    seen = streams[2][0]
    assert [[w for w, _m, _s in kept] for kept in seen] == [
        ["2-1"], ["2-1", "2-2"], ["2-1", "2-2", "2-3"]]  # its own, none of the others'
    assert seen[2][1][1] == {"i": 2, "step": 2} and seen[2][1][2] == "COMMITTED"
    assert streams[2][1] == "None" and streams[2][4] == 4
    assert "validation_config" in streams[2][3]  # refused alike: no validation_config


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
    assert "TANDEM_TRIAL_STREAMS=0" in tuner._stream_refusal(service, FIFOScheduler(),
                                                             str(tmp_path), 0, key)
    monkeypatch.delenv("TANDEM_TRIAL_STREAMS")  # on by default
    assert tuner._stream_refusal(service, FIFOScheduler(), str(tmp_path), 0, key) is None
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")

    class _ServerClient:  # what a job service on a train server is not: the embedded one
        pass

    assert "train server" in tuner._stream_refusal(_ServerClient(), FIFOScheduler(),
                                                   str(tmp_path), 0, key)


def _marks_its_end(config):
    step = 0
    try:
        for step in range(1, 9):
            tune.report({"step": step})
    except SystemExit:  # what Ray's function trainable raises out of a stopped report
        with open(os.path.join(config["out"], tune.get_context().get_trial_id()), "w") as f:
            f.write(f"stopped at {step}, pid {os.getpid()}")
        raise


def test_a_stopped_streamed_trial_runs_its_finally_blocks_as_in_ray(monkeypatch, tmp_path):
    # Ray raises SystemExit out of the report a trial was stopped at (its finally blocks
    # and except SystemExit run); so does a stream, whose process then runs the next trial
    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")
    out = tmp_path / "ends"
    out.mkdir()
    tuner = tune.Tuner(
        _marks_its_end, param_space={"out": str(out), "n": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="stop", verbose=0,
                                  stop={"training_iteration": 3}),
    )
    grid = tuner.fit()
    assert not grid.errors and tuner._slot_jobs == 1
    assert sorted(r.metrics["training_iteration"] for r in grid) == [3, 3, 3]
    ends = {r.metrics["trial_id"]: (out / r.metrics["trial_id"]).read_text() for r in grid}
    assert {e.split(",")[0] for e in ends.values()} == {"stopped at 3"}
    assert len({e.split(",")[1] for e in ends.values()}) == 1  # one process ran all three


def _once(config):
    tune.report({"x": config["x"]})


def test_without_a_concurrency_limit_slots_follow_the_resources_not_the_trials(monkeypatch,
                                                                               tmp_path):
    # no max_concurrent_trials: as many slot jobs as the cluster runs at once, and one more
    # waiting for room, not a slot job per trial (each handing its trial over)
    monkeypatch.delenv("TANDEM_TRIAL_STREAMS", raising=False)  # on by default
    tuner = tune.Tuner(
        _once, param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=60),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="free", verbose=0),
    )
    grid = tuner.fit()
    assert not grid.errors and len(grid) == 60
    assert all(r.metrics["training_iteration"] == 1 for r in grid)
    cpus = get_service().cluster.resources()["CPU"]
    assert 1 <= tuner._slot_jobs <= int(cpus) + 1


def _curve(config):
    for i in range(1, 13):
        tune.report({"score": config["rate"] * i})


@pytest.mark.slow
@pytest.mark.parametrize("streams", ["1", "0"])
def test_a_trial_paused_by_the_median_rule_resumes_later(monkeypatch, tmp_path, streams):
    # MedianStoppingRule pauses a trial it cannot judge yet while others wait (Ray's
    # "yielding to waiting trials"): a paused streamed trial is paused, not ended, and
    # runs again later, as with a job of its own
    import tandem

    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", streams)
    tandem.init(num_cpus=2, ignore_reinit_error=True)
    sched = MedianStoppingRule(metric="score", mode="max", grace_period=2,
                               min_samples_required=3, time_attr="training_iteration")
    tuner = tune.Tuner(
        _curve, param_space={"rate": tune.grid_search([4.0, 2.0, 1.0, 0.5, 0.2, 0.1])},
        tune_config=tune.TuneConfig(scheduler=sched, max_concurrent_trials=6),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=f"m{streams}", verbose=0),
    )
    grid = tuner.fit()
    its = {r.config["rate"]: r.metrics["training_iteration"] for r in grid}
    assert not grid.errors
    assert its[4.0] == 12 and its[2.0] == 12  # paused at 2, then run to the end
    assert min(its.values()) < 12  # the median rule stopped the worst
    assert (tuner._slot_jobs > 0) == (streams == "1")


def _fails_at_once(config):
    raise ValueError(f"trial {config['i']} fails on purpose")


def test_fail_fast_stops_every_slot_without_waiting_for_one_out(monkeypatch, tmp_path):
    """``FailureConfig(fail_fast="raise")`` while another slot's worker has asked for its
    next trial (its question queued behind the failure being handled): that slot is stopped,
    not waited for. It was waited for until its 30 s limit, in about half of the runs."""
    from tandem.jobs.view import JobState

    unanswered: list[str] = []
    wait_outcome = JobState.wait_outcome

    def recording(self, timeout_s):
        outcome = wait_outcome(self, timeout_s)
        if outcome is None:
            unanswered.append(self.job_id)
        return outcome

    monkeypatch.setattr(JobState, "wait_outcome", recording)
    for attempt in range(4):  # the failing order varies run to run: try it several times
        with pytest.raises(Exception, match="fails on purpose"):  # noqa: B017, PT011
            tune.Tuner(_fails_at_once, param_space={"i": tune.grid_search(list(range(6)))},
                       run_config=tune.RunConfig(
                           storage_path=str(tmp_path / str(attempt)), verbose=0,
                           failure_config=tune.FailureConfig(fail_fast="raise"))).fit()
        assert unanswered == [], f"attempt {attempt}: slot jobs waited out: {unanswered}"


def test_slot_workers_back_in_the_pool_are_warm_workers_not_leftovers(monkeypatch, tmp_path):
    """After a streamed experiment the slots' processes wait in the pool for the next job,
    named ``tandem-warm`` as a warm worker forked ahead of demand is (``ps`` shows no
    worker still running; the tests' leftover check waited 30 s for them to retire)."""
    from tests.processes import no_workers_left

    monkeypatch.setenv("TANDEM_TRIAL_STREAMS", "1")
    grid = tune.Tuner(_trivial, param_space={"i": tune.grid_search(list(range(6))), "fail": -1},
                      run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    assert grid.num_errors == 0 and len(grid) == 6
    assert no_workers_left(timeout_s=10) == []
