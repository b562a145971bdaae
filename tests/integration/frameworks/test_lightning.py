"""Issue 21, item 4: ``tandem.train.lightning`` with a real Lightning ``Trainer`` on 2
workers (Ray Train's ``ray.train.lightning`` names and behaviour)."""

from __future__ import annotations

import json
import os

import pytest

import tandem
from tandem.train import CheckpointConfig, RunConfig, ScalingConfig, ValidationConfig
from tandem.train.torch import TorchTrainer

pl = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")
from tandem.train.lightning import (
    RayDDPStrategy,
    RayDeepSpeedStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    RayTrainReportCallback,
    prepare_trainer,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


class Regressor(pl.LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.lr = lr
        self.seen = []

    def training_step(self, batch, batch_idx):
        x, y, idx = batch
        self.seen += idx.tolist()
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def _data(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    return torch.utils.data.TensorDataset(x, y, torch.arange(n))


def _checkpoint_size(checkpoint):
    """The validation function: runs on each committed checkpoint, off the workers."""
    return {"ckpt_bytes": os.path.getsize(
        os.path.join(checkpoint.path, RayTrainReportCallback.CHECKPOINT_NAME))}


def train_func(config):
    from tandem import train

    model = Regressor()
    loader = torch.utils.data.DataLoader(_data(), batch_size=8, shuffle=True)
    valid = torch.utils.data.DataLoader(_data(16), batch_size=8)
    strategy = RayFSDPStrategy() if config["strategy"] == "fsdp" else RayDDPStrategy()
    trainer = pl.Trainer(
        max_epochs=3, devices="auto", accelerator="auto", strategy=strategy,
        plugins=[RayLightningEnvironment()], callbacks=[RayTrainReportCallback(validation=True)],
        enable_checkpointing=False, enable_progress_bar=False, logger=False,
    )
    trainer = prepare_trainer(trainer)
    trainer.fit(model, train_dataloaders=loader, val_dataloaders=valid)
    rank = train.get_context().get_world_rank()
    state = {k: v.detach().float().sum().item() for k, v in model.state_dict().items()}
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump({"seen": model.seen, "state": state,
                   "world": trainer.world_size, "rank": trainer.global_rank}, f)


@pytest.mark.parametrize("strategy", ["ddp"])
def test_lightning_trainer_on_two_workers(storage, tmp_path, strategy):
    tandem.init(num_cpus=2)
    result = TorchTrainer(
        train_func, train_loop_config={"out": str(tmp_path), "strategy": strategy},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name=f"pl_{strategy}", verbose=0,
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),
        validation_config=ValidationConfig(fn=_checkpoint_size),
    ).fit()
    assert result.error is None
    # RayTrainReportCallback: one report per epoch with Lightning's callback metrics
    df = result.metrics_dataframe
    assert list(df["epoch"]) == [0, 1, 2] and list(df["step"]) == [4, 8, 12]
    assert df["train_loss"].iloc[-1] < df["train_loss"].iloc[0]
    assert "val_loss" in df.columns
    # validation=True: each kept checkpoint's metrics hold what the validation returned
    assert [m["ckpt_bytes"] > 0 for _c, m in result.best_checkpoints] == [True, True]
    # the checkpoint holds Lightning's checkpoint.ckpt, loadable into the module
    with result.checkpoint.as_directory() as d:
        ckpt = os.path.join(d, RayTrainReportCallback.CHECKPOINT_NAME)
        loaded = Regressor.load_from_checkpoint(ckpt)
    assert torch.allclose(loaded.net.weight.sum(), torch.tensor(0.0)) is False
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2] and [r["rank"] for r in ranks] == [0, 1]
    # each rank trained on its own half of the data (DistributedSampler from the strategy)
    first_epoch = [set(r["seen"][:32]) for r in ranks]
    assert not first_epoch[0] & first_epoch[1]
    assert sorted(first_epoch[0] | first_epoch[1]) == list(range(64))
    # gradients were all-reduced: both ranks end with the same weights, which are the
    # checkpoint's
    assert ranks[0]["state"] == pytest.approx(ranks[1]["state"])
    assert loaded.net.weight.sum().item() == pytest.approx(ranks[0]["state"]["net.weight"])


def test_prepare_trainer_refuses_other_strategies():
    trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False)
    with pytest.raises(RuntimeError, match="Invalid strategy class"):
        prepare_trainer(trainer)
    assert issubclass(RayDeepSpeedStrategy, pl.strategies.DeepSpeedStrategy)
