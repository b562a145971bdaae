"""Issue 21, item 4: ``tandem.tune.integration.xgboost`` / ``.lightgbm`` /
``.pytorch_lightning`` report callbacks (Ray's names), used inside Tune trials with the real
libraries: one Tuner, one trial per library."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import tune
from tandem.train import RunConfig

xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")
pl = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def _xy():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    return x, (x[:, 0] + x[:, 1] > 0).astype(int)


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainable(config):
    x, y = _xy()
    if config["lib"] == "xgboost":
        from tandem.tune.integration.xgboost import TuneReportCheckpointCallback

        dtrain = xgboost.DMatrix(x[:150], label=y[:150])
        deval = xgboost.DMatrix(x[150:], label=y[150:])
        xgboost.train({"objective": "binary:logistic", "eval_metric": ["logloss", "error"]},
                      dtrain, num_boost_round=4, evals=[(deval, "eval")], verbose_eval=False,
                      callbacks=[TuneReportCheckpointCallback(
                          metrics={"loss": "eval-logloss"}, frequency=2)])
    elif config["lib"] == "lightgbm":
        from tandem.tune.integration.lightgbm import TuneReportCheckpointCallback

        dtrain = lightgbm.Dataset(x[:150], label=y[:150])
        dvalid = lightgbm.Dataset(x[150:], label=y[150:], reference=dtrain)
        lightgbm.train({"objective": "binary", "metric": "binary_logloss", "verbose": -1,
                        "num_threads": 1}, dtrain, num_boost_round=4, valid_sets=[dvalid],
                       valid_names=["valid"],
                       callbacks=[TuneReportCheckpointCallback(
                           metrics={"loss": "valid-binary_logloss"})])
    else:
        from tandem.tune.integration.pytorch_lightning import TuneReportCheckpointCallback

        t = torch.tensor(x, dtype=torch.float32)
        data = torch.utils.data.TensorDataset(t, t[:, :1] * 2)
        loader = torch.utils.data.DataLoader(data, batch_size=50)
        trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False,
                             enable_progress_bar=False, enable_checkpointing=False,
                             callbacks=[TuneReportCheckpointCallback(
                                 metrics={"loss": "val_loss"}, filename="trainer.ckpt",
                                 on="validation_end")])
        trainer.fit(Tiny(), train_dataloaders=loader, val_dataloaders=loader)


def test_report_callbacks_in_trials(storage):
    tandem.init(num_cpus=2)
    grid = tune.Tuner(
        trainable,
        param_space={"lib": tune.grid_search(["xgboost", "lightgbm", "lightning"])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(storage_path=storage, name="integrations", verbose=0),
    ).fit()
    assert grid.num_errors == 0, [r.error for r in grid]
    by_lib = {r.config["lib"]: r for r in grid}
    for lib, rounds, filename in [("xgboost", 4, "model.ubj"), ("lightgbm", 4, "model.txt"),
                                  ("lightning", 3, "trainer.ckpt")]:
        result = by_lib[lib]
        df = result.metrics_dataframe
        assert list(df.columns[df.columns.str.startswith("loss")]) == ["loss"], lib
        assert len(df) == rounds, lib  # one report per round / validation end
        assert df["loss"].iloc[-1] < df["loss"].iloc[0], lib
        with result.checkpoint.as_directory() as d:
            assert os.listdir(d) == [filename], lib
    # the boosters in the checkpoints are the trained ones
    with by_lib["xgboost"].checkpoint.as_directory() as d:
        assert xgboost.Booster(model_file=os.path.join(d, "model.ubj")).num_boosted_rounds() == 4
    with by_lib["lightgbm"].checkpoint.as_directory() as d:
        assert lightgbm.Booster(model_file=os.path.join(d, "model.txt")).current_iteration() == 4


def test_deprecated_names_behave_as_rays():
    from tandem.tune.integration import lightgbm as tl
    from tandem.tune.integration import pytorch_lightning as tpl
    from tandem.tune.integration import xgboost as tx

    for mod in (tx, tl):
        with pytest.raises(DeprecationWarning, match="TuneReportCheckpointCallback"):
            mod.TuneReportCallback()
    with pytest.warns(UserWarning, match="deprecated"):
        cb = tpl.TuneReportCallback(metrics="val_loss")
    assert cb._save_checkpoints is False
    with pytest.raises(ValueError, match="Invalid hook selected: not_a_hook"):
        tpl.TuneReportCheckpointCallback(on="not_a_hook")
