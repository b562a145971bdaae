from __future__ import annotations

import dataclasses

import pytest

from tandem._core.errors import ConfigError
from tandem.tune.schedulers import (
    CONTINUE,
    Action,
    ASHAScheduler,
    Decision,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    SuggestionAction,
    TrialSuggestion,
)
from tandem.tune.trial import Trial

ALL = [
    lambda **kw: ASHAScheduler(**kw),
    lambda **kw: HyperBandScheduler(**kw),
    lambda **kw: MedianStoppingRule(**kw),
    lambda **kw: PopulationBasedTraining(hyperparam_mutations={"lr": [1, 2]}, **kw),
]


def test_decision_factories():
    assert Decision.continue_() is CONTINUE is Decision.continue_()
    assert Decision.stop("bad").action is Action.STOP and Decision.stop("bad").reason == "bad"
    assert Decision.pause("wait").action is Action.PAUSE
    d = Decision.restart({"lr": 1}, "ckpt", "exploit")
    assert (d.action, d.config, d.checkpoint) == (Action.RESTART, {"lr": 1}, "ckpt")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.reason = "x"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="RESTART"):
        Decision(Action.RESTART)
    with pytest.raises(ConfigError, match="only RESTART"):
        Decision(Action.STOP, "x", config={"a": 1})


def test_trial_suggestion():
    s = TrialSuggestion.resume("t1", "why")
    assert (s.action, s.trial_id, s.reason) == (SuggestionAction.RESUME, "t1", "why")
    assert TrialSuggestion.stop("t2", "done").action is SuggestionAction.STOP


def test_fifo_needs_no_metric():
    fifo = FIFOScheduler()
    assert fifo.set_search_properties(None, None) is True
    assert fifo.on_trial_result(Trial("fn", trial_id="a", config={}), {"x": 1}) is CONTINUE
    assert fifo.suggest() is None


@pytest.mark.parametrize("make", ALL)
def test_bad_mode_is_rejected(make):
    with pytest.raises(ConfigError, match="mode='maximize'.*'min' or 'max'"):
        make(metric="m", mode="maximize")


@pytest.mark.parametrize("make", ALL)
def test_missing_metric_is_an_error_at_setup(make):
    with pytest.raises(ConfigError, match="needs a metric and a mode.*TuneConfig"):
        make().set_search_properties(None, None)
    with pytest.raises(ConfigError, match="needs a metric and a mode"):
        make(mode="max").set_search_properties(None, None)


@pytest.mark.parametrize("make", ALL)
def test_metric_mode_from_tune_config_and_conflicts(make):
    sched = make()
    assert sched.set_search_properties("acc", "max") is True
    assert (sched.metric, sched.mode) == ("acc", "max")
    own = make(metric="acc", mode="max")
    assert own.set_search_properties("acc", None) is True  # same value in both places is fine
    with pytest.raises(ConfigError, match="metric='acc' but TuneConfig has metric='loss'"):
        make(metric="acc", mode="max").set_search_properties("loss", None)
    with pytest.raises(ConfigError, match="mode='max' but TuneConfig has mode='min'"):
        make(metric="acc", mode="max").set_search_properties(None, "min")
    with pytest.raises(ConfigError, match="mode='up'"):
        make().set_search_properties("acc", "up")
