"""Elastic gangs on the local cluster (real workers): start at what fits, grow at a
checkpoint when capacity frees, with the data re-split and iterations going on."""

from __future__ import annotations

import json
import os
import tempfile
import time

import pytest

import tandem
from tandem import train
from tandem.train import Checkpoint, DataParallelTrainer, RunConfig, ScalingConfig
from tests.helpers.steps import report_step, resume_step

pytestmark = pytest.mark.slow


def busy_loop(config):
    for i in range(config["steps"]):
        time.sleep(0.05)
        train.report({"i": i})


def elastic_loop(config):
    shard = train.get_dataset_shard("train")
    ctx = train.get_context()
    for step in range(resume_step(train), config["steps"]):
        time.sleep(0.05)
        report_step(train, {"step": step, "world": ctx.get_world_size(), "rows": len(shard)},
                    step + 1 if step % 3 == 2 else None)


def test_an_elastic_gang_starts_small_and_grows_at_a_checkpoint(tmp_path):
    tandem.init(num_cpus=2, configure_logging=False)
    try:
        blocker = DataParallelTrainer(
            busy_loop, train_loop_config={"steps": 30},
            scaling_config=ScalingConfig(num_workers=1),
            run_config=RunConfig(name="blocker", storage_path=str(tmp_path), verbose=0))
        bh = blocker.fit(block=False)
        next(iter(bh.results()))  # the blocker holds 1 of the 2 CPUs
        elastic = DataParallelTrainer(
            elastic_loop, train_loop_config={"steps": 60},
            scaling_config=ScalingConfig(num_workers=(1, 2),
                                         elastic_resize_monitor_interval_s=0.2),
            run_config=RunConfig(name="elastic", storage_path=str(tmp_path), verbose=0),
            datasets={"train": list(range(100))})
        handle = elastic.fit(block=False)
        result = handle.wait(timeout=120)
        assert bh.wait(timeout=60).error is None
    finally:
        tandem.shutdown()
    assert result.error is None
    df = result.metrics_dataframe
    assert list(df["training_iteration"]) == list(range(1, 61))
    assert list(df["step"]) == list(range(60))
    worlds = list(df["world"])
    assert worlds[0] == 1 and worlds[-1] == 2  # started at what fit, grew to the most
    assert sorted(set(zip(df["world"], df["rows"]))) == [(1, 100), (2, 50)]  # re-split
    grown_at = worlds.index(2)
    assert df["step"].iloc[grown_at] % 3 == 0  # the new gang began at a checkpoint boundary
    states = [s for s, _ in handle.job.reasons]  # type: ignore[attr-defined]
    why = [r for s, r in handle.job.reasons if s == "RESTARTING"]  # type: ignore[attr-defined]
    assert states[-1] == "FINISHED" and why and "growing from 1 to 2 workers" in why[0]


def shrinking_loop(config):
    """Checkpoints every step; says when it ran small (a file the high run waits for), and
    ends once it has grown back after that (or at ``max_steps``)."""
    start, was_small = 0, False
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            state = json.load(f)
            start, was_small = state["step"], state["was_small"]
    ctx = train.get_context()
    world = ctx.get_world_size()
    for step in range(start, config["max_steps"]):
        time.sleep(0.05)
        if world == 1:
            was_small = True
            if ctx.get_world_rank() == 0:
                open(config["small"], "w").close()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"step": step + 1, "was_small": was_small}, f)
            train.report({"step": step, "world": world},
                         checkpoint=Checkpoint.from_directory(d))
        if was_small and world == 2 and step >= 5:
            return


def until_file_loop(config):
    i = 0
    while not os.path.exists(config["small"]) and i < 2000:
        time.sleep(0.05)
        train.report({"i": i})
        i += 1


def test_a_preempted_elastic_gang_shrinks_instead_of_waiting_then_grows_back(tmp_path):
    """Issue 24 item 4: an elastic run (1..2 workers) holding the cluster is preempted by a
    higher-priority 1-CPU run; it resumes at once with the 1 worker that fits beside it
    (not waiting for 2), and grows back to 2 at a checkpoint once the cluster frees."""
    from tandem.train import FailureConfig

    small = str(tmp_path / "ran_small")
    tandem.init(num_cpus=2, scheduling="priority", configure_logging=False)
    try:
        elastic = DataParallelTrainer(
            shrinking_loop, train_loop_config={"max_steps": 2000, "small": small},
            scaling_config=ScalingConfig(num_workers=(1, 2),
                                         elastic_resize_monitor_interval_s=0.2),
            run_config=RunConfig(name="elastic", storage_path=str(tmp_path), verbose=0,
                                 failure_config=FailureConfig(max_failures=0)))
        handle = elastic.fit(block=False)
        for n, _ in enumerate(handle.results()):
            if n >= 2:
                break
        high = DataParallelTrainer(
            until_file_loop, train_loop_config={"small": small},
            scaling_config=ScalingConfig(num_workers=1),
            run_config=RunConfig(name="high", storage_path=str(tmp_path), verbose=0,
                                 priority=5))
        high_result = high.fit()  # runs until the elastic run ran small beside it
        result = handle.wait(timeout=120)
    finally:
        tandem.shutdown()
    assert high_result.error is None
    assert result.error is None
    df = result.metrics_dataframe
    assert list(df["training_iteration"]) == list(range(1, len(df) + 1))
    assert list(df["step"]) == list(range(len(df)))  # resumed from its checkpoints
    worlds = list(df["world"])
    shrunk = worlds.index(1)
    assert worlds[0] == 2 and shrunk > 0 and worlds[-1] == 2, worlds
    reasons = [r or "" for s, r in handle.job.reasons if s in ("RESTARTING", "RUNNING")]  # type: ignore[attr-defined]
    assert any("preempted for" in r for r in reasons), reasons
    assert any("growing from 1 to 2 workers" in r for r in reasons), reasons
    assert handle.job.num_preemptions == 1  # type: ignore[attr-defined]
