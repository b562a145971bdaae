"""Trial schedulers through their public API, as the public parts of Ray's
python/ray/tune/tests/test_trial_scheduler.py check them: construction and validation,
and each scheduler deciding over real trials of a Tuner (the parts of Ray's file that build
``Trial`` objects and a mock runner by hand are Ray internals and are left out)."""

from __future__ import annotations

import pytest

from tests.ray_suite.swap import target, tune

schedulers = target("tune.schedulers")

#: What a scheduler's constructor raises for a bad argument: Ray uses ``assert`` for most
#: (AssertionError), ``TuneError`` for a PBT without mutations and ValueError/TypeError for
#: the rest; tandem raises ``ConfigError`` (a ValueError) or TypeError. The check here is
#: that the bad value is refused when the scheduler is built, before any trial runs.
REFUSED = (ValueError, TypeError, AssertionError, tune.TuneError)


def _curve(config):
    # better configs learn faster; 12 steps
    for i in range(1, 13):
        tune.report({"score": config["rate"] * i, "loss": 1.0 / (config["rate"] * i)})


def _space():
    # the best first: a scheduler has something to compare the later, worse trials with
    return {"rate": tune.grid_search([4.0, 2.0, 1.0, 0.5, 0.2, 0.1])}


def _iterations(results):
    return sorted((r.config["rate"], r.metrics["training_iteration"]) for r in results)


@pytest.mark.parametrize("mode", [None, "max", "min"])
def test_scheduler_metric_mode_validation(mode):
    if mode is None:
        sched = schedulers.ASHAScheduler()
        sched.set_search_properties("score", "max")
    else:
        sched = schedulers.ASHAScheduler(metric="score", mode=mode)
    with pytest.raises(REFUSED):
        schedulers.ASHAScheduler(metric="score", mode="maximum")
    with pytest.raises(REFUSED):
        schedulers.HyperBandScheduler(metric="score", mode="best")
    with pytest.raises(REFUSED):
        schedulers.MedianStoppingRule(metric="score", mode="upper")


def test_asha_validation():
    with pytest.raises(REFUSED):
        schedulers.ASHAScheduler(grace_period=0)
    with pytest.raises(REFUSED):
        schedulers.ASHAScheduler(reduction_factor=1)
    with pytest.raises(REFUSED):
        schedulers.ASHAScheduler(max_t=1, grace_period=2)


def test_asha_stops_the_worse_trials():
    sched = schedulers.ASHAScheduler(metric="score", mode="max", grace_period=1, max_t=12,
                                     reduction_factor=2)
    results = tune.Tuner(_curve, param_space=_space(),
                         tune_config=tune.TuneConfig(scheduler=sched)).fit()
    its = dict(_iterations(results))
    assert its[4.0] == 12  # the best goes to the end
    assert sum(1 for rate in (1.0, 0.5, 0.2, 0.1) if its[rate] < 12) >= 3
    best = results.get_best_result(metric="score", mode="max")
    assert best.config["rate"] == 4.0


@pytest.mark.slow
def test_asha_min_mode_same_decisions():
    sched = schedulers.ASHAScheduler(metric="loss", mode="min", grace_period=1, max_t=12,
                                     reduction_factor=2)
    results = tune.Tuner(_curve, param_space=_space(),
                         tune_config=tune.TuneConfig(scheduler=sched)).fit()
    assert dict(_iterations(results))[4.0] == 12


@pytest.mark.slow
def test_hyperband_stops_the_worse_trials():
    sched = schedulers.HyperBandScheduler(metric="score", mode="max", max_t=12,
                                          reduction_factor=2)
    results = tune.Tuner(_curve, param_space=_space(),
                         tune_config=tune.TuneConfig(scheduler=sched)).fit()
    its = dict(_iterations(results))
    assert max(its.values()) <= 12
    assert its[4.0] >= max(its[0.1], its[0.2])
    assert results.num_errors == 0


@pytest.mark.slow
def test_median_stopping_rule():
    sched = schedulers.MedianStoppingRule(metric="score", mode="max", grace_period=2,
                                          min_samples_required=3, time_attr="training_iteration")
    results = tune.Tuner(_curve, param_space=_space(),
                         tune_config=tune.TuneConfig(scheduler=sched,
                                                     max_concurrent_trials=6)).fit()
    its = dict(_iterations(results))
    assert its[4.0] == 12
    assert any(v < 12 for v in its.values())


def test_fifo_runs_everything():
    results = tune.Tuner(_curve, param_space=_space(), tune_config=tune.TuneConfig(
        scheduler=schedulers.FIFOScheduler())).fit()
    assert all(v == 12 for _, v in _iterations(results))


def test_pbt_validation():
    with pytest.raises(REFUSED):
        schedulers.PopulationBasedTraining(metric="score", mode="max",
                                           hyperparam_mutations={})
    with pytest.raises(REFUSED):
        schedulers.PopulationBasedTraining(metric="score", mode="max",
                                           hyperparam_mutations={"lr": 3})
    with pytest.raises(REFUSED):
        schedulers.PopulationBasedTraining(metric="score", mode="maximum",
                                           hyperparam_mutations={"lr": [1, 2]})
    with pytest.raises(REFUSED):
        schedulers.PopulationBasedTraining(metric="score", mode="max", quantile_fraction=0.7,
                                           hyperparam_mutations={"lr": [1, 2]})
