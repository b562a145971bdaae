"""model.TensorflowModel and model.JaxModel: the same model.train / tune / put / get / serve
calls as a TorchModel; a served model answers the same HTTP request format; bad models are
refused before any worker starts."""

from __future__ import annotations

import os
from typing import ClassVar

import httpx
import numpy as np
import pytest

import tandem
from tandem import model, tune
from tandem.model import ModelDefinitionError
from tandem.train import RunConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

W = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)


def data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    return x, (x @ W).astype(np.float32)


class LinearKeras(model.TensorflowModel):
    default_config: ClassVar[dict] = {"lr": 0.05, "units": 1}
    example_input = np.zeros((1, 4), dtype=np.float32)

    def setup(self):
        import tensorflow as tf

        self.net = tf.keras.Sequential([tf.keras.Input((4,)),
                                        tf.keras.layers.Dense(self.config["units"])])

    def compile_settings(self):
        import tensorflow as tf

        return {"optimizer": tf.keras.optimizers.SGD(self.config["lr"]), "loss": "mse"}


class LinearJax(model.JaxModel):
    default_config: ClassVar[dict] = {"lr": 0.1, "seed": 0}
    example_input = np.zeros((1, 4), dtype=np.float32)

    def init_params(self, rng):
        import jax

        return {"w": jax.random.normal(rng, (4,)) * 0.01, "b": np.float32(0.0)}

    def apply(self, params, x):
        return x @ params["w"] + params["b"]


class CountingJax(LinearJax):
    calls = 0

    def apply(self, params, x):
        CountingJax.calls += 1  # state outside the function changes its result
        return (x @ params["w"]) * CountingJax.calls


class BranchingJax(LinearJax):
    def apply(self, params, x):
        if float(params["b"]) > 0:  # needs a concrete value: not traceable
            return x @ params["w"]
        return x @ params["w"] + 1


def _serve_and_check(ref, local, x):
    handle = model.serve(ref)
    try:
        r = httpx.post(handle.url + "/predict", json={"inputs": x.tolist()}, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.asarray(r.json()["outputs"]).reshape(-1),
                                   np.asarray(local.predict(x)).reshape(-1), rtol=1e-4,
                                   atol=1e-4)
        bad = httpx.post(handle.url + "/predict", json={"inputs": "nope"}, timeout=60)
        assert 400 <= bad.status_code < 500
    finally:
        handle.stop()


@pytest.fixture
def models_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)


def test_jax_model_train_tune_put_get_serve(storage, tmp_path, models_path):
    pytest.importorskip("jax")
    tandem.init(num_cpus=2)
    x, y = data()
    result = model.train(LinearJax, train_settings={"num_workers": 2, "num_epochs": 8,
                                                    "batch_size": 32},
                         dataset={"train": (x, y), "valid": data(64, 1)},
                         run_config=RunConfig(storage_path=storage, verbose=0))
    assert result.metrics["epoch"] == 8 and result.metrics["val_loss"] < 0.05
    trained = result.model
    assert isinstance(trained, LinearJax)
    np.testing.assert_allclose(np.asarray(trained.params["w"]), W, atol=0.15)
    ref = model.put(result, name="jax-linear")  # the checkpoint's files, adopted as they are
    again = model.get(ref)
    np.testing.assert_allclose(again.predict(x[:5]), trained.predict(x[:5]), rtol=1e-5)
    _serve_and_check(ref, trained, x[:3])
    grid = model.tune(LinearJax, param_space={"lr": tune.grid_search([0.0, 0.1])},
                      tune_settings={"metric": "loss", "mode": "min"},
                      train_settings={"num_workers": 1, "num_epochs": 3, "batch_size": 32},
                      dataset={"train": (x, y)},
                      run_config=RunConfig(storage_path=storage, verbose=0))
    assert grid.get_best_result().config["lr"] == 0.1


def test_impure_jax_functions_are_refused_before_workers_start(storage):
    pytest.importorskip("jax")
    x, y = data(64)
    for cls, match in ((CountingJax, "returned different values"),
                       (BranchingJax, "not a pure JAX function: tracing")):
        with pytest.raises(ModelDefinitionError, match=match):
            model.train(cls, train_settings={"num_workers": 2, "num_epochs": 1},
                        dataset={"train": (x, y)},
                        run_config=RunConfig(storage_path=storage, verbose=0))
    assert os.listdir(storage) == []  # no run started


def test_tensorflow_model_train_tune_put_get_serve(storage, models_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf_keras")
    tandem.init(num_cpus=2)
    x, y = data()
    result = model.train(LinearKeras, train_settings={"num_workers": 2, "num_epochs": 6,
                                                      "batch_size": 16},
                         dataset={"train": (x, y), "valid": data(64, 1)},
                         run_config=RunConfig(storage_path=storage, verbose=0))
    assert result.metrics["epoch"] == 6 and result.metrics["val_loss"] < 0.05
    trained = result.model
    assert isinstance(trained, LinearKeras)
    ref = model.put(result, name="tf-linear")  # the checkpoint's files, adopted as they are
    again = model.get(ref)
    np.testing.assert_allclose(again.predict(x[:5]), trained.predict(x[:5]), rtol=1e-5)
    np.testing.assert_allclose(trained.predict(x[:5]).reshape(-1), x[:5] @ W, atol=0.3)
    _serve_and_check(ref, trained, x[:3])
    grid = model.tune(LinearKeras, param_space={"lr": tune.grid_search([0.0, 0.05])},
                      tune_settings={"metric": "loss", "mode": "min"},
                      train_settings={"num_workers": 1, "num_epochs": 2, "batch_size": 16},
                      dataset={"train": (x, y)},
                      run_config=RunConfig(storage_path=storage, verbose=0))
    assert grid.get_best_result().config["lr"] == 0.05
