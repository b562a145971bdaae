"""Stoppers, as Ray's python/ray/tune/tests/test_stopper.py checks them (the clock frozen by
patching ``time.time`` instead of freezegun), plus each public stopper driving a Tuner."""

from __future__ import annotations

import pickle
import time

import pytest

from tests.ray_suite.swap import target, tune

stopper = target("tune.stopper")


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, s: float) -> None:
        self.now += s


@pytest.fixture
def frozen(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(time, "time", clock)
    return clock


def test_timeout_stopper_timeout(frozen):
    s = stopper.TimeoutStopper(timeout=60)
    assert not s.stop_all()
    frozen.tick(40)
    assert not s.stop_all()
    frozen.tick(22)
    assert s.stop_all()


def test_timeout_stopper_recover_before_timeout(frozen):
    s = stopper.TimeoutStopper(timeout=60)
    assert not s.stop_all()
    frozen.tick(40)
    assert not s.stop_all()
    checkpoint = pickle.dumps(s)
    frozen.tick(200)  # resumed later: the time while stopped does not count
    s = pickle.loads(checkpoint)
    assert not s.stop_all()
    frozen.tick(10)
    assert not s.stop_all()
    frozen.tick(12)
    assert s.stop_all()


def test_timeout_stopper_recover_after_timeout(frozen):
    s = stopper.TimeoutStopper(timeout=60)
    assert not s.stop_all()
    frozen.tick(62)
    assert s.stop_all()
    checkpoint = pickle.dumps(s)
    frozen.tick(200)
    s = pickle.loads(checkpoint)
    assert s.stop_all()
    frozen.tick(10)
    assert s.stop_all()


def test_timeout_stopper_bad_timeout():
    with pytest.raises(ValueError):
        stopper.TimeoutStopper(timeout="1h")


def test_maximum_iteration_stopper():
    s = stopper.MaximumIterationStopper(max_iter=3)  # counts the results it sees per trial
    assert not s("t", {"training_iteration": 7})
    assert not s("t", {"training_iteration": 8})
    assert not s("u", {"training_iteration": 1})
    assert s("t", {"training_iteration": 9})
    assert not s.stop_all()


def test_trial_plateau_stopper():
    s = stopper.TrialPlateauStopper(metric="loss", std=0.01, num_results=3, grace_period=3)
    assert not any(s("t", {"loss": v, "training_iteration": i + 1})
                   for i, v in enumerate([5.0, 4.0]))
    assert not s("t", {"loss": 3.0, "training_iteration": 3})
    assert not s("t", {"loss": 3.0, "training_iteration": 4})
    assert s("t", {"loss": 3.0, "training_iteration": 5})


def test_experiment_plateau_stopper():
    s = stopper.ExperimentPlateauStopper(metric="acc", mode="max", top=2, patience=0, std=0.001)
    for i, acc in enumerate([0.5, 0.5, 0.5]):
        s(f"t{i}", {"acc": acc})
    assert s.stop_all()
    with pytest.raises(ValueError):
        stopper.ExperimentPlateauStopper(metric="acc", mode="maximum")


def test_combined_stopper():
    c = stopper.CombinedStopper(stopper.MaximumIterationStopper(max_iter=3),
                                stopper.FunctionStopper(lambda tid, r: r["loss"] < 0.1))
    assert not c("t", {"training_iteration": 1, "loss": 1.0})
    assert c("t", {"training_iteration": 1, "loss": 0.05})
    assert c("t", {"training_iteration": 3, "loss": 1.0})  # the third result: max_iter


def _count(config):
    for i in range(20):
        tune.report({"i": i, "loss": 1.0 / (i + 1)})


@pytest.mark.parametrize("stop", [
    {"training_iteration": 4},
    lambda trial_id, result: result["training_iteration"] >= 4,
    "max_iter",
    "combined",
])
def test_stopper_in_a_tuner(stop):
    if stop == "max_iter":
        stop = stopper.MaximumIterationStopper(max_iter=4)
    elif stop == "combined":
        stop = stopper.CombinedStopper(stopper.MaximumIterationStopper(max_iter=4),
                                       stopper.MaximumIterationStopper(max_iter=9))
    results = tune.Tuner(_count, run_config=tune.RunConfig(stop=stop)).fit()
    assert results[0].metrics["training_iteration"] == 4
    assert len(results[0].metrics_dataframe) == 4


def test_stop_all_ends_the_experiment():
    class StopAfterFirstTrial(stopper.Stopper):
        def __init__(self):
            self.seen = 0

        def __call__(self, trial_id, result):
            return result["training_iteration"] >= 2

        def stop_all(self):
            return False

    results = tune.Tuner(_count, tune_config=tune.TuneConfig(num_samples=2),
                         run_config=tune.RunConfig(stop=StopAfterFirstTrial())).fit()
    assert [r.metrics["training_iteration"] for r in results] == [2, 2]
