"""Ray's ray.tune.integration.keras on a real Keras model in a tune trial."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import tune

pytest.importorskip("tensorflow")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _train(config):
    import numpy as np
    import tensorflow as tf

    from tandem.tune.integration.keras import TuneReportCheckpointCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32")
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(config["lr"]), loss="mse")
    model.fit(x, y, epochs=3, batch_size=16, verbose=0,
              callbacks=[TuneReportCheckpointCallback(metrics={"mse": "loss"},
                                                      checkpoint_on="train_end")])


def test_keras_callback_reports_and_checkpoints_a_trial(storage):
    from tandem.tune.integration.keras import TuneReportCallback

    with pytest.raises(DeprecationWarning, match="ReportCheckpointCallback"):
        TuneReportCallback()
    tandem.init(num_cpus=1)
    grid = tune.Tuner(
        _train, param_space={"lr": 0.05},
        tune_config=tune.TuneConfig(metric="mse", mode="min"),
        run_config=tune.RunConfig(name="keras", storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    result = grid[0]
    # three epoch-end reports, then the train-end report with the model's checkpoint
    assert result.metrics["training_iteration"] == 4
    assert set(result.metrics) >= {"mse"} and "loss" not in result.metrics
    with result.checkpoint.as_directory() as d:
        assert os.path.exists(os.path.join(d, "model.keras"))
