"""Lineage from a real model.train (block=False: the job id) and model.tune (the trial)."""

from __future__ import annotations

import filecmp
import os
from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from tandem import model, tune
from tandem.train import RunConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

X, Y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
DATA = {"train": (X[:1200], Y[:1200]), "valid": (X[1200:], Y[1200:])}


class LineageMLP(model.TorchModel):
    default_config: ClassVar[dict] = {"lr": 1e-2, "hidden": 32}
    example_input = np.zeros((1, 64), dtype=np.float32)

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
        return {"loss": F.cross_entropy(self.forward(x), y)}


@pytest.fixture
def registry_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)


def _no_load(self, directory):
    raise AssertionError("model.put loaded the weights of a checkpoint it should adopt")


def test_lineage_of_a_train_job_and_of_a_tuning_trial(tmp_path, registry_path, monkeypatch):
    handle = model.train(LineageMLP, dataset=DATA, train_settings={"num_epochs": 2},
                         run_config=RunConfig(storage_path=str(tmp_path), name="run"),
                         block=False)
    with monkeypatch.context() as patch:  # the workers have their copy of the class already
        patch.setattr(LineageMLP, "load_weights", _no_load)
        ref = model.put(handle, name="lineage")
    result = handle.wait()
    stored = model.registry.resolve(ref).location
    assert sorted(os.listdir(stored)) == ["model.pkl", "model.pt", "tandem_model.json"]
    with result.checkpoint.as_directory() as d:  # adopted byte for byte
        for name in os.listdir(stored):
            assert filecmp.cmp(os.path.join(stored, name), os.path.join(d, name), shallow=False)
    (v,) = model.list("lineage")
    assert v["lineage"]["job_id"] == handle.job_id
    assert v["lineage"]["run_path"] == result.path
    assert v["lineage"]["checkpoint"] == result.checkpoint.path
    assert v["metrics"]["epoch"] == 2 and v["metrics"]["val_loss"] == result.metrics["val_loss"]
    got = model.get(ref).predict(X[:50]).numpy()
    np.testing.assert_allclose(got, result.model.predict(X[:50]).numpy(), atol=1e-6)

    grid = model.tune(LineageMLP, dataset=DATA, param_space={"lr": tune.grid_search([3e-2, 1e-6])},
                      train_settings={"num_epochs": 1},
                      tune_settings={"metric": "val_loss", "mode": "min"},
                      run_config=RunConfig(storage_path=str(tmp_path), name="sweep", verbose=0))
    best = grid.get_best_result()
    ref = model.put(grid, name="lineage")
    assert ref == model.ModelRef("lineage", 2)
    v = model.list("lineage")[1]
    assert v["lineage"]["trial_id"] == best.metrics["trial_id"]
    assert v["lineage"]["run_path"] == best.path
    assert v["config"]["lr"] == 3e-2
    np.testing.assert_allclose(model.get("lineage@2").predict(X[:50]).numpy(),
                               best.model.predict(X[:50]).numpy(), atol=1e-6)
