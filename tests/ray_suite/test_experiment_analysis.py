"""``ExperimentAnalysis``, as Ray's python/ray/tune/tests/test_experiment_analysis.py checks it
(public API only; written for this suite, not copied from Ray): from ``tune.run`` and from
the experiment folder, best trial/config/result by metric and mode, dataframes (one row per
trial, one per reported result), and a trial's best and last checkpoints."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

from tests.ray_suite.swap import tune


def _three_steps(config):
    for step in range(3):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            # the score peaks at step 1, so the best and the last checkpoint differ
            score = config["x"] * (1 if step == 1 else 0.5)
            tune.report({"score": score, "step": step},
                         checkpoint=tune.Checkpoint.from_directory(d))


def _step_of(checkpoint):
    with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
        return json.load(f)["step"]


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return tune.run(_three_steps, config={"x": tune.grid_search([1.0, 3.0, 2.0])},
                    metric="score", mode="max", name="ea",
                    storage_path=str(tmp_path_factory.mktemp("ea")))


def test_best_by_default_and_given_metric(analysis):
    assert analysis.best_config["x"] == 3.0
    assert analysis.best_result["score"] == 1.5  # the last result of the best trial
    assert analysis.get_best_config(metric="score", mode="min")["x"] == 1.0
    assert analysis.get_best_trial("score", "max", scope="all").config["x"] == 3.0
    assert analysis.get_best_trial("score", "min", scope="last").config["x"] == 1.0
    assert os.path.isdir(analysis.best_trial.path)
    assert sorted(c["x"] for c in analysis.get_all_configs().values()) == [1.0, 2.0, 3.0]


def test_dataframes(analysis):
    df = analysis.dataframe()
    assert len(df) == 3 and "config/x" in df.columns and "score" in df.columns
    best = analysis.dataframe(metric="score", mode="max")
    assert sorted(best["score"]) == [1.0, 2.0, 3.0]  # each trial's best row
    frames = analysis.trial_dataframes
    assert len(frames) == 3 and all(len(f) == 3 for f in frames.values())
    assert len(analysis.results_df) == 3


def test_best_and_last_checkpoint(analysis):
    trial = analysis.best_trial
    assert _step_of(analysis.get_best_checkpoint(trial, "score", "max")) == 1
    assert _step_of(analysis.get_last_checkpoint(trial)) == 2
    assert _step_of(analysis.best_checkpoint) == 1


def test_from_experiment_folder(analysis):
    loaded = tune.ExperimentAnalysis(analysis.experiment_path, default_metric="score",
                                     default_mode="max")
    assert len(loaded.trials) == 3
    assert loaded.best_config["x"] == 3.0
    assert _step_of(loaded.get_best_checkpoint(loaded.best_trial)) == 1
