"""model.train with a ray.data.Dataset on the Ray cluster: Ray Data's streaming split."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

import tandem
from tandem import model
from tandem.train import RunConfig

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.ray_cluster]


class Digits(model.TorchModel):
    default_config = {"lr": 0.01}  # noqa: RUF012

    def setup(self):
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):  # Ray Data batches are dicts of columns
        return {"loss": F.cross_entropy(self.forward(batch["x"]), batch["y"]),
                "rows": float(len(batch["y"]))}

    def validation_step(self, batch, batch_idx):
        return {"accuracy": (self.forward(batch["x"]).argmax(1) == batch["y"]).float().mean()}


def test_model_train_on_ray_data(storage):
    tandem.init(cluster="ray")
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    items = [{"x": X[i], "y": int(y[i])} for i in range(len(y))]
    result = model.train(
        Digits,
        dataset={"train": ray.data.from_items(items[:1400]), "valid": ray.data.from_items(items[1400:])},
        train_settings={"num_workers": 2, "num_epochs": 4, "batch_size": 50, "seed": 0},
        run_config=RunConfig(storage_path=storage, name="ray_data_model", verbose=0),
    )
    rows = result.metrics_dataframe
    assert rows["epoch"].tolist() == [1, 2, 3, 4]
    assert rows["samples_per_s"].min() > 0
    m = result.model
    acc = float((m.predict(X[1400:]).argmax(1).numpy() == y[1400:]).mean())
    assert acc > 0.8 and abs(acc - result.metrics["val_accuracy"]) < 0.05
