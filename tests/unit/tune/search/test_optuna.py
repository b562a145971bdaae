from __future__ import annotations

import logging

import numpy as np
import pytest

from tandem._core.errors import ConfigError
from tandem.tune import search as tune
from tandem.tune.search import BasicVariantGenerator, Searcher

optuna = pytest.importorskip("optuna")
from tandem.tune.search import OptunaSearch  # noqa: E402 - after importorskip

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {"x": tune.uniform(-1, 1), "y": tune.uniform(-1, 1)}


def _objective(config):
    return (config["x"] - 0.3) ** 2 + (config["y"] + 0.1) ** 2


def _best_of(searcher, n=40):
    searcher.set_search_properties("loss", "min", SPACE)
    searcher.set_num_samples(n)
    best = float("inf")
    for i in range(n):
        config = searcher.suggest(f"t{i}")
        loss = _objective(config)
        searcher.on_trial_result(f"t{i}", {"loss": loss, "training_iteration": 1})
        searcher.on_trial_complete(f"t{i}", {"loss": loss})
        best = min(best, loss)
    return best


def test_tpe_beats_random_search():
    tpe = np.mean([_best_of(OptunaSearch(seed=s)) for s in range(5)])
    rand = np.mean([_best_of(BasicVariantGenerator(random_state=s)) for s in range(5)])
    assert tpe < rand, (tpe, rand)


def test_domains_are_converted_and_constants_kept():
    searcher = OptunaSearch(metric="m", mode="max", seed=0)
    searcher.set_search_properties(
        None,
        None,
        {
            "opt": {"lr": tune.loguniform(1e-4, 1e-1), "name": tune.choice(["adam", "sgd"])},
            "layers": tune.randint(1, 4),
            "width": tune.qrandint(8, 64, 8),
            "drop": tune.quniform(0, 0.5, 0.1),
            "act": tune.choice([{"fn": "relu"}, {"fn": "gelu"}]),
            "bs": 32,
            "double": tune.sample_from(lambda spec: spec.config.layers * 2),
        },
    )
    assert searcher.set_num_samples(10) is False  # the controller counts
    for i in range(10):
        c = searcher.suggest(str(i))
        assert 1e-4 <= c["opt"]["lr"] <= 1e-1 and c["opt"]["name"] in ("adam", "sgd")
        assert c["layers"] in (1, 2, 3) and c["width"] % 8 == 0 and 8 <= c["width"] <= 64
        assert c["drop"] in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
        assert c["act"] in ({"fn": "relu"}, {"fn": "gelu"}) and c["bs"] == 32
        assert c["double"] == 2 * c["layers"]
        searcher.on_trial_complete(str(i), {"m": c["layers"]})
    assert len(searcher.study.trials) == 10


def test_space_argument_and_points_to_evaluate():
    searcher = OptunaSearch(
        space={"a": {"b": optuna.distributions.FloatDistribution(0, 1)}, "c": tune.choice([1, 2])},
        metric="m",
        mode="min",
        points_to_evaluate=[{"a": {"b": 0.25}, "c": 2}],
        seed=0,
    )
    searcher.set_search_properties(None, None, {"const": "k"})
    assert searcher.suggest("0") == {"const": "k", "a": {"b": 0.25}, "c": 2}


def test_define_by_run_space():
    def space(trial):
        trial.suggest_float("x", 0, 1)
        return {"fixed": 3}

    searcher = OptunaSearch(space=space, metric="m", mode="min", seed=0)
    searcher.set_search_properties(None, None, None)
    config = searcher.suggest("0")
    assert 0 <= config["x"] <= 1 and config["fixed"] == 3


def test_failed_trials_are_told_as_failed(caplog):
    searcher = OptunaSearch(metric="m", mode="min", seed=0)
    searcher.set_search_properties(None, None, SPACE)
    searcher.suggest("a"), searcher.suggest("b")
    searcher.on_trial_complete("a", error=True)
    with caplog.at_level(logging.WARNING):
        searcher.on_trial_complete("b", {"other": 1})
    assert "without reporting metric 'm'" in caplog.text
    states = [t.state for t in searcher.study.trials]
    assert states == [optuna.trial.TrialState.FAIL] * 2


def test_save_restore(tmp_path):
    searcher = OptunaSearch(metric="loss", mode="min", seed=0)
    searcher.set_search_properties(None, None, SPACE)
    for i in range(3):
        searcher.on_trial_complete(str(i), {"loss": _objective(searcher.suggest(str(i)))})
    searcher.save(tmp_path / "s.pkl")
    restored = OptunaSearch()
    restored.restore(tmp_path / "s.pkl")
    assert len(restored.study.trials) == 3 and restored.metric == "loss"
    assert set(restored.suggest("3")) == {"x", "y"}


def test_own_space_refuses_a_second_space():
    """Ray's contract: built with a space, the searcher answers False to a param_space with
    search-space objects (the Tuner then refuses it with Ray's message)."""
    searcher = OptunaSearch(metric="m", mode="min", space=SPACE)
    assert searcher.set_search_properties(None, None, SPACE) is False


@pytest.mark.parametrize(
    ("kwargs", "space", "needle"),
    [
        ({}, SPACE, "needs a metric and a mode"),
        ({"metric": "m", "mode": "min"}, {"a": tune.grid_search([1, 2])}, "grid_search"),
        ({"metric": "m", "mode": "min"}, {"a": tune.randn()}, "Optuna cannot sample"),
        ({"metric": "m", "mode": "min"}, {"a": 1}, "nothing to search"),
        (
            {"metric": "m", "mode": "min", "points_to_evaluate": [{"z": 1}]},
            SPACE,
            "['z'] are not searched",
        ),
    ],
)
def test_bad_setups(kwargs, space, needle):
    with pytest.raises(ConfigError) as info:
        OptunaSearch(**kwargs).set_search_properties(None, None, space)
    assert needle in str(info.value)


def test_conflicting_metric_is_an_error():
    with pytest.raises(ConfigError, match="metric='a' but TuneConfig has metric='b'"):
        OptunaSearch(metric="a", mode="min").set_search_properties("b", "min", SPACE)
    with pytest.raises(ConfigError, match="mode='avg'"):
        OptunaSearch(metric="a", mode="avg")
    with pytest.raises(ConfigError, match="optuna sampler"):
        OptunaSearch(sampler="tpe")


def test_finished_constant_is_ray_compatible():
    assert Searcher.FINISHED == "FINISHED"
