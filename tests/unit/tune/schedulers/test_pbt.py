from __future__ import annotations

from dataclasses import dataclass

import pytest

from tandem._core.errors import ConfigError
from tandem.tune import search as tune
from tandem.tune.schedulers import CONTINUE, Action, PopulationBasedTraining, SuggestionAction
from tandem.tune.trial import Trial, TrialStatus

LRS = [0.1, 0.2, 0.3, 0.4]
OPTS = ["sgd", "adam", "rmsprop"]
BATCHES = [16, 32, 64]
SPACE = {
    "lr": tune.uniform(0.001, 1),
    "opt": tune.choice(OPTS),
    "bs": tune.choice(BATCHES),
    "seed": 0,
}


@dataclass(frozen=True)
class FakeCheckpoint:
    path: str


def _pbt(seed=0, **kw):
    sched = PopulationBasedTraining(
        **{
            "time_attr": "t",
            "metric": "acc",
            "mode": "max",
            "perturbation_interval": 10,
            "hyperparam_mutations": {"lr": tune.uniform(0.001, 1), "opt": OPTS, "bs": BATCHES},
            "seed": seed,
            **kw,
        }
    )
    sched.set_search_properties(None, None, config=SPACE)
    return sched


def _population(sched, n=4):
    trials = []
    for i in range(n):
        t = Trial("fn", trial_id=f"p{i}", config={"lr": LRS[i], "opt": "adam", "bs": 32, "seed": i},
                  status=TrialStatus.RUNNING)
        sched.on_trial_add(t)
        trials.append(t)
    return trials


def _report(sched, trial, t, acc, with_checkpoint=True):
    if with_checkpoint:  # the controller attaches the result's checkpoint first
        trial.checkpoint = FakeCheckpoint(f"/ckpt/{trial.trial_id}/{t}")
    return sched.on_trial_result(trial, {"t": t, "acc": acc})


def test_exploit_returns_donor_checkpoint_and_mutated_config():
    for seed in range(20):
        sched = _pbt(seed=seed)
        p0, p1, p2, p3 = _population(sched)
        assert _report(sched, p0, 5, 0.0) is CONTINUE  # before the first perturbation interval
        # Quantiles need two scored trials; each new top trial remembers its checkpoint.
        for trial, acc in ((p1, 0.2), (p2, 0.3), (p3, 0.9)):
            assert _report(sched, trial, 10, acc) is CONTINUE
        d = _report(sched, p0, 10, 0.1)  # bottom 25%: exploit the top 25% (p3)
        assert d.action is Action.RESTART
        assert d.checkpoint == FakeCheckpoint("/ckpt/p3/10")
        assert "cloning trial p3" in d.reason
        new = d.config
        assert new["seed"] == 3  # copied from the donor, not mutated
        assert (
            new["lr"] in (pytest.approx(0.4 * 1.2), pytest.approx(0.4 * 0.8))
            or 0.001 <= new["lr"] < 1
        )
        assert new["opt"] in OPTS and new["bs"] in BATCHES
        assert p3.config == {"lr": 0.4, "opt": "adam", "bs": 32, "seed": 3}  # donor untouched
        assert sched.perturbations[-1]["donor_trial_id"] == "p3"


def test_list_mutation_shifts_to_a_neighbour_without_resampling():
    sched = _pbt(
        resample_probability=0.0, hyperparam_mutations={"bs": BATCHES, "lr": tune.uniform(0.001, 1)}
    )
    p0, p1, p2, p3 = _population(sched)
    for trial, acc in ((p1, 0.2), (p2, 0.3), (p3, 0.9)):
        _report(sched, trial, 10, acc)
    d = _report(sched, p0, 10, 0.1)
    assert d.config["bs"] in (16, 64)
    assert d.config["lr"] in (pytest.approx(0.48), pytest.approx(0.32))


def test_int_values_stay_int_and_custom_explore():
    sched = _pbt(
        hyperparam_mutations={"bs": tune.randint(8, 128)},
        resample_probability=0.0,
        custom_explore_fn=lambda c: {**c, "explored": True},
    )
    p0, p1, p2, p3 = _population(sched)
    for trial, acc in ((p1, 0.2), (p2, 0.3), (p3, 0.9)):
        _report(sched, trial, 10, acc)
    d = _report(sched, p0, 10, 0.1)
    assert d.config["bs"] in (int(32 * 1.2), int(32 * 0.8)) and type(d.config["bs"]) is int
    assert d.config["explored"] is True


