from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.tune.schedulers import CONTINUE, Action, HyperBandScheduler, SuggestionAction
from tandem.tune.trial import Trial, TrialStatus


def _hb(**kw):
    sched = HyperBandScheduler(**{"metric": "acc", "mode": "max", **kw})
    sched.set_search_properties(None, None)
    return sched


def _add(sched, n, prefix="t"):
    trials = [Trial("fn", trial_id=f"{prefix}{i}", config={}, status=TrialStatus.RUNNING) for i in range(n)]
    for t in trials:
        sched.on_trial_add(t)
    return trials


def _drain(sched):
    out = []
    while (s := sched.suggest()) is not None:
        out.append((s.action, s.trial_id))
    return out


def test_brackets_as_ray_computes_them():
    sched = _hb(max_t=81, reduction_factor=3)
    # s_max_1 = round(log(81) / log(3)) + 1 = 5; n0 = ceil(5 / (s + 1) * 3**s); r0 = int(81 * 3**-s)
    assert [sched.bracket_size(s) for s in range(5)] == [5, 8, 15, 34, 81]
    assert [sched.bracket_start(s) for s in range(5)] == [81, 27, 9, 3, 1]
    _add(sched, 5 + 8 + 15 + 34 + 81)
    (band,) = sched.bands
    assert [b.n0 for b in band] == [5, 8, 15, 34, 81]
    # Ray 2.60's milestones: r <- int(min(r * eta, max_t)), so the last is max_t (its
    # hyperband_example.py runs the survivors of bracket (6, 9) on to 27 = max_t)
    assert [b.milestones for b in band] == [
        [81],
        [27, 81],
        [9, 27, 81],
        [3, 9, 27, 81],
        [1, 3, 9, 27, 81],
    ]
    _add(sched, 1, prefix="extra")
    assert len(sched.bands) == 2 and sched.bands[1][0].n0 == 5


def test_trials_fill_brackets_in_order():
    sched = _hb(max_t=9, reduction_factor=3)  # s_max_1 = 3: sizes 3, 5, 9; starts 9, 3, 1
    _add(sched, 3 + 5 + 2)
    assert [len(b.live) for b in sched.bands[0]] == [3, 5, 2]
    assert [b.milestones for b in sched.bands[0]] == [[9], [3, 9], [1, 3, 9]]


def test_a_trial_created_after_others_finished_joins_the_next_bracket():
    """Ray's hyperband_example.py (9 trials, max_t=27): Ray creates its trials up front, so
    the first bracket (4 trials, straight to 27) takes trials 0-3 and the next (6 slots,
    milestone 9) the rest. tandem creates trials as slots free up: a trial of bracket 0
    that finished made room there again, every trial ran to 27 and none was halved."""
    sched = _hb(max_t=27)
    first = _add(sched, 4)
    for t in first[:2]:
        t.status = TrialStatus.TERMINATED
        sched.on_trial_complete(t, {"training_iteration": 27, "acc": 1.0})
    late = _add(sched, 5, prefix="late")
    (band,) = sched.bands
    assert [(b.n0, b.r0) for b in band] == [(4, 27), (6, 9)]
    assert sorted(band[1].live) == [t.trial_id for t in late]
    assert sched.on_trial_result(late[0], {"training_iteration": 9, "acc": 1.0}).action \
        is Action.PAUSE


def test_pause_at_milestone_then_resume_top_and_stop_rest():
    sched = _hb(max_t=9, reduction_factor=3)
    _add(sched, 3, prefix="first")  # bracket s=0 (milestone 9)
    b = _add(sched, 5, prefix="b")  # bracket s=1: milestones 3, 9; keeps ceil(5 / 3) = 2
    score = {f"b{i}": float(i) for i in range(5)}

    def report(trial, it):
        return sched.on_trial_result(
            trial, {"training_iteration": it, "acc": score[trial.trial_id]}
        )

    for t in b:
        assert report(t, 1) is CONTINUE and report(t, 2) is CONTINUE
    for t in b[:4]:
        d = report(t, 3)
        assert d.action is Action.PAUSE and "milestone training_iteration=3" in d.reason
        t.status = TrialStatus.PAUSED  # the controller acts
    assert sched.suggest() is None
    # The last trial completes the rung: b3 and b4 are the top 2.
    assert report(b[4], 3) is CONTINUE
    assert _drain(sched) == [
        (SuggestionAction.STOP, "b0"),
        (SuggestionAction.STOP, "b1"),
        (SuggestionAction.STOP, "b2"),
        (SuggestionAction.RESUME, "b3"),
    ]
    for t in b[:3]:  # the controller stops them and tells the scheduler
        t.status = TrialStatus.TERMINATED
        sched.on_trial_remove(t)
    b[3].status = TrialStatus.RUNNING
    assert _drain(sched) == []
    # Second milestone (9 = max_t): b4 gets there first and waits; b3 finishes the bracket.
    assert all(report(b[4], i) is CONTINUE for i in range(4, 9))
    assert report(b[4], 9).action is Action.PAUSE
    b[4].status = TrialStatus.PAUSED
    assert all(report(b[3], i) is CONTINUE for i in range(4, 9))
    d = report(b[3], 9)
    assert d.action is Action.STOP and "bracket finished" in d.reason
    assert _drain(sched) == [(SuggestionAction.STOP, "b4")]


def test_running_bad_trial_is_stopped_by_decision_and_min_mode():
    sched = _hb(metric="loss", mode="min", max_t=9, reduction_factor=3)
    _add(sched, 3, prefix="first")
    b = _add(sched, 5, prefix="b")
    # Lower loss is better: b4 reports last with the worst loss, so it is stopped directly.
    for i, t in enumerate(b[:4]):
        assert (
            sched.on_trial_result(t, {"training_iteration": 3, "loss": float(i)}).action
            is Action.PAUSE
        )
    d = sched.on_trial_result(b[4], {"training_iteration": 3, "loss": 99.0})
    assert d.action is Action.STOP and "not in the top 2" in d.reason
    # Ranked worst first: b4, b3, b2 | b1, b0.
    assert _drain(sched) == [
        (SuggestionAction.STOP, "b3"),
        (SuggestionAction.STOP, "b2"),
        (SuggestionAction.RESUME, "b1"),
        (SuggestionAction.RESUME, "b0"),
    ]


def test_a_trial_leaving_completes_the_rung():
    sched = _hb(max_t=9, reduction_factor=3)
    _add(sched, 3, prefix="first")
    b = _add(sched, 5, prefix="b")
    for i, t in enumerate(b[:4]):
        assert (
            sched.on_trial_result(t, {"training_iteration": 3, "acc": float(i)}).action
            is Action.PAUSE
        )
    sched.on_trial_error(b[4])  # the last one fails: the rung is complete without it
    assert _drain(sched) == [
        (SuggestionAction.STOP, "b0"),
        (SuggestionAction.STOP, "b1"),
        (SuggestionAction.RESUME, "b2"),
        (SuggestionAction.RESUME, "b3"),
    ]


@pytest.mark.parametrize(
    ("kw", "needle"), [({"max_t": 0}, "max_t=0"), ({"reduction_factor": 1}, "reduction_factor=1")]
)
def test_bad_arguments(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        HyperBandScheduler(**kw)
