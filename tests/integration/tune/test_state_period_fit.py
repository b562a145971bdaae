"""``TUNE_GLOBAL_CHECKPOINT_S`` (Ray's period between writes of the experiment state) set
long: the state is still written when the experiment ends, complete, and restores."""

from __future__ import annotations

import json
import os

import pytest

import tandem
from tandem import tune
from tandem.train import RunConfig

pytestmark = pytest.mark.timeout(180)


def score(config):
    tune.report({"score": config["x"]})


def test_a_long_period_still_leaves_a_complete_state_that_restores(storage, monkeypatch):
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "3600")
    tandem.init(num_cpus=2)
    rg = tune.Tuner(score, param_space={"x": tune.grid_search([1, 2, 3])},
                    run_config=RunConfig(storage_path=storage, name="exp", verbose=0)).fit()
    assert rg.num_errors == 0
    exp = os.path.join(storage, "exp")
    with open(os.path.join(exp, "experiment_state.json")) as f:
        trials = json.load(f)["trials"]
    assert sorted(t["status"] for t in trials) == ["TERMINATED"] * 3
    assert sorted(t["last_result"]["score"] for t in trials) == [1, 2, 3]
    again = tune.Tuner.restore(exp, trainable=score).fit()  # nothing left to run
    assert sorted(r.metrics["score"] for r in again) == [1, 2, 3]
