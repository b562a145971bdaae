"""Searchers, checked as Ray's python/ray/tune/tests/test_searchers.py checks them (public
behaviour only; written for this suite, not copied from Ray; see README.md here):

* a run whose trials report NaN, +inf and -inf still finds a best trial with a finite score,
  and the constants of the space (a list, a number) reach the trial configs unchanged;
* a searcher saved mid-run (trials completed, one still open) and restored into a fresh
  instance, without ``set_search_properties`` again, goes on suggesting and completing;
* multi-objective Optuna (``metric=[...]``, ``mode=[...]``) steers each objective.

Each run goes through ``tune.run`` (Ray's entry point in that file) with the import swap of
``tests/ray_suite/swap.py``; the same tests run on Ray 2.60 with ``RAY_SUITE_TARGET=ray``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.ray_suite.swap import target, tune

_SPACE_INVALID = {"report": tune.uniform(0.0, 5.0), "list": [1, 2, 3], "num": 4}
_METRIC = "_metric"  # Ray's anonymous metric name, which the objective reports


def _library(name: str) -> Any:
    return target(f"tune.search.{name}")


def _score_for(x: float) -> float:
    """The objective of the invalid-values runs: x itself up to 2 (0.1 for x == 0), then NaN,
    -inf and +inf on the bands (2, 3], (3, 4] and (4, 5]; so the best finite score is <= 2."""
    bands = [(4.0, math.inf), (3.0, -math.inf), (2.0, math.nan)]
    for threshold, value in bands:
        if x > threshold:
            return value
    return float(x) or 0.1


def _reports_invalid_values(config: dict) -> None:
    tune.report({_METRIC: _score_for(config["report"])})


def _check_best(analysis: Any) -> None:
    best = analysis.best_trial.config
    assert best["report"] <= 2.0, best
    assert best["list"] in ([1, 2, 3], (1, 2, 3))  # HyperOpt hands lists back as tuples
    assert best["num"] == 4


def _bayesopt() -> Any:
    return _library("bayesopt").BayesOptSearch(random_state=1234)


def _bohb() -> Any:
    return _library("bohb").TuneBOHB(seed=1000)


def _hyperopt() -> Any:
    return _library("hyperopt").HyperOptSearch(random_state_seed=1234)


def _optuna() -> Any:
    from optuna.samplers import RandomSampler

    np.random.seed(1000)
    return _library("optuna").OptunaSearch(sampler=RandomSampler(seed=1234))


@pytest.mark.parametrize("make", [
    pytest.param(_bayesopt, id="bayesopt", marks=pytest.mark.slow),
    pytest.param(_bohb, id="bohb"),
    pytest.param(_hyperopt, id="hyperopt"),
    pytest.param(_optuna, id="optuna"),
])
def test_invalid_values_do_not_win(make):
    analysis = tune.run(_reports_invalid_values, search_alg=make(), config=_SPACE_INVALID,
                        metric=_METRIC, mode="max", num_samples=8, reuse_actors=False)
    _check_best(analysis)


@pytest.mark.slow
def test_invalid_values_do_not_win_nevergrad_anonymous_metric():
    """Ray's Nevergrad run names only mode="max": the anonymous metric is the one reported."""
    import nevergrad as ng

    np.random.seed(2020)
    searcher = _library("nevergrad").NevergradSearch(optimizer=ng.optimizers.RandomSearch)
    analysis = tune.run(_reports_invalid_values, search_alg=searcher, config=_SPACE_INVALID,
                        mode="max", num_samples=16, reuse_actors=False)
    _check_best(analysis)


def test_nevergrad_optimizer_kwargs_are_passed():
    import nevergrad as ng

    # CM needs a budget; without optimizer_kwargs it could not be built
    _library("nevergrad").NevergradSearch(optimizer=ng.optimizers.CM,
                                          optimizer_kwargs={"budget": 16})


def test_optuna_results_after_completion_are_ignored():
    from optuna.samplers import RandomSampler

    OptunaSearch = _library("optuna").OptunaSearch
    searcher = OptunaSearch(sampler=RandomSampler(seed=1234),
                            space=OptunaSearch.convert_search_space(_SPACE_INVALID),
                            metric="metric", mode="max")
    searcher.suggest("t")
    searcher.on_trial_result("t", {"training_iteration": 1, "metric": 1})
    searcher.on_trial_complete("t", {"training_iteration": 2, "metric": 1})
    # a straggling result or a second completion of the same trial raises nothing
    searcher.on_trial_result("t", {"training_iteration": 3, "metric": 1})
    searcher.on_trial_complete("t", {"training_iteration": 4, "metric": 1})


