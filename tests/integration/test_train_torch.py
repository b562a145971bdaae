"""Real multi-process training: torch.distributed (gloo), checkpoints, failures, restarts."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

import pytest

import tandem
from tandem import train
from tandem.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer
from tests.processes import no_workers_left

pytestmark = pytest.mark.timeout(120)


def ddp_train(config):
    import torch
    import torch.distributed as dist

    from tandem.train.torch import prepare_model

    ctx = train.get_context()
    rank = ctx.get_world_rank()
    torch.manual_seed(0)  # same initial weights on every rank
    model = prepare_model(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = train.get_dataset_shard("train")  # a different shard on each rank
    x = torch.tensor([row[0] for row in data], dtype=torch.float32)
    y = torch.tensor([row[1] for row in data], dtype=torch.float32).unsqueeze(1)
    for step in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        train.report({"loss": loss.item(), "step": step})
    weights = [p.detach().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(config["out"], f"weights_{rank}.json"), "w") as f:
        json.dump({"weights": weights, "backend": dist.get_backend(),
                   "world": dist.get_world_size()}, f)


def test_ddp_gradients_are_all_reduced(storage, tmp_path):
    tandem.init(num_cpus=2)
    rows = [([float(i), float(i % 3), 1.0, -float(i)], float(i % 5)) for i in range(64)]
    result = TorchTrainer(
        ddp_train,
        train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="ddp"),
        datasets={"train": rows},
    ).fit()
    w0 = json.loads((tmp_path / "weights_0.json").read_text())
    w1 = json.loads((tmp_path / "weights_1.json").read_text())
    assert w0["backend"] == "gloo" and w0["world"] == 2
    assert w0["weights"] == w1["weights"]  # identical after training on different shards
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    init = [p.detach().flatten().tolist() for p in torch.nn.Linear(4, 1).parameters()]
    assert w0["weights"] != init  # and they did train
    assert result.metrics["step"] == 4
    assert len(result.metrics_dataframe) == 5


def resumable(config):
    import torch.distributed as dist

    ctx = train.get_context()
    rank = ctx.get_world_rank()
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = json.load(open(os.path.join(d, "state.json")))["step"] + 1
    with open(os.path.join(config["out"], f"start_{rank}.txt"), "a") as f:
        f.write(f"{start}\n")
    for step in range(start, config["steps"]):
        dist.barrier()  # ranks move in step, as a DDP step's all-reduce makes them
        if step == 12 and rank == 1 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            os.kill(os.getpid(), 9)  # SIGKILL: no goodbye, no traceback
        with contextlib.ExitStack() as stack:  # the checkpoint's folder ends after the report
            checkpoint = None
            if step % 5 == 0 and rank == 0:
                d = stack.enter_context(tempfile.TemporaryDirectory())
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step}, f)
                checkpoint = Checkpoint.from_directory(d)
            train.report({"step": step}, checkpoint=checkpoint)


def test_sigkill_of_rank1_resumes_from_latest_checkpoint(storage, tmp_path):
    tandem.init(num_cpus=2)
    result = TorchTrainer(
        resumable,
        train_loop_config={"out": str(tmp_path), "steps": 16, "marker": str(tmp_path / "killed")},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="resume",
                             failure_config=FailureConfig(max_failures=1)),
    ).fit()
    # Rank 1 died at step 12; the checkpoints were at steps 0, 5, 10: resume at 11.
    assert (tmp_path / "start_0.txt").read_text().split() == ["0", "11"]
    assert (tmp_path / "start_1.txt").read_text().split() == ["0", "11"]
    assert result.metrics == {"step": 15}
    assert result.error is None
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000016"  # step 15 = iteration 16
    assert json.load(open(os.path.join(result.checkpoint.path, "state.json")))["step"] == 15
    steps = result.metrics_dataframe["step"].tolist()
    assert steps[-5:] == [11, 12, 13, 14, 15]


def always_fails(config):
    import torch  # noqa: F401

    if train.get_context().get_world_rank() == 1:
        raise ValueError("bad batch shape (3, 7)")
    import time

    time.sleep(30)


def test_failure_budget_spent_raises_with_worker_traceback(storage):
    tandem.init(num_cpus=2)
    trainer = TorchTrainer(
        always_fails,
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="fails",
                             failure_config=FailureConfig(max_failures=1)),
    )
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    err = info.value
    assert err.rank == 1
    assert err.exc_type == "ValueError"
    assert "bad batch shape (3, 7)" in str(err)
    assert "in always_fails" in err.worker_traceback
    assert err.num_failures == 2
    assert isinstance(err.cause, ValueError)
    assert "max_failures=1" in str(err)
    assert no_workers_left() == []  # the sleeping rank 0 was killed too
    assert "bad batch shape" in open(os.path.join(storage, "fails", "error.txt")).read()


def test_checkpoint_config_keeps_top_k(storage):
    def f():
        for i, score in enumerate([0.5, 0.9, 0.1, 0.7]):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "i"), "w").write(str(i))
                train.report({"score": score}, checkpoint=Checkpoint.from_directory(d))

    tandem.init(num_cpus=2)
    result = TorchTrainer(
        f, scaling_config=ScalingConfig(num_workers=1),
        run_config=RunConfig(storage_path=storage, name="topk", checkpoint_config=CheckpointConfig(
            num_to_keep=2, checkpoint_score_attribute="score")),
    ).fit()
    kept = sorted(n for n in os.listdir(os.path.join(storage, "topk")) if n.startswith("checkpoint_"))
    # best is iteration 2 (0.9); the latest (iteration 4) is always kept
    assert kept == ["checkpoint_000002", "checkpoint_000004"]
    assert [m["score"] for _, m in result.best_checkpoints] == [0.9, 0.7]
    assert result.checkpoint.path.endswith("checkpoint_000004")


def test_resume_from_checkpoint_starts_from_it(storage, tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    (ckpt_dir / "state.json").write_text(json.dumps({"step": 41}))

    def f():
        with train.get_checkpoint().as_directory() as d:
            step = json.load(open(os.path.join(d, "state.json")))["step"]
        train.report({"resumed_step": step})

    tandem.init(num_cpus=2)
    result = TorchTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                          run_config=RunConfig(storage_path=storage),
                          resume_from_checkpoint=Checkpoint.from_directory(ckpt_dir)).fit()
    assert result.metrics == {"resumed_step": 41}


def test_threads_follow_cpu_share(storage):
    def f():
        import torch

        train.report({"threads": torch.get_num_threads(),
                      "omp": os.environ["OMP_NUM_THREADS"]})

    tandem.init(num_cpus=2)
    r = TorchTrainer(f, scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 2}),
                     run_config=RunConfig(storage_path=storage)).fit()
    assert r.metrics == {"threads": 2, "omp": "2"}
    r = TorchTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                     run_config=RunConfig(storage_path=storage)).fit()
    assert r.metrics == {"threads": 1, "omp": "1"}


def test_unserializable_metric_names_the_key(tmp_path):
    def f():
        train.report({"loss": 0.1, "model": object()})

    tandem.init(num_cpus=2)
    with pytest.raises(train.TrainingFailedError, match=r"metric 'model' has a value of type builtins.object"):
        TorchTrainer(f, run_config=RunConfig(storage_path=str(tmp_path))).fit()


def test_tensor_metrics_are_converted(tmp_path):
    def f():
        import numpy as np
        import torch

        train.report({"t": torch.tensor(0.5), "n": np.float32(2.0), "nested": {"a": np.int64(3)}})

    tandem.init(num_cpus=2)
    r = TorchTrainer(f, run_config=RunConfig(storage_path=str(tmp_path))).fit()
    assert r.metrics == {"t": 0.5, "n": 2.0, "nested": {"a": 3}}


