"""Function trainables, as Ray's python/ray/tune/tests/test_function_api.py checks them
(public API only; written for this suite, not copied from Ray): a returned number becomes the
anonymous metric and a returned dict the final result, infinite and nested values are
reported as given, ``tune.with_parameters`` hands large objects to every trial (in two runs
in a row), and a checkpoint reported with the last result is the trial's checkpoint."""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from tests.ray_suite.swap import target, tune

DEFAULT_METRIC = target("tune.result").DEFAULT_METRIC


def _returns(config):
    if config["kind"] == "number":
        return config["a"]
    return {"m": config["a"] * 10}


def test_return_value_is_the_last_result():
    analysis = tune.run(_returns, config={"a": tune.grid_search([4, 8]),
                                          "kind": tune.grid_search(["number", "dict"])})
    assert len(analysis.trials) == 4
    for trial in analysis.trials:
        a = trial.config["a"]
        if trial.config["kind"] == "number":
            assert trial.last_result[DEFAULT_METRIC] == a
        else:
            assert trial.last_result["m"] == a * 10


def _reports_special_values(config):
    tune.report({"mean_accuracy": float("inf"), "nested": {"sub": 4, "deep": {"x": 1}}})


def test_infinite_and_nested_results():
    [trial] = tune.run(_reports_special_values).trials
    assert trial.last_result["mean_accuracy"] == float("inf")
    assert trial.last_result["nested"]["sub"] == 4
    assert trial.last_result["nested"]["deep"]["x"] == 1


def _uses_data(config, data=None):
    tune.report({"total": float(data.sum()), "size": int(data.size)})


def test_with_parameters_large_object_two_runs():
    data = np.arange(1_000_000, dtype=np.float64)  # 8 MB: travels by reference, not in config
    for _ in range(2):  # Ray checks that a second run with the same object works too
        [trial] = tune.run(tune.with_parameters(_uses_data, data=data)).trials
        assert trial.last_result["size"] == data.size
        assert trial.last_result["total"] == float(data.sum())
        assert "data" not in trial.config


def _checkpoints_each_step(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["step"] + 1
    for step in range(start, 3):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))


def test_reported_checkpoint_is_the_trials():
    [result] = tune.Tuner(_checkpoints_each_step).fit()
    assert result.error is None and result.metrics["step"] == 2
    with result.checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
        assert json.load(f) == {"step": 2}
