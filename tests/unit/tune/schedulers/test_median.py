from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.tune.schedulers import CONTINUE, Action, MedianStoppingRule, SuggestionAction
from tandem.tune.trial import Trial, TrialStatus


def _rule(**kw):
    sched = MedianStoppingRule(
        **{
            "time_attr": "t",
            "metric": "loss",
            "mode": "min",
            "grace_period": 1,
            "min_samples_required": 2,
            **kw,
        }
    )
    sched.set_search_properties(None, None)
    return sched


def _trial(sched, tid, status=TrialStatus.RUNNING):
    trial = Trial("fn", trial_id=tid, config={}, status=status)
    sched.on_trial_add(trial)
    return trial


def _run(sched, trial, values, metric="loss"):
    return [sched.on_trial_result(trial, {"t": t, metric: v}) for t, v in enumerate(values, 1)]


def test_stops_trial_worse_than_median_of_running_means():
    sched = _rule()
    a, b = _trial(sched, "a"), _trial(sched, "b")
    assert _run(sched, a, [1.0, 0.8, 0.6]) == [CONTINUE] * 3  # too few others: no waiting trials
    assert _run(sched, b, [1.2, 1.0, 0.8]) == [CONTINUE] * 3
    for trial, loss in ((a, 0.6), (b, 0.8)):
        trial.status = TrialStatus.TERMINATED
        sched.on_trial_complete(trial, {"t": 3, "loss": loss})
    # At t=1 the running means are a=1.0, b=1.2: median 1.1. c's best (2.0) is worse.
    c = _trial(sched, "c")
    d = sched.on_trial_result(c, {"t": 1, "loss": 2.0})
    assert d.action is Action.STOP and "median 1.1" in d.reason
    # d: best 0.9 < 1.1 at t=1; at t=2 means are a=0.9, b=1.1 -> median 1.0, best still 0.9.
    d_trial = _trial(sched, "d")
    assert _run(sched, d_trial, [0.9, 1.5]) == [CONTINUE, CONTINUE]
    # At t=3: means a=0.8, b=1.0 -> median 0.9; a best of 0.89 is better, 0.91 worse.
    assert sched.on_trial_result(d_trial, {"t": 3, "loss": 0.89}) is CONTINUE
    # e at t=1: stopped trials count too: a=1.0, b=1.2, c=2.0, d=0.9 -> median 1.1.
    e = _trial(sched, "e")
    assert sched.on_trial_result(e, {"t": 1, "loss": 1.05}) is CONTINUE
    f = _trial(sched, "f")  # now e=1.05 joins: median of 0.9, 1.0, 1.05, 1.2, 2.0 is 1.05
    assert sched.on_trial_result(f, {"t": 1, "loss": 1.06}).action is Action.STOP


def test_grace_period_and_max_mode():
    sched = _rule(metric="acc", mode="max", grace_period=5, min_samples_required=1)
    a, b = _trial(sched, "a"), _trial(sched, "b")
    assert _run(sched, a, [1.0] * 6, "acc") == [CONTINUE] * 6
    assert _run(sched, b, [0.1] * 4, "acc") == [CONTINUE] * 4  # within the grace period
    assert sched.on_trial_result(b, {"t": 5, "acc": 0.1}).action is Action.STOP


def test_soft_stop_pauses_once_then_continues():
    sched = _rule(min_samples_required=1, hard_stop=False)
    a, b = _trial(sched, "a"), _trial(sched, "b")
    _run(sched, a, [1.0, 1.0])
    assert sched.on_trial_result(b, {"t": 1, "loss": 5.0}).action is Action.PAUSE
    b.status = TrialStatus.PAUSED
    assert sched.suggest().trial_id == "b"  # nothing is PENDING: resume it
    b.status = TrialStatus.RUNNING
    assert sched.on_trial_result(b, {"t": 2, "loss": 5.0}) is CONTINUE  # falls back to FIFO


def test_insufficient_samples_yields_to_waiting_trials_and_resumes():
    sched = _rule(min_samples_required=2, min_time_slice=3)
    a = _trial(sched, "a")
    waiting = _trial(sched, "w", status=TrialStatus.PENDING)
    d = sched.on_trial_result(a, {"t": 1, "loss": 1.0})
    assert d.action is Action.PAUSE and "yielding" in d.reason
    a.status = TrialStatus.PAUSED
    assert sched.suggest() is None  # a trial is still PENDING
    waiting.status = TrialStatus.RUNNING
    s = sched.suggest()
    assert (s.action, s.trial_id) == (SuggestionAction.RESUME, "a")
    assert sched.suggest() is None
    a.status = TrialStatus.RUNNING
    other = _trial(sched, "x", status=TrialStatus.PENDING)
    # Within min_time_slice of the last pause: keep running even though x waits.
    assert sched.on_trial_result(a, {"t": 3, "loss": 1.0}) is CONTINUE
    assert sched.on_trial_result(a, {"t": 5, "loss": 1.0}).action is Action.PAUSE
    sched.on_trial_remove(other)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"grace_period": -1}, "grace_period=-1"),
        ({"min_samples_required": 0}, "min_samples_required=0"),
        ({"min_time_slice": -1}, "min_time_slice=-1"),
    ],
)
def test_bad_arguments(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        MedianStoppingRule(**kw)
