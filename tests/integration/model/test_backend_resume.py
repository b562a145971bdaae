"""TensorflowModel / JaxModel: a run resumed after a worker failure continues with the
optimizer's state (Adam's moments and step count) from the checkpoint, so it ends with the
weights of a run never interrupted."""

from __future__ import annotations

import os
import signal
from typing import ClassVar

import numpy as np
import pytest

import tandem
from tandem import model, train
from tandem.train import RunConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

W = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
STEPS = 4  # per epoch: 128 rows over 2 workers, batches of 16 per worker
SETTINGS = {"num_workers": 2, "num_epochs": 3, "batch_size": 16, "seed": 7, "max_failures": 1}


def data(n=128, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    return x, np.tanh(x @ W).astype(np.float32)


def die_in_epoch_2(marker, step):
    """Rank 1 SIGKILLs itself at the 3rd step of epoch 2, once (the marker says so)."""
    if (marker and int(step) == STEPS + 2 and not os.path.exists(marker)
            and train.get_context().get_world_rank() == 1):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


class AdamKeras(model.TensorflowModel):
    default_config: ClassVar[dict] = {"lr": 0.05, "marker": None}

    def setup(self):
        import tensorflow as tf

        self.net = tf.keras.Sequential([tf.keras.Input((4,)),
                                        tf.keras.layers.Dense(8, activation="tanh"),
                                        tf.keras.layers.Dense(1)])

    def compile_settings(self):
        import tensorflow as tf

        opt = tf.keras.optimizers.Adam(self.config["lr"])
        marker = self.config["marker"]

        def loss(y, pred):  # eager (run_eagerly): the step count is a concrete value
            die_in_epoch_2(marker, opt.iterations.numpy())
            return tf.keras.losses.mean_squared_error(y, pred)

        return {"optimizer": opt, "loss": loss, "run_eagerly": True}


class AdamJax(model.JaxModel):
    default_config: ClassVar[dict] = {"lr": 0.05, "seed": 0, "marker": None}

    def init_params(self, rng):
        import jax

        k1, k2 = jax.random.split(rng)
        return {"w1": jax.random.normal(k1, (4, 8)) * 0.5, "w2": jax.random.normal(k2, (8,)) * 0.5}

    def apply(self, params, x):
        import jax.numpy as jnp

        return jnp.tanh(x @ params["w1"]) @ params["w2"]

    def optimizer(self):
        import jax
        import optax

        adam = optax.adam(self.config["lr"])
        marker = self.config["marker"]

        def update(grads, state, params=None):
            jax.debug.callback(lambda count: die_in_epoch_2(marker, count), state[0].count)
            return adam.update(grads, state, params)

        return optax.GradientTransformation(adam.init, update)


def _train(cls, storage, name, marker=None):
    return model.train(cls, config={"marker": marker}, dataset={"train": data()},
                       train_settings=SETTINGS,
                       run_config=RunConfig(storage_path=storage, name=name, verbose=0))


def _check_resumed(result, marker):
    assert os.path.exists(marker)  # rank 1 really died in epoch 2
    assert result.metrics_dataframe["epoch"].tolist() == [1, 2, 3]  # epoch 2 ran again, once


def test_tensorflow_model_resumes_with_adam_state(storage, tmp_path):
    pytest.importorskip("tf_keras")
    tandem.init(num_cpus=2)
    marker = str(tmp_path / "killed")
    resumed = _train(AdamKeras, storage, "killed", marker)
    _check_resumed(resumed, marker)
    with resumed.checkpoint.as_directory() as d, np.load(os.path.join(d, "optimizer.npz")) as z:
        assert int(z["arr_0"]) == 3 * STEPS  # Adam's step count went on from epoch 1's
    clean = _train(AdamKeras, storage, "clean")
    for a, b in zip(resumed.model.net.get_weights(), clean.model.net.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_jax_model_resumes_with_optax_adam_state(storage, tmp_path):
    pytest.importorskip("optax")
    tandem.init(num_cpus=2)
    marker = str(tmp_path / "killed")
    resumed = _train(AdamJax, storage, "killed", marker)
    _check_resumed(resumed, marker)
    with resumed.checkpoint.as_directory() as d, np.load(os.path.join(d, "opt_state.npz")) as z:
        assert int(z["arr_0"]) == 3 * STEPS  # optax's Adam count went on from epoch 1's
    clean = _train(AdamJax, storage, "clean")
    for k in ("w1", "w2"):
        np.testing.assert_allclose(np.asarray(resumed.model.params[k]),
                                   np.asarray(clean.model.params[k]), rtol=1e-4, atol=1e-5)
