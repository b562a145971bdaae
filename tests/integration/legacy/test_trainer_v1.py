"""The 1.x Trainer API, driven the way its users wrote programs: start, run, run_iterator,
a checkpoint carried from one run to the next, callbacks, and the misuse errors."""

from __future__ import annotations

import inspect
import json
import os

import pytest

import tandem
from tandem import train
from tandem.train import CheckpointStrategy, Trainer
from tandem.train.legacy import TrainerStateError
from tandem.train.legacy.callbacks import JsonLoggerCallback, TrainingCallback

pytestmark = pytest.mark.timeout(60)


def train_func(config):
    import torch
    import torch.distributed as dist

    state = train.load_checkpoint()
    start = state["epoch"] + 1 if state else 0
    for epoch in range(start, start + config["epochs"]):
        t = torch.tensor([float(train.world_rank() + 1)])
        dist.all_reduce(t)  # the backend is set up: a process group over every worker
        train.report(epoch=epoch, total=t.item(), rank=train.world_rank(),
                     size=train.world_size(), local=train.local_rank())
        train.save_checkpoint(epoch=epoch, weights=[float(epoch)] * 3)
    return f"rank {train.world_rank()} done"


class Recorder(TrainingCallback):
    def __init__(self):
        self.calls = []

    def start_training(self, logdir, config, **info):
        self.calls.append(("start", os.path.basename(logdir), config))

    def handle_result(self, results, **info):
        self.calls.append(("result", [r["epoch"] for r in results]))

    def finish_training(self, error=False, **info):
        self.calls.append(("finish", error))


def test_run_run_iterator_and_a_checkpoint_carried_over(tmp_path):
    tandem.init(num_cpus=2)
    trainer = Trainer(backend="torch", num_workers=2, logdir=str(tmp_path / "logs"))
    trainer.start()
    recorder = Recorder()
    results = trainer.run(train_func, config={"epochs": 2},
                          callbacks=[JsonLoggerCallback(), recorder])
    assert results == ["rank 0 done", "rank 1 done"]
    assert recorder.calls == [("start", "run_001", {"epochs": 2}), ("result", [0, 0]),
                              ("result", [1, 1]), ("finish", False)]
    assert trainer.latest_run_dir == tmp_path / "logs" / "run_001"
    assert trainer.latest_checkpoint == {"epoch": 1, "weights": [1.0, 1.0, 1.0]}
    logged = json.loads((trainer.latest_run_dir / "results.json").read_text())
    assert [[r["epoch"] for r in step] for step in logged] == [[0], [1]]  # rank 0 only
    assert logged[1][0]["total"] == 3.0 and logged[1][0]["_training_iteration"] == 2
    # result.json keeps the reports only: a save_checkpoint is a checkpoint, not a row
    rows = [json.loads(line) for line in (trainer.latest_run_dir / "result.json").open()]
    assert [r["epoch"] for r in rows] == [0, 1]

    iterator = trainer.run_iterator(train_func, config={"epochs": 2},
                                    checkpoint=trainer.latest_checkpoint)
    assert iterator.get_final_results() is None  # not consumed yet
    steps = list(iterator)
    assert iterator.is_finished()
    assert iterator.get_final_results() == ["rank 0 done", "rank 1 done"]
    assert [[r["epoch"] for r in step] for step in steps] == [[2, 2], [3, 3]]
    assert [(r["rank"], r["size"], r["local"]) for r in steps[0]] == [(0, 2, 0), (1, 2, 1)]
    assert [step[0]["_training_iteration"] for step in steps] == [1, 2]
    assert trainer.latest_run_dir.name == "run_002"
    assert trainer.latest_checkpoint["epoch"] == 3
    assert trainer.latest_checkpoint_dir == trainer.latest_run_dir
    assert trainer.best_checkpoint_path.parent == trainer.latest_run_dir
    assert (tmp_path / "logs" / "run_001" / "checkpoint_000004").is_dir()  # left alone

    with pytest.raises(RuntimeError, match="must not be active to use to_worker_group"):
        trainer.to_worker_group(object)
    with pytest.raises(RuntimeError, match="must not be active to use to_tune_trainable"):
        trainer.to_tune_trainable(train_func)
    trainer.shutdown()
    with pytest.raises(TrainerStateError, match="This Trainer is not active: it has been shut down"):
        trainer.run(train_func, config={"epochs": 1})


