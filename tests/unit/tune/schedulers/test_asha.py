from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tandem._core.errors import ConfigError
from tandem.tune.schedulers import CONTINUE, Action, ASHAScheduler
from tandem.tune.trial import Trial, TrialStatus


def _asha(**kw):
    sched = ASHAScheduler(**{"metric": "acc", "mode": "max", **kw})
    sched.set_search_properties(None, None)
    return sched


def _trials(sched, n):
    trials = [Trial("fn", trial_id=f"t{i}", config={}, status=TrialStatus.RUNNING) for i in range(n)]
    for t in trials:
        sched.on_trial_add(t)
    return trials


def test_rungs_as_ray_computes_them():
    assert _asha(grace_period=1, max_t=100, reduction_factor=4).brackets[0].milestones == [
        1,
        4,
        16,
        64,
    ]
    assert _asha(grace_period=1, max_t=10, reduction_factor=2).brackets[0].milestones == [
        1,
        2,
        4,
        8,
    ]
    sched = _asha(grace_period=1, max_t=100, reduction_factor=4, brackets=3)
    assert [b.milestones for b in sched.brackets] == [[1, 4, 16, 64], [4, 16, 64], [16, 64]]


def test_promotions_and_stops_on_synthetic_curves():
    # rf=2: a trial continues at a rung if its score is >= the median of scores recorded there.
    sched = _asha(grace_period=1, max_t=10, reduction_factor=2)
    t0, t1, t2, t3 = _trials(sched, 4)
    score = {"t0": 1.0, "t1": 2.0, "t2": 3.0, "t3": 0.5}

    def report(trial, it):
        return sched.on_trial_result(
            trial, {"training_iteration": it, "acc": score[trial.trial_id]}
        )

    # Rung 1: cutoffs None, 1.0, median(1, 2)=1.5, median(1, 2, 3)=2.0.
    assert [report(t, 1).action for t in (t0, t1, t2)] == [Action.CONTINUE] * 3
    d = report(t3, 1)
    assert d.action is Action.STOP and "cutoff 2" in d.reason
    # Rung 2: same pattern; t0 (1.0) is first there, so it continues.
    assert [report(t, 2) for t in (t0, t1, t2)] == [CONTINUE] * 3
    # Between rungs nothing is judged.
    assert report(t0, 3) is CONTINUE
    # Rung 4: t2 first, then t0 (1.0 < cutoff 3.0) stops, then t1 (2.0 < median(3, 1)=2.0? no).
    assert report(t2, 4) is CONTINUE
    assert report(t0, 4).action is Action.STOP
    assert report(t1, 4) is CONTINUE
    # max_t stops everything.
    d = report(t2, 10)
    assert d.action is Action.STOP and "max_t=10" in d.reason


def test_min_mode_and_cutoff_quantile():
    sched = _asha(metric="loss", mode="min", grace_period=1, max_t=100, reduction_factor=4)
    trials = _trials(sched, 6)
    # Improving losses: each is >= the 75th percentile of the (negated) losses before it.
    for t, loss in zip(trials[:4], [4.0, 3.0, 2.0, 1.0]):
        assert sched.on_trial_result(t, {"training_iteration": 1, "loss": loss}) is CONTINUE
    bracket = sched.brackets[0]
    assert bracket.cutoff(bracket.rungs[-1][0]) == pytest.approx(-1.75)  # 75th pct of -4..-1
    assert (
        sched.on_trial_result(trials[4], {"training_iteration": 1, "loss": 2.0}).action
        is Action.STOP
    )
    # Now the cutoff is the 75th percentile of [-4, -3, -2, -1, -2] = -2.0.
    assert sched.on_trial_result(trials[5], {"training_iteration": 1, "loss": 1.5}) is CONTINUE


def test_complete_records_result_and_missing_keys_continue():
    sched = _asha(grace_period=1, max_t=10, reduction_factor=2)
    a, b = _trials(sched, 2)
    sched.on_trial_complete(a, {"training_iteration": 1, "acc": 5.0})
    assert sched.brackets[0].rungs[-1][1] == {"t0": 5.0}
    assert sched.on_trial_result(b, {"training_iteration": 1}) is CONTINUE  # no metric
    assert sched.on_trial_result(b, {"training_iteration": 1, "acc": 1.0}).action is Action.STOP


def test_stop_last_trials_false():
    sched = _asha(grace_period=1, max_t=4, reduction_factor=2, stop_last_trials=False)
    (a,) = _trials(sched, 1)
    for it in range(1, 8):
        assert sched.on_trial_result(a, {"training_iteration": it, "acc": 1.0}) is CONTINUE