def test_no_exploit_without_donor_checkpoint():
    sched = _pbt()
    p0, p1, p2, p3 = _population(sched)
    for trial, acc in ((p1, 0.2), (p2, 0.3)):
        _report(sched, trial, 10, acc)
    _report(sched, p3, 10, 0.9, with_checkpoint=False)
    assert _report(sched, p0, 10, 0.1) is CONTINUE


def test_finished_trials_leave_the_population():
    sched = _pbt()
    p0, p1, p2, p3 = _population(sched)
    for trial, acc in ((p1, 0.2), (p2, 0.3), (p3, 0.9)):
        _report(sched, trial, 10, acc)
    p3.status = TrialStatus.TERMINATED
    sched.on_trial_complete(p3, {"t": 10, "acc": 0.9})
    d = _report(sched, p0, 10, 0.1)  # top of the live trials is now p2
    assert d.action is Action.RESTART and d.checkpoint == FakeCheckpoint("/ckpt/p2/10")


def test_pauses_for_waiting_trials_and_resumes_least_trained():
    sched = _pbt()
    a, b = _population(sched, 2)
    waiting = Trial("fn", trial_id="w", config={"lr": 0.5, "opt": "sgd", "bs": 16, "seed": 9})
    sched.on_trial_add(waiting)  # PENDING
    d = _report(sched, a, 10, 0.5)
    assert d.action is Action.PAUSE and "yielding" in d.reason
    a.status = TrialStatus.PAUSED
    assert sched.suggest() is None  # w has not started yet
    waiting.status = TrialStatus.RUNNING
    d = _report(sched, b, 20, 0.6)  # a is paused: b yields as well
    assert d.action is Action.PAUSE
    b.status = TrialStatus.PAUSED
    s1 = sched.suggest()
    assert (s1.action, s1.trial_id) == (SuggestionAction.RESUME, "p0")  # t=10 < t=20
    s2 = sched.suggest()
    assert (s2.action, s2.trial_id) == (SuggestionAction.RESUME, "p1")
    assert sched.suggest() is None


def test_a_pause_still_taking_effect_is_not_resumed_yet():
    """Ray's pbt_example.py (class API, 4 trials on 2 CPUs) hung: a trial told to pause was
    suggested for resumption while its job was still being stopped (status RUNNING), the
    controller dropped that suggestion, and the trial stayed PAUSED forever."""
    sched = _pbt()
    a, _ = _population(sched, 2)
    waiting = Trial("fn", trial_id="w", config={"lr": 0.5, "opt": "sgd", "bs": 16, "seed": 9})
    sched.on_trial_add(waiting)
    assert _report(sched, a, 10, 0.5).action is Action.PAUSE
    waiting.status = TrialStatus.RUNNING  # w starts before a's job has ended
    assert sched.suggest() is None  # a still runs: nothing to resume yet
    a.status = TrialStatus.PAUSED
    s = sched.suggest()
    assert (s.action, s.trial_id) == (SuggestionAction.RESUME, "p0")


def test_missing_attrs():
    sched = _pbt()
    (a,) = _population(sched, 1)
    with pytest.raises(ConfigError, match=r"without 't'.*require_attrs=False"):
        sched.on_trial_result(a, {"acc": 1.0})
    lenient = _pbt(require_attrs=False)
    (b,) = _population(lenient, 1)
    assert lenient.on_trial_result(b, {"t": 10}) is CONTINUE


def test_bad_mutation_key_names_key_and_lists_space():
    sched = PopulationBasedTraining(
        metric="acc", mode="max", hyperparam_mutations={"lrr": [0.1, 0.2]}
    )
    with pytest.raises(ConfigError) as info:
        sched.set_search_properties(None, None, config={"lr": tune.uniform(0, 1), "bs": 32})
    msg = str(info.value)
    assert "'lrr'" in msg and "['bs', 'lr']" in msg and "param_space" in msg


def test_nested_mutation_keys_are_checked():
    space = {"train_loop_config": {"lr": tune.uniform(0, 1), "wd": 0.0}}
    ok = PopulationBasedTraining(
        metric="acc", mode="max", hyperparam_mutations={"train_loop_config": {"lr": [0.1]}}
    )
    assert ok.set_search_properties(None, None, config=space)
    bad = PopulationBasedTraining(
        metric="acc", mode="max", hyperparam_mutations={"train_loop_config": {"momentum": [0.9]}}
    )
    with pytest.raises(ConfigError, match=r"'train_loop_config/momentum'.*\['lr', 'wd'\]"):
        bad.set_search_properties(None, None, config=space)
    flat = PopulationBasedTraining(metric="acc", mode="max", hyperparam_mutations={"lr": [0.1]})
    with pytest.raises(ConfigError, match=r"key 'lr' is not in the param space.*train_loop_config"):
        flat.set_search_properties(None, None, config=space)


