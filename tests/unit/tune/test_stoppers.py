"""``tandem.tune.stopper``: Ray's stoppers with Ray's semantics (the e2e program
tests/e2e/ray_programs/tune_stoppers.py checks them against Ray's output)."""

from __future__ import annotations

import datetime
import pickle

import pytest

from tandem._core.errors import ConfigError
from tandem.tune.stopper import (
    CombinedStopper,
    ExperimentPlateauStopper,
    FunctionStopper,
    MaximumIterationStopper,
    NoopStopper,
    Stopper,
    TimeoutStopper,
    TrialPlateauStopper,
)


def test_trial_plateau_waits_for_grace_and_threshold_per_trial():
    s = TrialPlateauStopper("acc", std=0.01, num_results=3, grace_period=4,
                            metric_threshold=0.5, mode="max")
    assert [s("a", {"acc": 0.1}) for _ in range(5)] == [False] * 5  # below the threshold
    assert [s("b", {"acc": 0.9}) for _ in range(4)] == [False, False, False, True]
    restored = pickle.loads(pickle.dumps(s))  # saved with the experiment (Tuner.restore)
    assert restored("b", {"acc": 0.9}) is True and restored("c", {"acc": 0.9}) is False


def test_experiment_plateau_stops_all_after_patience():
    s = ExperimentPlateauStopper("loss", std=0.001, top=2, mode="min", patience=2)
    assert s("a", {"loss": 1.0}) is False
    assert s("b", {"loss": 1.0}) is False  # a plateau once; patience=2 wants it twice
    assert s("a", {"loss": 1.0}) is True and s.stop_all() is True


def test_combined_max_iteration_noop_and_function():
    s = CombinedStopper(MaximumIterationStopper(2), NoopStopper(),
                        FunctionStopper(lambda tid, r: r["x"] > 5))
    assert s("t", {"x": 9}) is True  # the function stops it; the others not consulted
    assert s("u", {"x": 0}) is False and s("u", {"x": 0}) is True  # max_iter 2
    assert s.stop_all() is False
    assert FunctionStopper.is_valid_function(lambda tid, r: True)
    assert not FunctionStopper.is_valid_function(NoopStopper())


def test_timeout_stopper_counts_from_its_first_check():
    s = TimeoutStopper(datetime.timedelta(seconds=0))
    assert s.stop_all() is True
    s = TimeoutStopper(3600)
    assert s.stop_all() is False and isinstance(s, Stopper)


@pytest.mark.parametrize("make, needle", [
    (lambda: TimeoutStopper("soon"), "timedelta"),
    (lambda: TrialPlateauStopper("acc", metric_threshold=0.5), "mode"),
    (lambda: ExperimentPlateauStopper("acc", top=1), "greater than one"),
    (lambda: ExperimentPlateauStopper("acc", std=0), "float > 0"),
    (lambda: ExperimentPlateauStopper("acc", mode="best"), "'min' or 'max'"),
])
def test_bad_arguments_say_what_to_give(make, needle):
    with pytest.raises(ConfigError, match=needle):
        make()


def test_the_plateau_check_computes_numpys_std_bit_for_bit():
    """``TrialPlateauStopper`` checks a plateau at every result (in the tuner, and on a
    server next to the trial too) without numpy for windows of plain numbers; its std must
    be numpy's to the last bit, so a plateau is found at the same result as with np.std
    (and as in Ray)."""
    import random

    import numpy as np

    from tandem.tune.stopper import _window_std

    rng = random.Random(0)
    for _ in range(20_000):
        n = rng.choice([rng.randint(1, 12), rng.randint(1, 128)])
        kind = rng.randrange(4)
        if kind == 0:
            values: list = [rng.random() for _ in range(n)]
        elif kind == 1:
            values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20) for _ in range(n)]
        elif kind == 2:
            values = [rng.randint(-10**6, 10**6) for _ in range(n)]
        else:
            base = rng.random()
            values = [rng.choice([base, base + 1e-12, 0.1, 1 / 3, 7]) for _ in range(n)]
        assert _window_std(values) == float(np.std(values)), values
    # what it leaves to numpy: other types, big ints, long windows
    for values in ([None, 1.0], [True, 1.0], [np.float32(0.1), 0.2], [2**70, 1], [0.5] * 129):
        assert _window_std(values) is None


def test_a_plateau_is_found_at_the_same_result_with_or_without_numpy(monkeypatch):
    from tandem.tune import stopper as stopper_mod

    losses = [1.0, 0.5, 0.26, 0.25, 0.2500001, 0.25, 0.2499999, 0.25, 0.1]

    def first_stop() -> int | None:
        s = TrialPlateauStopper("loss", std=1e-6, num_results=4, grace_period=4)
        return next((i for i, v in enumerate(losses) if s("t", {"loss": v})), None)

    fast = first_stop()
    monkeypatch.setattr(stopper_mod, "_window_std", lambda values: None)  # numpy's np.std
    assert fast == first_stop() == 6