# -------------------------------------------------------------------- save and restore

_SPACE_SAVE = {"a": tune.uniform(0.0, 5.0)}


def _finish(searcher: Any, trial_id: str) -> None:
    result = {"training_iteration": 1, "metric": 1, "config/a": 1.0, "time_total_s": 1}
    searcher.on_trial_result(trial_id, result)
    searcher.on_trial_complete(trial_id, result)


def _save_restore(first: Any, fresh: Any, path: str) -> Any:
    """Three suggestions, one completed, then ``save``; the fresh searcher restores the file
    (no ``set_search_properties``) and completes another, then suggests and completes a
    third. A trial left open before the save stays known where the searcher keeps a
    live-trial map."""
    first.set_search_properties(metric="metric", mode="max", config=_SPACE_SAVE)
    for trial_id in ("1", "2", "open"):
        first.suggest(trial_id)
    _finish(first, "1")
    first.save(path)

    fresh.restore(path)
    _finish(fresh, "2")
    fresh.suggest("3")
    _finish(fresh, "3")
    if hasattr(fresh, "_live_trial_mapping"):
        assert "open" in fresh._live_trial_mapping
    return fresh


def _nevergrad_pair() -> tuple[Any, Any]:
    import nevergrad as ng

    cls = _library("nevergrad").NevergradSearch
    return (cls(space=_SPACE_SAVE, metric="metric", mode="max",
                optimizer=ng.optimizers.RandomSearch),
            cls(optimizer=ng.optimizers.RandomSearch))  # optimizer: its one required argument


def _zoopt_pair() -> tuple[Any, Any]:
    cls = _library("zoopt").ZOOptSearch
    # budget is required; the restore replaces the 0 with the saved 100
    return (cls(space=_SPACE_SAVE, metric="metric", mode="max", budget=100, parallel_num=4),
            cls(budget=0))


def _simple_pair(module: str, cls_name: str) -> Callable[[], tuple[Any, Any]]:
    def pair() -> tuple[Any, Any]:
        cls = getattr(_library(module), cls_name)
        return cls(space=_SPACE_SAVE, metric="metric", mode="max"), cls()
    return pair


_SAVE_RESTORE: dict[str, Callable[[], tuple[Any, Any]]] = {
    "bayesopt": _simple_pair("bayesopt", "BayesOptSearch"),
    "bohb": _simple_pair("bohb", "TuneBOHB"),
    "hyperopt": _simple_pair("hyperopt", "HyperOptSearch"),
    "nevergrad": _nevergrad_pair,
    "optuna": _simple_pair("optuna", "OptunaSearch"),
    "zoopt": _zoopt_pair,
}


@pytest.mark.parametrize("name", sorted(_SAVE_RESTORE))
def test_searcher_save_restore(name, tmp_path):
    first, fresh = _SAVE_RESTORE[name]()
    restored = _save_restore(first, fresh, str(tmp_path / "searcher.pkl"))
    if name == "bohb":
        assert "open" in restored.trial_to_params
    if name == "optuna":
        assert "open" in restored._ot_trials
    if name == "zoopt":
        assert restored._budget == 100


@pytest.mark.slow
def test_searcher_save_restore_ax(tmp_path):
    from ax.service.ax_client import AxClient

    AxSearch = _library("ax").AxSearch
    parameters = AxSearch.convert_search_space(_SPACE_SAVE)

    def searcher() -> Any:
        client = AxClient()
        client.create_experiment(parameters=parameters, objective_name="metric",
                                 minimize=False)
        return AxSearch(ax_client=client)

    _save_restore(searcher(), searcher(), str(tmp_path / "searcher.pkl"))


# ------------------------------------------------------------------ multi-objective


def _three_objectives(config: dict) -> None:
    tune.report({"a": 100 * config["a"], "b": -100 * config["b"], "c": config["c"]})


def test_optuna_multi_objective():
    from optuna.samplers import RandomSampler

    np.random.seed(1000)
    searcher = _library("optuna").OptunaSearch(
        sampler=RandomSampler(seed=1234), metric=["a", "b", "c"], mode=["max", "min", "max"])
    space = {k: tune.uniform(0, 1) for k in "abc"}
    analysis = tune.run(_three_objectives, search_alg=searcher, config=space, num_samples=16,
                        reuse_actors=False)
    # b is reported negated, so minimizing it means a large config value as well
    for key, mode in (("a", "max"), ("b", "min"), ("c", "max")):
        assert analysis.get_best_trial(key, mode).config[key] >= 0.8