def test_nested_mutation_explores_nested_config():
    space = {"train_loop_config": {"lr": tune.uniform(0, 1)}}
    sched = PopulationBasedTraining(
        time_attr="t",
        metric="acc",
        mode="max",
        perturbation_interval=1,
        hyperparam_mutations={"train_loop_config": {"lr": [0.1, 0.2, 0.3]}},
        seed=0,
    )
    sched.set_search_properties(None, None, config=space)
    trials = [
        Trial("fn", trial_id=f"n{i}", config={"train_loop_config": {"lr": 0.2}}, status=TrialStatus.RUNNING)
        for i in range(3)
    ]
    for t in trials:
        sched.on_trial_add(t)
    _report(sched, trials[1], 1, 1.0)  # alone: not yet ranked, so not a donor
    _report(sched, trials[2], 1, 2.0)  # top: its checkpoint becomes the donor checkpoint
    d = _report(sched, trials[0], 1, 0.0)
    assert d.action is Action.RESTART and d.config["train_loop_config"]["lr"] in (0.1, 0.2, 0.3)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"hyperparam_mutations": None}, "needs hyperparam_mutations or custom_explore_fn"),
        ({"quantile_fraction": 0.6}, "quantile_fraction=0.6"),
        ({"perturbation_interval": 0}, "perturbation_interval=0"),
        ({"resample_probability": 2}, "resample_probability=2"),
        ({"perturbation_factors": ()}, "perturbation_factors"),
        (
            {"hyperparam_mutations": {"lr": tune.sample_from(lambda s: 1)}},
            "'lr' is a tune.sample_from",
        ),
        ({"hyperparam_mutations": {"lr": tune.grid_search([1, 2])}}, "'lr' is a grid_search"),
        ({"hyperparam_mutations": {"lr": 0.1}}, "'lr' is 0.1"),
        ({"hyperparam_mutations": {"lr": []}}, "empty list"),
    ],
)
def test_bad_arguments(kw, needle):
    args = {"hyperparam_mutations": {"lr": [0.1]}, **kw}
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        PopulationBasedTraining(**args)


def test_a_trial_still_stopping_is_not_resumed_before_it_is_paused():
    # PBT decides PAUSE at a perturbation point; the trial stays RUNNING until its job has
    # stopped. A resume suggested in between was dropped by the controller (the trial was
    # not PAUSED yet) and forgotten by PBT, so the trial never ran again: fit() hung.
    sched = _pbt()
    a, b = _population(sched, 2)
    d = _report(sched, a, 10, 0.5)
    assert d.action is Action.CONTINUE  # nobody waits yet
    d = _report(sched, b, 10, 0.6)
    assert d.action is Action.CONTINUE
    waiting = Trial("fn", trial_id="w", config={"lr": 0.5, "opt": "sgd", "bs": 16, "seed": 9})
    sched.on_trial_add(waiting)
    waiting.status = TrialStatus.RUNNING
    a.status = TrialStatus.PAUSED
    sched._trials.mark_paused(a)  # a paused earlier
    d = _report(sched, b, 20, 0.7)  # a is paused: b yields at its perturbation point
    assert d.action is Action.PAUSE
    # b's job is still stopping (RUNNING): only a may be resumed now, and b stays known
    s1 = sched.suggest()
    assert (s1.action, s1.trial_id) == (SuggestionAction.RESUME, "p0")
    assert sched.suggest() is None  # b is not PAUSED yet
    b.status = TrialStatus.PAUSED  # its job ended
    s2 = sched.suggest()
    assert s2 is not None and (s2.action, s2.trial_id) == (SuggestionAction.RESUME, "p1")


def test_a_nan_score_is_neither_donor_nor_ranked():
    # Ray leaves NaN scores out of the quantiles; sorted in, a NaN stayed where it was
    # (here last, on top) and the diverged trial was cloned into a healthy one.
    sched = _pbt()
    p0, p1, p2, p3 = _population(sched)
    for trial, acc in ((p1, 0.3), (p2, 0.9), (p3, float("nan"))):
        _report(sched, trial, 10, acc)
    d = _report(sched, p0, 10, 0.1)
    assert d.action is Action.RESTART
    assert d.checkpoint == FakeCheckpoint("/ckpt/p2/10")  # the top finite score, not p3
    lower, upper = sched._quantiles()
    assert "p3" not in lower + upper
