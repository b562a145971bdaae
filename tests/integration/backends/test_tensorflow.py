"""TensorflowTrainer on 2 real worker processes: MultiWorkerMirroredStrategy forms one
collective from the TF_CONFIG tandem sets, Keras' fit all-reduces the gradients, and
ReportCheckpointCallback reports and checkpoints."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

# checked without importing TensorFlow: the driver never needs it (and it takes seconds)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="needs the tensorflow extra")]
needs_keras2 = pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None,
                                  reason="needs tf-keras (Keras 2) for fit under MWMS")

from tandem.train import RunConfig, ScalingConfig
from tandem.train.tensorflow import TensorflowTrainer


def mwms_train(config):
    import sys

    preloaded = [m for m in ("tensorflow", "tf_keras") if m in sys.modules]
    from tensorflow.keras.callbacks import Callback  # bound when TensorFlow was imported

    keras_module = Callback.__module__
    import numpy as np
    import tensorflow as tf

    from tandem import train
    from tandem.air.integrations.keras import ReportCheckpointCallback

    ctx = train.get_context()
    rank = ctx.get_world_rank()
    tf_config = json.loads(os.environ["TF_CONFIG"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    scoped = config["in_scope"]
    if scoped:
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
            model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    else:
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    rng = np.random.default_rng(100 + rank)  # different data on each worker
    x = rng.normal(size=(32, 4)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).with_options(options)
    model.fit(ds, epochs=2, verbose=0, callbacks=[ReportCheckpointCallback()])
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump({"weights": [w.ravel().tolist() for w in model.get_weights()],
                   "replicas": strategy.num_replicas_in_sync,
                   "workers": tf_config["cluster"]["worker"],
                   "index": tf_config["task"]["index"], "preloaded": preloaded,
                   "keras_module": keras_module}, f)


@needs_keras2
def test_two_workers_all_reduce_gradients_and_report_checkpoints(tmp_path, storage):
    trainer = TensorflowTrainer(
        mwms_train, train_loop_config={"out": str(tmp_path), "in_scope": True},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="tf", verbose=0))
    result = trainer.fit()
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    # one collective of 2 workers, from the TF_CONFIG tandem set
    assert r0["replicas"] == r1["replicas"] == 2
    assert r0["workers"] == r1["workers"] and len(set(r0["workers"])) == 2
    assert (r0["index"], r1["index"]) == (0, 1)
    # TensorFlow and Keras 2 were imported once, in the process the workers fork from
    assert r0["preloaded"] == r1["preloaded"] == ["tensorflow", "tf_keras"]
    assert r0["keras_module"].startswith("tf_keras")  # imported for Keras 2, as the run wants
    # different data on each worker, same weights after the steps: gradients all-reduced
    assert r0["weights"] == r1["weights"]
    assert "loss" in result.metrics
    with open(os.path.join(result.path, "result.json")) as f:
        assert len(f.read().splitlines()) == 2  # one report per epoch
    # the callback's checkpoint holds the Keras model, loadable
    assert os.path.exists(os.path.join(result.checkpoint.path, "model.keras"))


@needs_keras2
def test_model_built_outside_the_strategy_scope_is_refused(tmp_path, storage):
    trainer = TensorflowTrainer(
        mwms_train, train_loop_config={"out": str(tmp_path), "in_scope": False},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="tf-bad", verbose=0))
    with pytest.raises(Exception, match="outside a tf.distribute strategy scope"):
        trainer.fit()
    assert not (tmp_path / "rank0.json").exists()


def read_tf_config():
    return json.loads(os.environ["TF_CONFIG"])


def test_legacy_trainer_backend_tensorflow_sets_tf_config_per_worker(tmp_path):
    from tandem.train import Trainer

    trainer = Trainer("tensorflow", num_workers=2, logdir=str(tmp_path))
    trainer.start()
    try:
        c0, c1 = trainer.run(read_tf_config)
    finally:
        trainer.shutdown()
    assert c0["cluster"] == c1["cluster"] and len(c0["cluster"]["worker"]) == 2
    assert (c0["task"], c1["task"]) == ({"type": "worker", "index": 0},
                                        {"type": "worker", "index": 1})
