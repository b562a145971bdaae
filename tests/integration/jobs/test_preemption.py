"""Priority preemption with a checkpoint, end to end on the local cluster (real workers)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time

import pytest

from tandem import train
from tandem.train import (
    Checkpoint,
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from tests.helpers.preemption import priority_cluster, run_high, wait_reports

pytestmark = pytest.mark.slow


def low_priority_loop(config):
    """Trains ``steps`` steps; checkpoints when asked to yield (and at the end)."""
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["step"]
    saved = False
    for step in range(start, config["steps"]):
        time.sleep(0.05)  # one "training step" of work
        info = train.get_preemption_info()
        with contextlib.ExitStack() as stack:  # the checkpoint's folder ends after the report
            checkpoint = None
            if (info is not None and not saved) or step == config["steps"] - 1:
                saved = info is not None
                d = stack.enter_context(tempfile.TemporaryDirectory())
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step + 1}, f)
                checkpoint = Checkpoint.from_directory(d)
            train.report({"step": step, "preempted": info is not None,
                          "deadline_ms": info.deadline_ms if info else 0,
                          "ranks": info.preempted_ranks if info else []}, checkpoint=checkpoint)


def test_a_low_priority_run_yields_with_a_checkpoint_and_resumes(tmp_path):
    with priority_cluster():
        low = DataParallelTrainer(
            low_priority_loop, train_loop_config={"steps": 60},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(name="low", storage_path=str(tmp_path), verbose=0,
                                 failure_config=FailureConfig(max_failures=0)))
        handle = low.fit(block=False)
        wait_reports(handle, 4)  # the low run is well under way
        high_result = run_high(str(tmp_path))
        assert high_result.error is None and high_result.metrics["i"] == 1
        result = handle.wait(timeout=120)
    assert result.error is None
    df = result.metrics_dataframe
    # training_iteration goes on across the preemption: 1..60, each once, in order
    assert list(df["training_iteration"]) == list(range(1, 61))
    assert list(df["step"]) == list(range(60))  # resumed from the checkpoint, not step 0
    told = df[df["preempted"]]
    assert len(told) >= 1 and list(told["ranks"].iloc[0]) == [0, 1]
    assert told["deadline_ms"].iloc[0] > 0
    reasons = [(s, r) for s, r in _transitions(handle)]
    states = [s for s, _ in reasons]
    assert states[-1] == "FINISHED" and "RESTARTING" in states
    why = dict(reasons)["RESTARTING"]
    assert "preempted for" in why and "priority 5 > 0" in why and "checkpointed" in why
    assert handle.job.num_preemptions == 1  # type: ignore[attr-defined]
    # a preemption is not a failure
    assert not os.path.exists(os.path.join(result.path, "error.txt"))


def _transitions(handle):
    job = handle.job
    return [(s, r) for s, r in getattr(job, "reasons", [])]


def test_a_preempted_tune_trial_resumes_from_its_checkpoint(tmp_path):
    from tandem import tune

    def trial(config):
        low_priority_loop(config)  # a function trainable: tune.report is train.report here

    with priority_cluster():
        tuner = tune.Tuner(
            tune.with_resources(trial, {"CPU": 2}),
            param_space={"steps": 40},
            run_config=RunConfig(name="exp", storage_path=str(tmp_path), verbose=0,
                                 owner="tuner-owner"))
        import threading

        box: dict = {}
        t = threading.Thread(target=lambda: box.setdefault("grid", tuner.fit()))
        t.start()
        from tandem.jobs import runtime

        svc = runtime.get_service()
        trial_job = None
        while trial_job is None or not trial_job.read_reports(0, 0.05).rows:
            jobs = [j for j in svc.list() if j.status.value == "RUNNING"]
            trial_job = jobs[0] if jobs else None
            t.join(0.05)
        assert run_high(str(tmp_path)).error is None
        t.join(120)
    grid = box["grid"]
    assert grid.num_errors == 0
    df = grid[0].metrics_dataframe
    assert list(df["training_iteration"]) == list(range(1, 41))
    assert list(df["step"]) == list(range(40)) and df["preempted"].any()
    assert trial_job.num_preemptions == 1
    assert trial_job.owner == "tuner-owner" and trial_job.priority == 0  # inherited


def test_past_max_preemption_failures_the_run_fails_with_preemption_error(tmp_path):
    """``FailureConfig(max_preemption_failures=0)``: the first preemption ends the run with
    ``PreemptionError`` saying what to change (its own budget: ``max_failures=3`` does not
    resume it), and the higher-priority run still gets the cluster."""
    from tandem.train import PreemptionError

    with priority_cluster():
        low = DataParallelTrainer(
            low_priority_loop, train_loop_config={"steps": 400},
            scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 2}),
            run_config=RunConfig(name="low", storage_path=str(tmp_path), verbose=0,
                                 failure_config=FailureConfig(
                                     max_failures=3, max_preemption_failures=0)))
        handle = low.fit(block=False)
        wait_reports(handle, 3)
        assert run_high(str(tmp_path), {"CPU": 2}).error is None
        with pytest.raises(PreemptionError) as raised:
            handle.wait(timeout=120)
        assert handle.status() == "FAILED"
    message = str(raised.value)
    assert "preempted 1 time(s)" in message and "max_preemption_failures=0" in message
    assert "priority 5 > 0" in message and "RunConfig(priority=...)" in message
    assert handle.job.num_preemptions == 1  # type: ignore[attr-defined]
    with open(os.path.join(str(tmp_path), "low", "result.json")) as f:
        assert 3 <= len(f.readlines()) < 400  # it ran, then ended at the preemption
