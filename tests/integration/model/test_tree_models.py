"""model.XGBoostModel / model.LightGBMModel: model.train on 2 workers, the trained model
predicts, saves and loads like any model, and model.tune tunes its config."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

import tandem
from tandem import model, tune
from tandem.train import RunConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def cancer():
    return load_breast_cancer(as_frame=True).frame


@pytest.mark.parametrize(("cls", "config", "key"), [
    (model.XGBoostModel, {"objective": "binary:logistic", "eval_metric": "logloss",
                          "max_depth": 3}, "valid-logloss"),
    (model.LightGBMModel, {"objective": "binary", "metric": "binary_logloss"},
     "valid-binary_logloss"),
])
def test_train_predict_save_load(storage, cancer, tmp_path, cls, config, key, monkeypatch):
    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    tandem.init(num_cpus=2)
    result = model.train(
        cls, config=config,
        train_settings={"num_workers": 2, "num_epochs": 10, "label_column": "target",
                        "checkpoint_every": 5},
        dataset={"train": cancer.iloc[:450], "valid": cancer.iloc[450:]},
        run_config=RunConfig(storage_path=storage, verbose=0),
    )
    assert result.metrics["epoch"] == 10 and result.metrics[key] < 0.3
    trained = result.model
    assert isinstance(trained, cls)
    x = cancer.drop(columns=["target"]).to_numpy()
    pred = trained.predict(x)
    assert ((pred > 0.5) == cancer["target"].to_numpy()).mean() > 0.9
    trained.save(str(tmp_path / "saved"))
    again = model.Model.load(str(tmp_path / "saved"))
    assert type(again) is cls
    np.testing.assert_allclose(again.predict(x[:5]), pred[:5])
    ref = model.put(result)  # the checkpoint's files, adopted without loading them
    stored = sorted(os.listdir(model.registry.resolve(ref).location))
    assert stored == sorted([cls.weights_file, "model.pkl", "tandem_model.json"])
    np.testing.assert_allclose(model.get(ref).predict(x[:5]), pred[:5])


def test_tune_tree_model_config(storage, cancer):
    tandem.init(num_cpus=2)
    grid = model.tune(
        model.XGBoostModel({"objective": "binary:logistic", "eval_metric": "logloss"}),
        param_space={"max_depth": tune.grid_search([1, 4])},
        tune_settings={"metric": "train-logloss", "mode": "min"},
        train_settings={"num_workers": 2, "num_epochs": 5, "label_column": "target"},
        dataset={"train": cancer},
        run_config=RunConfig(storage_path=storage, verbose=0),
    )
    best = grid.get_best_result()
    assert best.config["max_depth"] == 4
    assert best.model.booster.num_boosted_rounds() == 5
