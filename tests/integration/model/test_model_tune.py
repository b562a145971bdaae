"""model.tune: a Tuner over the model's own hyperparameter space; ASHA stops on epochs."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from tandem import model, tune
from tandem._core.errors import ConfigError
from tandem.train import RunConfig
from tandem.tune.schedulers import ASHAScheduler

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

X, Y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)


class Digits(model.TorchModel):
    default_config: ClassVar[dict] = {"lr": 1e-3, "hidden": 32}

    def setup(self):
        self.net = torch.nn.Sequential(torch.nn.Linear(64, self.config["hidden"]),
                                       torch.nn.ReLU(), torch.nn.Linear(self.config["hidden"], 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.forward(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        return {"loss": F.cross_entropy(logits, y), "accuracy": (logits.argmax(1) == y).float().mean()}

    @classmethod
    def hyperparameter_space(cls):
        # good learning rates first, so the bad ones meet full rungs and are stopped
        return {"lr": tune.grid_search([0.03, 0.01, 1e-6, 1e-7])}


def test_tune_with_asha_stops_trials_early_and_best_model_loads(tmp_path):
    grid = model.tune(
        Digits,
        dataset={"train": (X[:1200], Y[:1200]), "valid": (X[1200:], Y[1200:])},
        train_settings={"num_epochs": 6, "batch_size": 64, "seed": 0},
        tune_settings={"metric": "val_loss", "mode": "min",
                       "scheduler": ASHAScheduler(max_t=6, grace_period=1, reduction_factor=2),
                       "max_concurrent_trials": 2},
        run_config=RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    )
    assert len(grid) == 4 and grid.num_errors == 0
    epochs = {r.config["lr"]: r.metrics["epoch"] for r in grid}
    assert epochs[0.03] == 6
    assert min(epochs.values()) < 6, epochs  # ASHA stopped someone on a per-epoch report
    best = grid.get_best_result()
    assert isinstance(best, model.ModelResult) and best.config["lr"] in (0.03, 0.01)
    assert best.config["hidden"] == 32  # the model config, sampled keys over the defaults
    m = best.model
    assert isinstance(m, Digits) and m.config["lr"] == best.config["lr"]
    acc = float((m.predict(X[1200:]).argmax(1).numpy() == Y[1200:]).mean())
    assert acc == pytest.approx(best.metrics["val_accuracy"], abs=1e-6) and acc > 0.9
    df = grid.get_dataframe()
    assert "config/lr" in df.columns


def test_stop_criteria_reach_the_tuner_and_model_train_refuses_them(tmp_path):
    # issue 17, item 9: RunConfig(stop=...) is the Tuner's; a single model.train run would
    # ignore it, so it is refused there (as a trainer's fit() refuses it)
    data = {"train": (X[:400], Y[:400]), "valid": (X[400:600], Y[400:600])}
    grid = model.tune(
        Digits, param_space={"lr": tune.grid_search([0.03, 0.01])}, dataset=data,
        train_settings={"num_epochs": 5, "batch_size": 64, "seed": 0},
        run_config=RunConfig(storage_path=str(tmp_path), verbose=0,
                             stop={"training_iteration": 2}),
    )
    assert grid.num_errors == 0
    assert sorted(r.metrics["training_iteration"] for r in grid) == [2, 2]
    with pytest.raises(ConfigError, match=r"stop=.*Tuner"):
        model.train(Digits, dataset=data, train_settings={"num_epochs": 1},
                    run_config=RunConfig(storage_path=str(tmp_path), verbose=0,
                                         stop={"training_iteration": 2}))