def test_bracket_assignment_is_softmax_of_rung_counts():
    sched = _asha(grace_period=1, max_t=100, reduction_factor=4, brackets=3, seed=0)
    trials = _trials(sched, 3000)
    counts = Counter(sched._trial_bracket[t.trial_id] for t in trials)
    expected = np.exp([0.0, -1.0, -2.0]) / np.exp([0.0, -1.0, -2.0]).sum()
    assert np.allclose([counts[i] / 3000 for i in range(3)], expected, atol=0.03)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"max_t": 0}, "max_t=0"),
        ({"grace_period": 0}, "grace_period=0"),
        ({"grace_period": 20, "max_t": 10}, "grace_period must be <= max_t"),
        ({"reduction_factor": 1}, "reduction_factor=1"),
        ({"brackets": 0}, "brackets=0"),
    ],
)
def test_bad_arguments(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        ASHAScheduler(**kw)


def test_cutoff_matches_numpy_nanpercentile():
    import math
    import random

    import numpy as np

    from tandem.tune.schedulers.asha import _Bracket

    rng = random.Random(0)
    for rf in (2, 3, 4):
        b = _Bracket(1, 81, rf, 0, True)
        milestone = b.rungs[-1][0]
        values = []
        for i in range(200):
            v = float("nan") if i % 17 == 0 else rng.uniform(-5, 5)
            values.append(v)
            b.on_result(f"t{i}", milestone, v)
            want = np.nanpercentile(values[: i + 1], (1 - 1 / rf) * 100) if any(
                not math.isnan(x) for x in values[: i + 1]) else None
            got = b.cutoff(milestone)
            if want is None or math.isnan(want):
                assert got is None
            else:
                # bit for bit: a score tying the cutoff is judged as Ray judges it
                assert got == float(want)


def test_a_score_tying_the_cutoff_continues_as_in_ray():
    # Six trials record these accuracies at rung 1 (rf=4): NumPy's (so Ray's) cutoff is
    # exactly 0.325; the textbook lerp gave 0.32500000000000007 and stopped a trial
    # scoring 0.325, which Ray's ASHA lets continue.
    sched = _asha(grace_period=1, max_t=16, reduction_factor=4)
    trials = _trials(sched, 7)
    for t, acc in zip(trials, [0.1, -0.8, 0.4, -0.5, -0.7, 0.6]):
        sched.on_trial_result(t, {"training_iteration": 1, "acc": acc})
    assert sched.brackets[0].cutoff(1) == 0.325
    d = sched.on_trial_result(trials[6], {"training_iteration": 1, "acc": 0.325})
    assert d is CONTINUE


def test_decisions_match_rays_asha_on_random_result_sequences():
    """Ray's AsyncHyperBandScheduler and ours, fed the same results in the same order,
    decide the same at every result (ties, NaN, min/max, rf 2-4, stop_last_trials)."""
    import random
    import warnings

    from ray.tune.schedulers import TrialScheduler as RayDecision
    from ray.tune.schedulers.async_hyperband import AsyncHyperBandScheduler as RayASHA

    class _RayTrial:
        def __init__(self, trial_id: str) -> None:
            self.trial_id = trial_id

    for seed in range(300):
        rng = random.Random(seed)
        kw = {
            "metric": "m",
            "mode": rng.choice(["min", "max"]),
            "max_t": rng.choice([9, 27, 30, 81]),
            "grace_period": rng.choice([1, 2, 3]),
            "reduction_factor": rng.choice([2, 2.5, 3, 4]),
            "stop_last_trials": rng.random() < 0.8,
        }
        ray_sched, ours = RayASHA(**kw), ASHAScheduler(**kw)
        ours.set_search_properties(None, None)
        n = rng.randint(2, 30)
        ray_trials = [_RayTrial(f"t{i}") for i in range(n)]
        our_trials = _trials(ours, n)
        for t in ray_trials:
            ray_sched.on_trial_add(None, t)
        iters, alive, step = [0] * n, set(range(n)), rng.choice([1, 1, 2, 3])
        while alive:
            i = rng.choice(sorted(alive))
            iters[i] += step
            if rng.random() < 0.05:
                value = float("nan")
            else:  # few distinct values: ties with the cutoff happen
                value = round(rng.random(), 1) if rng.random() < 0.5 else rng.random()
            result = {"training_iteration": iters[i], "m": value}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # nanpercentile of an all-NaN rung warns
                theirs = ray_sched.on_trial_result(None, ray_trials[i], result)
            mine = ours.on_trial_result(our_trials[i], result)
            assert (theirs == RayDecision.STOP) == (mine.action is Action.STOP), (seed, i, result)
            if theirs == RayDecision.STOP or iters[i] >= kw["max_t"] * 1.5:
                alive.discard(i)
