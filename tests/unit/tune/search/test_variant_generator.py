from __future__ import annotations

import math
from collections import Counter

import pytest

from tandem._core.errors import ConfigError
from tandem.tune import search as tune
from tandem.tune.search.variant_generator import (
    count_variants,
    flatten_dict,
    format_vars,
    iter_variants,
    unflatten_dict,
    validate_param_space,
)


def _configs(space, num_samples=1, seed=0, **kw):
    return [v.config for v in iter_variants(space, num_samples, seed=seed, **kw)]


def test_grid_times_num_samples():
    space = {
        "a": tune.grid_search([1, 2, 3]),
        "b": tune.grid_search(["x", "y"]),
        "c": tune.uniform(0, 1),
    }
    assert count_variants(space) == 6
    configs = _configs(space, num_samples=4)
    assert len(configs) == 24
    assert Counter((c["a"], c["b"]) for c in configs) == {
        (a, b): 4 for a in (1, 2, 3) for b in "xy"
    }
    assert len({c["c"] for c in configs}) == 24  # random values are sampled per variant


def test_first_grid_varies_fastest_and_num_samples_repeats_whole_grid():
    space = {"a": tune.grid_search([1, 2]), "b": tune.grid_search([3, 4])}
    assert [(c["a"], c["b"]) for c in _configs(space, 2)] == [(1, 3), (2, 3), (1, 4), (2, 4)] * 2


def test_nested_dicts_lists_and_constants():
    obj = object()
    space = {
        "model": {"layers": [tune.choice([32, 64]), 16], "act": "relu"},
        "opt": {"lr": tune.loguniform(1e-4, 1e-1), "betas": (0.9, 0.99)},
        "obj": obj,
        "fn": len,
        "none": None,
    }
    (config,) = _configs(space)
    assert config["model"]["layers"][0] in (32, 64) and config["model"]["layers"][1] == 16
    assert config["model"]["act"] == "relu" and config["opt"]["betas"] == (0.9, 0.99)
    assert config["obj"] is obj and config["fn"] is len and config["none"] is None
    assert space["model"]["layers"][0] != config["model"]["layers"][0]  # space untouched


def test_sample_from_sees_resolved_config():
    space = {
        "a": tune.grid_search([1, 2]),
        "n": {"b": tune.uniform(0, 1)},
        "c": tune.sample_from(lambda spec: spec.config.a * 10 + spec.config.n.b),
        "d": tune.sample_from(lambda spec: spec["config"]["c"] + 1),  # depends on another
        "e": tune.sample_from(lambda: "static"),
    }
    for config in _configs(space, 3):
        assert config["c"] == config["a"] * 10 + config["n"]["b"]
        assert config["d"] == config["c"] + 1
        assert config["e"] == "static"


def test_sample_from_cycle_and_failure_are_reported():
    with pytest.raises(ConfigError, match="cycle"):
        _configs(
            {
                "a": tune.sample_from(lambda s: s.config.b),
                "b": tune.sample_from(lambda s: s.config.a),
            }
        )
    with pytest.raises(ConfigError, match=r"'x'.*ZeroDivisionError"):
        _configs({"x": tune.sample_from(lambda s: 1 / 0)})
    with pytest.raises(ConfigError, match="has no key 'nope'"):
        _configs({"x": tune.sample_from(lambda s: s.config.nope)})


def test_seed_reproduces_and_differs():
    space = {"a": tune.uniform(0, 1), "b": tune.grid_search([1, 2]), "c": tune.choice(list("xyz"))}
    assert _configs(space, 5, seed=1) == _configs(space, 5, seed=1)
    assert _configs(space, 5, seed=1) != _configs(space, 5, seed=2)


def test_grid_values_may_hold_domains_and_grids():
    space = {
        "opt": tune.grid_search(
            [
                {"name": "sgd", "lr": tune.uniform(0, 1)},
                {"name": "adam", "beta": tune.grid_search([0.9, 0.99])},
            ]
        )
    }
    assert count_variants(space) == 3
    configs = _configs(space)
    assert [c["opt"]["name"] for c in configs] == ["sgd", "adam", "adam"]
    assert 0 <= configs[0]["opt"]["lr"] < 1
    assert [c["opt"].get("beta") for c in configs[1:]] == [0.9, 0.99]


def test_points_to_evaluate_replace_passes():
    space = {"a": tune.uniform(0, 1), "b": tune.grid_search([1, 2])}
    configs = _configs(space, 3, points_to_evaluate=[{"a": 0.5}])
    assert len(configs) == 6
    assert [c["a"] for c in configs[:2]] == [0.5, 0.5] and [c["b"] for c in configs[:2]] == [1, 2]
    with pytest.raises(ConfigError, match=r"'c' is not in the param space.*\['a', 'b'\]"):
        _configs(space, points_to_evaluate=[{"c": 1}])


def test_infinite_num_samples_is_lazy():
    it = iter_variants({"a": tune.uniform(0, 1)}, -1, seed=0)
    assert len([next(it) for _ in range(1000)]) == 1000


@pytest.mark.parametrize(
    ("space", "needles"),
    [
        (
            {"train_loop_config": {"lr": tune.uniform}},
            ["train_loop_config/lr", "tune.uniform itself", "Call it"],
        ),
        ({"lr": tune.Float}, ["'lr'", "class Float"]),
        ({"opts": {1, 2}}, ["'opts'", "set", "tune.choice"]),
        ({"a": (1, tune.uniform(0, 1))}, ["'a/1'", "tuple", "list"]),
        ({"a": {"grid_search": 3}}, ["'a'", "non-empty list"]),
        ([1, 2], ["must be a dict", "list"]),
    ],
)
def test_mistaken_objects_name_the_key(space, needles):
    with pytest.raises(ConfigError) as info:
        validate_param_space(space)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_optuna_distribution_in_param_space_is_rejected():
    optuna = pytest.importorskip("optuna")
    space = {"train_loop_config": {"lr": optuna.distributions.FloatDistribution(0, 1)}}
    with pytest.raises(
        ConfigError, match=r"train_loop_config/lr.*Optuna distribution.*OptunaSearch"
    ):
        _configs(space)


def test_flatten_and_format():
    config = {"a": {"b": 1, "c": {"d": 2}}, "e": [1, 2], "f": {}}
    flat = flatten_dict(config)
    assert flat == {"a/b": 1, "a/c/d": 2, "e": [1, 2], "f": {}}
    assert flatten_dict({"lr": 1}, prefix="config/") == {"config/lr": 1}
    assert unflatten_dict({"a/b": 1, "a/c/d": 2}) == {"a": {"b": 1, "c": {"d": 2}}}
    assert (
        format_vars({"opt/lr": 0.00123456, "bs": 32, "m": object()}) == "lr=0.001235,bs=32,m=object"
    )
    assert math.isclose(float(format_vars({"x": 1 / 3}).split("=")[1]), 0.3333)
