"""model.train on real 2-worker DDP gangs (gloo) over digits."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from tandem import model, train
from tandem.train import Checkpoint, RunConfig, ScalingConfig, TrainingFailedError
from tandem.train.torch import TorchTrainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

X, Y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
TRAIN = (X[:1500], Y[:1500])
VALID = (X[1500:], Y[1500:])  # 297 rows: the two validation shards differ in size
SEED = 3


def make_net(hidden: int = 32) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 10))


class Digits(model.TorchModel):
    default_config: ClassVar[dict] = {"hidden": 32, "lr": 0.1, "optimizer": "sgd"}

    def setup(self):
        self.net = make_net(self.config["hidden"])

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.forward(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        return {"loss": F.cross_entropy(logits, y),
                "accuracy": (logits.argmax(1) == y).float().mean(),
                "rank": float(train.get_context().get_world_rank())}

    def configure_optimizers(self):
        if self.config["optimizer"] == "sgd":
            return torch.optim.SGD(self.net.parameters(), lr=self.config["lr"], momentum=0.9)
        return super().configure_optimizers()


def hand_written_ddp(config):
    """The same training as model.train, written by hand: same seed, shard, order, optimizer."""
    import tempfile

    from torch.nn.parallel import DistributedDataParallel

    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(config["seed"])
    net = make_net(32)
    net.load_state_dict(config["init"])
    ddp = DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = config["x"], config["y"]
    per = len(x) // world
    xs = torch.from_numpy(x[rank * per:(rank + 1) * per])
    ys = torch.from_numpy(y[rank * per:(rank + 1) * per])
    for epoch in range(1, config["epochs"] + 1):
        perm = torch.randperm(per, generator=torch.Generator().manual_seed(config["seed"] + epoch))
        for i in range(0, per, config["batch_size"]):
            idx = perm[i:i + config["batch_size"]]
            opt.zero_grad()
            F.cross_entropy(ddp(xs[idx]), ys[idx]).backward()
            opt.step()
    with tempfile.TemporaryDirectory() as d:
        torch.save(net.state_dict(), os.path.join(d, "net.pt"))
        train.report({"done": 1}, checkpoint=Checkpoint.from_directory(d) if rank == 0 else None)


def test_ddp_weights_equal_a_hand_written_loop_and_validation_is_global(tmp_path):
    settings = {"num_workers": 2, "num_epochs": 2, "batch_size": 32, "seed": SEED}
    start = Digits()  # a set-up instance: its weights (not setup()'s) are the starting point
    torch.manual_seed(SEED + 100)
    start.ensure_setup()
    init = {k: v.clone() for k, v in start.net.state_dict().items()}
    result = model.train(start, dataset={"train": TRAIN, "valid": VALID},
                         train_settings=settings, run_config=RunConfig(storage_path=str(tmp_path)))
    assert isinstance(result, model.ModelResult)
    rows = result.metrics_dataframe
    assert rows["epoch"].tolist() == [1, 2]
    for key in ("loss", "val_loss", "val_accuracy", "epoch_time_s", "samples_per_s"):
        assert key in rows.columns
    assert rows["loss"].iloc[1] < rows["loss"].iloc[0]

    ref = TorchTrainer(hand_written_ddp,
                       train_loop_config={"seed": SEED, "epochs": 2, "batch_size": 32,
                                          "x": TRAIN[0], "y": TRAIN[1], "init": init},
                       scaling_config=ScalingConfig(num_workers=2),
                       run_config=RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    expected = torch.load(os.path.join(ref.checkpoint.path, "net.pt"))
    trained = result.model
    assert isinstance(trained, Digits)
    got = trained.net.state_dict()
    for k, v in expected.items():
        assert torch.equal(got[k], v), k  # the loop really is DDP and really steps
    # validation metrics are the average over every validation row, not rank 0's
    n1 = len(range(1, len(VALID[0]), 2))
    assert result.metrics["val_rank"] == pytest.approx(n1 / len(VALID[0]), abs=1e-12)
    acc = float((trained.predict(VALID[0]).argmax(1).numpy() == VALID[1]).mean())
    assert acc == pytest.approx(result.metrics["val_accuracy"], abs=1e-6)
    # the checkpoint is a save() directory plus the optimizer and trainer state
    assert sorted(os.listdir(result.checkpoint.path)) == [
        "model.pkl", "model.pt", "optimizer.pt", "tandem_model.json", "trainer_state.json"]


class DigitsData:
    """A data class: built as DigitsData(config) and set up on each worker."""

    def __init__(self, config):
        self.config = config

    async def setup(self):
        from torch.utils.data import TensorDataset

        await asyncio.sleep(0)
        return {"train": TensorDataset(torch.from_numpy(TRAIN[0][:600]),
                                       torch.from_numpy(TRAIN[1][:600])),
                "valid": TensorDataset(torch.from_numpy(VALID[0]), torch.from_numpy(VALID[1]))}


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read_logs(run_path: str) -> str:
    out = []
    for name in os.listdir(os.path.join(run_path, "logs")):
        with open(os.path.join(run_path, "logs", name)) as f:
            out.append(f.read())
    return "".join(out)


class AsyncDigits(Digits):
    default_config: ClassVar[dict] = {**Digits.default_config, "marker_dir": None}

    async def setup(self):
        await asyncio.sleep(0)
        self.net = make_net(self.config["hidden"])
        self.counts = {"fit_start": 0, "epoch_start": 0, "batch_start": 0, "batch_end": 0}

    async def training_step(self, batch, batch_idx):
        await asyncio.sleep(0)
        x, y = batch
        return {"loss": F.cross_entropy(self.forward(x), y), "steps": 1.0}

    async def validation_step(self, batch, batch_idx):
        await asyncio.sleep(0)
        return super().validation_step(batch, batch_idx)

    async def on_fit_start(self):
        await asyncio.sleep(0)
        self.counts["fit_start"] += 1

    async def on_epoch_start(self, epoch):
        await asyncio.sleep(0)
        self.counts["epoch_start"] += 1

    async def on_batch_start(self, batch, batch_idx):
        await asyncio.sleep(0)
        self.counts["batch_start"] += 1

    async def on_batch_end(self, batch, batch_idx, output):
        await asyncio.sleep(0)
        assert isinstance(output, dict) and "loss" in output
        self.counts["batch_end"] += 1

    async def on_epoch_end(self, epoch, metrics):
        await asyncio.sleep(0)
        metrics.update({f"n_{k}": float(v) for k, v in self.counts.items()})

    async def on_fit_end(self):
        await asyncio.sleep(0)
        rank = train.get_context().get_world_rank()
        path = os.path.join(self.config["marker_dir"], f"fit_end_{rank}")
        await asyncio.to_thread(_write, path, str(self.counts["batch_end"]))


def test_async_steps_and_hooks_are_awaited(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    result = model.train(AsyncDigits, config={"marker_dir": str(markers)}, dataset=DigitsData,
                         train_settings={"num_workers": 2, "num_epochs": 2, "batch_size": 50},
                         run_config=RunConfig(storage_path=str(tmp_path), verbose=0))
    per_epoch = 300 // 50  # DistributedSampler: 600 rows over 2 ranks, batches of 50
    m = result.metrics
    assert m["epoch"] == 2 and m["steps"] == 1.0
    assert (m["n_fit_start"], m["n_epoch_start"]) == (1.0, 2.0)
    assert m["n_batch_start"] == m["n_batch_end"] == 2 * per_epoch
    assert sorted(os.listdir(markers)) == ["fit_end_0", "fit_end_1"]
    assert (markers / "fit_end_1").read_text() == str(2 * per_epoch)
    assert "never awaited" not in _read_logs(result.path)
    acc = float((result.model.predict(VALID[0]).argmax(1).numpy() == VALID[1]).mean())
    assert acc == pytest.approx(m["val_accuracy"], abs=1e-6)


class KilledOnce(Digits):
    """Rank 1 SIGKILLs itself in the middle of epoch 2, once (a marker file says so)."""

    default_config: ClassVar[dict] = {**Digits.default_config, "optimizer": "adam", "lr": 0.01,
                                      "marker": None}

    def on_epoch_start(self, epoch):
        self.epoch = epoch

    def on_batch_start(self, batch, batch_idx):
        marker = self.config["marker"]
        if (marker and self.epoch == 2 and batch_idx == 5 and not os.path.exists(marker)
                and train.get_context().get_world_rank() == 1):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)


def test_worker_killed_mid_epoch_resumes_from_latest_checkpoint(tmp_path):
    settings = {"num_workers": 2, "num_epochs": 3, "batch_size": 64, "seed": SEED,
                "max_failures": 1}
    marker = tmp_path / "killed"
    data = {"train": TRAIN, "valid": VALID}
    result = model.train(KilledOnce, config={"marker": str(marker)}, dataset=data,
                         train_settings=settings,
                         run_config=RunConfig(storage_path=str(tmp_path), name="killed"))
    assert marker.exists()  # rank 1 really died
    assert result.metrics["epoch"] == 3
    assert result.metrics_dataframe["epoch"].tolist() == [1, 2, 3]  # epoch 2 ran again, once
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000003"
    # resumed from epoch 1's weights and Adam state: the same weights as a run never killed
    clean = model.train(KilledOnce, dataset=data, train_settings=settings,
                        run_config=RunConfig(storage_path=str(tmp_path), name="clean", verbose=0))
    for k, v in clean.model.net.state_dict().items():
        assert torch.allclose(result.model.net.state_dict()[k], v, atol=1e-6), k


class Exploding(Digits):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        if self.epoch == 2 and batch_idx == 3:
            return loss * float("nan")
        return loss

    def on_epoch_start(self, epoch):
        self.epoch = epoch


def test_nonfinite_loss_stops_the_run_naming_epoch_and_batch(tmp_path):
    with pytest.raises(TrainingFailedError) as e:
        model.train(Exploding, dataset={"train": TRAIN},
                    train_settings={"num_workers": 2, "num_epochs": 3, "batch_size": 100},
                    run_config=RunConfig(storage_path=str(tmp_path), verbose=0))
    assert "NonFiniteLossError" in str(e.value)
    assert "loss of nan at epoch 2, batch 3" in str(e.value)
    assert "on_nonfinite_loss" in str(e.value)
    # asked to skip: the batch is skipped and the weights stay finite
    result = model.train(Exploding, dataset={"train": TRAIN},
                         train_settings={"num_workers": 1, "num_epochs": 2, "batch_size": 100,
                                         "on_nonfinite_loss": "skip"},
                         run_config=RunConfig(storage_path=str(tmp_path), verbose=0))
    assert result.metrics["epoch"] == 2 and np.isfinite(result.metrics["loss"])
    assert all(torch.isfinite(p).all() for p in result.model.net.parameters())


class ReturnsFloat(Digits):
    def training_step(self, batch, batch_idx):
        return super().training_step(batch, batch_idx).item()


def test_bad_training_step_return_is_named(tmp_path):
    with pytest.raises(TrainingFailedError) as e:
        model.train(ReturnsFloat, dataset={"train": TRAIN},
                    train_settings={"num_workers": 2, "batch_size": 500},
                    run_config=RunConfig(storage_path=str(tmp_path), verbose=0))
    assert "ReturnsFloat.training_step returned float" in str(e.value)
    assert "at epoch 1, batch 0" in str(e.value)


class Bf16(Digits):
    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        return {"loss": F.cross_entropy(logits, y), "bf16": float(logits.dtype == torch.bfloat16)}


def test_bf16_on_cpu_with_a_dataframe(tmp_path):
    import pandas as pd

    df = pd.DataFrame(X[:1000], columns=[f"p{i}" for i in range(64)]).assign(digit=Y[:1000])
    result = model.train(Bf16, dataset={"train": df, "valid": df.iloc[:200]},
                         train_settings={"num_epochs": 3, "batch_size": 32, "precision": "bf16",
                                         "label_column": "digit"},
                         run_config=RunConfig(storage_path=str(tmp_path), verbose=0))
    rows = result.metrics_dataframe
    assert rows["bf16"].tolist() == [1.0, 1.0, 1.0]  # the step ran under bf16 autocast
    assert rows["loss"].iloc[-1] < rows["loss"].iloc[0] and result.metrics["val_accuracy"] > 0.8
    assert next(result.model.net.parameters()).dtype == torch.float32  # weights stay fp32
