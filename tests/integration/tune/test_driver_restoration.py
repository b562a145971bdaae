"""A ``fit()`` whose ``(storage_path, name)`` already holds a run resumes it from its latest
committed checkpoint, as Ray Train documents: "Train driver restoration is automatic, as long
as the (storage_path, name) remains the same across trial restarts" (issue 17, item 5)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

import tandem
from tandem import train, tune
from tandem.train import Checkpoint, DataParallelTrainer, FailureConfig, RunConfig, ScalingConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _loop(config):
    import tempfile

    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "next")) as f:
            start = int(f.read())
    rank = train.get_context().get_world_rank()
    for step in range(start, config["steps"]):
        if rank == 0:
            with open(config["log"], "a") as f:
                f.write(f"{step}\n")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "next"), "w") as f:
                f.write(str(step + 1))
            train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))
        kill = config.get("kill_after")
        if kill is not None and step == kill and rank == 0 and not os.path.exists(
                config["log"] + ".killed"):
            # wait until this step's checkpoint is committed, then kill the trial's driver
            state = os.path.join(train.get_context().get_storage().run_path,
                                 "checkpoints.json")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    with open(state) as f:
                        if json.load(f)["latest"][0] == step + 1:
                            break
                except (OSError, ValueError, TypeError):
                    pass
                time.sleep(0.02)
            open(config["log"] + ".killed", "w").close()
            os.kill(config["driver_pid"], signal.SIGKILL)
            time.sleep(30)  # the driver's death ends this gang


def _steps(log: str) -> list[int]:
    with open(log) as f:
        return [int(x) for x in f.read().split()]


def test_second_fit_with_the_same_name_resumes_the_first(storage, tmp_path):
    tandem.init(num_cpus=2)
    log = str(tmp_path / "steps")
    rc = RunConfig(name="same", storage_path=storage, verbose=0)
    DataParallelTrainer(_loop, train_loop_config={"steps": 3, "log": log},
                        run_config=rc).fit()
    r = DataParallelTrainer(_loop, train_loop_config={"steps": 5, "log": log},
                            run_config=rc).fit()
    assert _steps(log) == [0, 1, 2, 3, 4]  # the second fit went on from checkpoint_000003
    assert r.metrics["step"] == 4
    with open(os.path.join(storage, "same", "result.json")) as f:
        its = [json.loads(line)["training_iteration"] for line in f]
    assert its == [1, 2, 3, 4, 5]
    # the same run once more: nothing is left to do, and its result is the last one reported
    again = DataParallelTrainer(_loop, train_loop_config={"steps": 5, "log": log},
                                run_config=rc).fit()
    assert _steps(log) == [0, 1, 2, 3, 4] and again.metrics["step"] == 4
    # a new name starts afresh
    DataParallelTrainer(_loop, train_loop_config={"steps": 2, "log": log},
                        run_config=RunConfig(name="other", storage_path=storage,
                                             verbose=0)).fit()
    assert _steps(log)[-2:] == [0, 1]


def _driver(config):
    trial_id = tune.get_context().get_trial_id()
    trainer = DataParallelTrainer(
        _loop,
        train_loop_config={**config["loop"], "driver_pid": os.getpid()},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name=f"train-trial_id={trial_id}",
                             storage_path=config["storage"], verbose=0),
    )
    result = trainer.fit()
    tune.report(result.metrics)


def test_a_restarted_trial_driver_resumes_its_train_run(storage, tmp_path):
    tandem.init(num_cpus=3)
    log = str(tmp_path / "steps")
    rg = tune.Tuner(
        _driver,
        param_space={"storage": storage,
                     "loop": {"steps": 12, "log": log, "kill_after": 9}},
        run_config=RunConfig(storage_path=storage, name="exp", verbose=0,
                             failure_config=FailureConfig(max_failures=3)),
    ).fit()
    assert rg.num_errors == 0, rg.errors
    assert os.path.exists(log + ".killed")
    steps = _steps(log)
    # steps 0-9 ran once; the restarted driver's fit() resumed from checkpoint_000010
    assert steps == list(range(12)), steps
    assert rg[0].metrics["step"] == 11
