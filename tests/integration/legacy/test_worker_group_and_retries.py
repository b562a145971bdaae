"""``Trainer.to_worker_group`` (live workers holding an instance) and ``max_retries``
(a worker killed mid-run: the run restarts from the latest checkpoint)."""

from __future__ import annotations

import os
import signal

import pytest

import tandem
from tandem import train
from tandem.train import Trainer
from tandem.train.legacy import WorkerGroupError
from tests.processes import no_workers_left

pytestmark = pytest.mark.timeout(60)


class Model:
    def __init__(self, scale, offset=0.0):
        self.scale = scale
        self.offset = offset
        self.calls = 0

    def all_reduced(self):
        import torch
        import torch.distributed as dist

        self.calls += 1
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        return t.item() * self.scale + self.offset

    def whoami(self):
        return train.world_rank(), train.world_size(), self.calls

    def fail(self, message):
        raise ValueError(message)


def test_worker_group_executes_on_every_worker(tmp_path):
    tandem.init(num_cpus=2)
    trainer = Trainer(backend="torch", num_workers=2, logdir=str(tmp_path))
    workers = trainer.to_worker_group(Model, 2.0, offset=1.0)
    try:
        assert len(workers) == 2
        assert workers.execute("all_reduced") == [7.0, 7.0]  # (1 + 2) * 2 + 1 on both
        assert workers[1].execute("whoami") == (1, 2, 1)  # the instance kept its state
        assert workers.execute(lambda m, k: m.scale * k, 3) == [6.0, 6.0]
        jobs = [j for j in tandem.jobs.list() if j.job_id == workers.job_id]
        assert jobs[0].status() == "RUNNING"  # it holds its resources while it lives
        with pytest.raises(WorkerGroupError, match="fail\\(\\) raised on worker rank 0: "
                                                   "ValueError: bad input") as info:
            workers.execute("fail", "bad input")
        assert isinstance(info.value.cause, ValueError)
        assert "in fail" in info.value.worker_traceback
        assert workers.execute("all_reduced") == [7.0, 7.0]  # still usable afterwards
    finally:
        workers.shutdown()
    assert jobs[0].status() == "FINISHED"
    assert no_workers_left() == []
    with pytest.raises(WorkerGroupError, match="has been shut down"):
        workers.execute("whoami")


class Broken:
    def __init__(self):
        raise RuntimeError("cannot build the model")


def test_worker_group_init_failure_is_reported(tmp_path):
    tandem.init(num_cpus=2)
    trainer = Trainer("torch", num_workers=2, logdir=str(tmp_path))
    with pytest.raises(WorkerGroupError, match="RuntimeError: cannot build the model"):
        trainer.to_worker_group(Broken)
    # Both ranks had joined the process group (they build the instance only after it), so
    # both exist; the failed group's job killed them (SIGKILL) before the error was raised,
    # and the kernel ends a killed process a moment later (longer on a loaded machine):
    # no_workers_left waits for exactly that.
    assert no_workers_left() == []


def killed_once(config):
    import torch.distributed as dist

    state = train.load_checkpoint()
    start = state["epoch"] + 1 if state else 0
    with open(os.path.join(config["out"], f"start_{train.world_rank()}.txt"), "a") as f:
        f.write(f"{start}\n")
    for epoch in range(start, config["epochs"]):
        dist.barrier()
        if epoch == 3 and train.world_rank() == 1 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        train.report(epoch=epoch)
        train.save_checkpoint(epoch=epoch)
    return train.world_rank()


def test_a_killed_worker_restarts_from_the_latest_checkpoint(tmp_path):
    tandem.init(num_cpus=2)
    trainer = Trainer("torch", num_workers=2, logdir=str(tmp_path / "logs"), max_retries=1)
    trainer.start()
    config = {"epochs": 5, "out": str(tmp_path), "marker": str(tmp_path / "killed")}
    steps = []
    iterator = trainer.run_iterator(killed_once, config=config)
    for results in iterator:
        steps.append([r["epoch"] for r in results])
    assert iterator.get_final_results() == [0, 1]
    # epochs 0-2 done and checkpointed; rank 1 died at epoch 3; both resumed at 3
    assert (tmp_path / "start_0.txt").read_text().split() == ["0", "3"]
    assert (tmp_path / "start_1.txt").read_text().split() == ["0", "3"]
    assert steps == [[0, 0], [1, 1], [2, 2], [3, 3], [4, 4]]
    assert trainer.latest_checkpoint == {"epoch": 4}
    trainer.shutdown()


def always_dies():
    os.kill(os.getpid(), signal.SIGKILL)


def test_retries_spent_raises(tmp_path):
    tandem.init(num_cpus=2)
    trainer = Trainer("torch", num_workers=1, logdir=str(tmp_path), max_retries=0)
    trainer.start()
    with pytest.raises(train.TrainingFailedError, match="killed by SIGKILL") as info:
        trainer.run(always_dies)
    assert "Trainer(max_retries=0): no restarts allowed" in str(info.value)  # the setting they wrote
    assert info.value.num_failures == 1
    trainer.shutdown()
