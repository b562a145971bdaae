"""ResourceChangingScheduler's allocation functions and decisions, against Ray's own."""

from __future__ import annotations

import random

import pytest

from tandem.tune.execution.placement_groups import PlacementGroupFactory
from tandem.tune.schedulers import (
    DistributeResources,
    DistributeResourcesToTopJob,
    FIFOScheduler,
    ResourceChangingScheduler,
)
from tandem.tune.schedulers.base import Action, SuggestionAction
from tandem.tune.trial import Trial, TrialStatus


class _View:
    """The controller as an allocation function reads it (trials, cluster totals)."""

    def __init__(self, trials, cpus, gpus):
        self.trials = trials
        self._resource_updater = self
        self._cpus, self._gpus = cpus, gpus

    def get_live_trials(self):
        return self.trials

    def get_num_cpus(self):
        return self._cpus

    def get_num_gpus(self):
        return self._gpus


class _RayTrial:
    def __init__(self, trial_id, pgf, last_result):
        self.trial_id = trial_id
        self.placement_group_factory = pgf
        self.last_result = last_result


def test_allocations_match_rays_on_random_clusters():
    """Ray's DistributeResources / DistributeResourcesToTopJob and ours, given the same
    trials and cluster, hand out the same bundles (add_bundles, increase_by, limits,
    reserve, GPUs)."""
    from ray.tune.execution.placement_groups import PlacementGroupFactory as RayPGF
    from ray.tune.schedulers import resource_changing_scheduler as ray_rcs

    changed = 0
    for seed in range(200):
        rng = random.Random(seed)
        gpu = rng.random() < 0.3
        base = [{"CPU": 1, "GPU": 1}] if gpu else [{"CPU": rng.choice([1, 2])}]
        kw = {"add_bundles": rng.random() < 0.5,
              "increase_by": rng.choice([None, {"CPU": 1}, {"CPU": 2}]) if not gpu else None,
              "increase_by_times": rng.choice([-1, 1, 2, 3]),
              "reserve_resources": rng.choice([None, {"CPU": 1}])}
        top = rng.random() < 0.5
        cpus, gpus = rng.choice([4, 8, 16]), (rng.choice([2, 4]) if gpu else 0)
        n = rng.randint(1, 4)
        held = []
        for _ in range(n):
            bundles = [dict(b) for b in base] * (1 if not kw["add_bundles"] else rng.randint(1, 2))
            if not kw["add_bundles"]:
                bundles = [{k: v * rng.randint(1, 2) for k, v in base[0].items()}]
            held.append(bundles)
        results = [{"training_iteration": rng.randint(0, 3), "m": rng.random()} for _ in range(n)]
        answers = []
        for pgf_cls, mod, trial_cls in ((RayPGF, ray_rcs, _RayTrial), (PlacementGroupFactory,
                                                                       None, None)):
            if mod is not None:
                fn_cls = mod.DistributeResourcesToTopJob if top else mod.DistributeResources
                trials = [trial_cls(f"t{i}", pgf_cls(held[i]), results[i]) for i in range(n)]
            else:
                fn_cls = DistributeResourcesToTopJob if top else DistributeResources
                trials = []
                for i in range(n):
                    t = Trial("fn", trial_id=f"t{i}", config={}, resources=pgf_cls(held[i]))
                    t.last_result = results[i]
                    trials.append(t)
            fn = fn_cls(**kw, **({"metric": "m", "mode": "max"} if top else {}))

            class _Sched:
                base_trial_resources = pgf_cls(base)

            new = fn(_View(trials, cpus, gpus), trials[0], results[0], _Sched())
            answers.append(None if new is None else (new.bundles, new.strategy))
        assert answers[0] == answers[1], (seed, kw, top, held)
        changed += answers[0] is not None and answers[0][0] != held[0]
    assert changed > 40  # most scenarios really hand out other resources


def _trial(tid, cpus=1):
    t = Trial("fn", trial_id=tid, config={}, resources=PlacementGroupFactory([{"CPU": cpus}]))
    t.status = TrialStatus.RUNNING
    return t


def test_scheduler_pauses_then_resumes_with_the_new_resources():
    rcs = ResourceChangingScheduler(FIFOScheduler())
    rcs.set_search_properties("m", "max")
    a, b = _trial("a"), _trial("b")
    rcs.bind_controller_view(_View([a, b], 4, 0))
    for t in (a, b):
        rcs.on_trial_add(t)
    decision = rcs.on_trial_result(a, {"training_iteration": 1, "m": 1})
    assert decision.action is Action.PAUSE
    assert rcs.suggest() is None  # its job has not stopped yet
    a.status = TrialStatus.PAUSED
    s = rcs.suggest()
    assert s.action is SuggestionAction.RESUME and s.trial_id == "a"
    assert s.resources == PlacementGroupFactory([{"CPU": 2}])
    assert rcs.suggest() is None
    # no free resources and nothing to change: the base scheduler's decision stands
    a.resources, a.status = s.resources, TrialStatus.RUNNING
    b.resources = PlacementGroupFactory([{"CPU": 2}])
    assert rcs.on_trial_result(a, {"training_iteration": 2, "m": 1}).action is Action.CONTINUE
    # a first result (iteration 0) never changes resources, as in Ray
    assert rcs.on_trial_result(a, {"training_iteration": 0, "m": 1}).action is Action.CONTINUE


def test_bad_input_is_refused():
    rcs = ResourceChangingScheduler()
    rcs.on_trial_add(_trial("a"))
    with pytest.raises(RuntimeError, match="varying base resources"):
        rcs.on_trial_add(_trial("b", cpus=2))
    with pytest.raises(Exception, match="trial scheduler"):
        ResourceChangingScheduler(base_scheduler="asha")
    with pytest.warns(UserWarning, match="No resource requirements will be changed"):
        ResourceChangingScheduler(resources_allocation_function=None)
    with pytest.raises(ValueError, match="zero bundles"):
        PlacementGroupFactory([])
    with pytest.raises(Exception, match="strategy must be one of"):
        PlacementGroupFactory([{"CPU": 1}], strategy="BEST")
    with pytest.raises(NotImplementedError, match="tune.with_resources"):
        PlacementGroupFactory([{"CPU": 1}]).to_placement_group()
    pgf = PlacementGroupFactory([{}, {"CPU": 2}, {"CPU": 2, "GPU": 0}])
    assert pgf.head_bundle_is_empty and pgf.required_resources == {"CPU": 4.0}
    assert pgf.bundles == [{"CPU": 2.0}, {"CPU": 2.0}] and pgf.head_cpus == 0.0
    assert pgf == PlacementGroupFactory([{}, {"CPU": 2}, {"CPU": 2}])
    assert pgf != PlacementGroupFactory([{"CPU": 2}, {"CPU": 2}])
