from __future__ import annotations

import pickle
import tracemalloc

from tandem.tune.trial import Trial, TrialStatus


def test_status_terminal_flags():
    assert {s for s in TrialStatus if s.is_terminal} == {TrialStatus.TERMINATED, TrialStatus.ERROR}
    assert TrialStatus.PAUSED.is_live


def test_trial_defaults_and_pickle():
    t = Trial("t1", {"lr": 0.1}, experiment_tag="0_lr=0.1")
    assert t.status is TrialStatus.PENDING and t.last_result is None and t.checkpoint is None
    assert t.num_failures == 0 and not t.is_finished()
    t2 = pickle.loads(pickle.dumps(t))
    assert (t2.trial_id, t2.config, t2.experiment_tag) == ("t1", {"lr": 0.1}, "0_lr=0.1")


def test_ten_thousand_trials_are_small():
    tracemalloc.start()
    trials = [
        Trial(f"trial_{i:05d}", {"lr": 0.001 * i, "bs": 32, "opt": {"name": "adam"}})
        for i in range(10_000)
    ]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(trials) == 10_000
    assert peak < 20 * 2**20  # well under the 300 MB controller budget