def test_checkpoint_strategy_keeps_the_best(tmp_path):
    def f():
        for i, loss in enumerate([0.5, 0.2, 0.9, 0.7]):
            train.report(loss=loss)
            train.save_checkpoint(loss=loss, step=i)

    tandem.init(num_cpus=2)
    trainer = Trainer("torch", num_workers=1, logdir=str(tmp_path))
    trainer.start()
    assert trainer.run(f, checkpoint_strategy=CheckpointStrategy(
        num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min")) == [None]
    kept = sorted(p.name for p in trainer.latest_run_dir.iterdir() if p.name.startswith("checkpoint_"))
    assert kept == ["checkpoint_000004", "checkpoint_000008"]  # the best (0.2) and the latest
    assert trainer.best_checkpoint_path.name == "checkpoint_000004"
    assert trainer.latest_checkpoint == {"loss": 0.7, "step": 3}
    trainer.shutdown()


def test_initialization_hook_and_datasets(tmp_path):
    def hook():
        os.environ["FROM_HOOK"] = "yes"

    def f(config):
        shard = train.get_dataset_shard()
        train.report(hook=os.environ.get("FROM_HOOK"), shard=list(shard))
        train.report({"style": "dict"})  # today's spelling works in the same function

    tandem.init(num_cpus=2)
    trainer = Trainer("torch", num_workers=2, logdir=str(tmp_path))
    trainer.start(initialization_hook=hook)
    steps = list(trainer.run_iterator(f, dataset=list(range(6))))
    assert [r["shard"] for r in steps[0]] == [[0, 1, 2], [3, 4, 5]]
    assert steps[0][0]["hook"] == "yes"
    assert steps[1][1]["style"] == "dict"
    trainer.shutdown()


def test_misuse_raises_the_errors_users_know(tmp_path):
    trainer = Trainer("torch", num_workers=1, logdir=str(tmp_path))
    with pytest.raises(TrainerStateError, match=r"Trainer.start\(\) must be called before run\(\)"):
        trainer.run(train_func)
    with pytest.raises(RuntimeError, match="This Trainer is not active"):
        trainer.run_iterator(train_func)
    with pytest.raises(ValueError, match=r"Trainer\(backend='mxnet'\) is not available"):
        Trainer("mxnet", num_workers=1, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="use_gpu=False.*GPU"):
        Trainer("torch", num_workers=1, resources_per_worker={"GPU": 1}, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="num_to_keep"):
        CheckpointStrategy(num_to_keep=-1)


def test_to_tune_trainable_is_a_function_of_config(tmp_path):
    trainer = Trainer("torch", num_workers=2, logdir=str(tmp_path))
    trainable = trainer.to_tune_trainable(train_func)
    assert callable(trainable)
    assert list(inspect.signature(trainable).parameters) == ["config"]
    assert trainable.__name__ == "train_func"


def report_three_steps(config):
    for step in range(3):
        train.report(step=step, loss=config["lr"] * (3 - step), rank=train.world_rank())


@pytest.mark.slow
def test_to_tune_trainable_under_tune_run_reports_every_step(tmp_path):
    """trainer.to_tune_trainable(fn) under tune.run: each trial fits the function on the
    Trainer's workers (a job submitted from inside the trial's worker) and its reports are
    the trial's results (it crashed with an AttributeError on the nested job's view)."""
    from tandem import tune

    trainer = Trainer("torch", num_workers=2, logdir=str(tmp_path / "train"))
    trainable = trainer.to_tune_trainable(report_three_steps)
    analysis = tune.run(trainable, config={"lr": tune.grid_search([0.1, 0.2])},
                        metric="loss", mode="min", storage_path=str(tmp_path / "tune"), verbose=0)
    assert len(analysis.trials) == 2
    for trial in analysis.trials:
        assert trial.error is None
        last = trial.last_result
        assert last["step"] == 2 and last["rank"] == 0
        assert last["loss"] == pytest.approx(trial.config["lr"])
        assert last["training_iteration"] == 3  # one trial result per step of the run
    assert analysis.get_best_config(metric="loss", mode="min") == {"lr": 0.1}
