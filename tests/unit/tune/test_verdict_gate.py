"""Issue 25: a trial's reports wait for the tuner's verdict only where its stopper or
scheduler can decide (``VerdictGate``). Checked against the real policies: every result at
which they decide something must be one the gate makes wait, and most others must not."""

from __future__ import annotations

import functools
import random

from tandem.train.context import VerdictGate
from tandem.tune._verdicts import verdict_gate
from tandem.tune.callback import Callback, LoggerCallback
from tandem.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule
from tandem.tune.schedulers.base import Action
from tandem.tune.stopper import (
    CombinedStopper,
    DictStopper,
    FunctionStopper,
    MaximumIterationStopper,
)
from tandem.tune.trial import Trial


def _asks(gate, results):
    judged: set[int] = set()
    return [gate is True or gate.asks(r, n, judged) for n, r in enumerate(results, 1)]


def test_no_stopper_and_fifo_need_no_verdict_and_unknown_policies_ask_at_every_report():
    assert verdict_gate(None, FIFOScheduler(), [], None) is None
    assert verdict_gate(None, FIFOScheduler(), [LoggerCallback()], None) is None
    trial = Trial("fn", trial_id="t", config={})
    # a function stopper, a scheduler other than FIFO/ASHA, a callback that may change a
    # result: any report may decide
    assert verdict_gate(FunctionStopper(lambda t, r: False), FIFOScheduler(), [], None)(
        trial) is True
    assert verdict_gate(None, MedianStoppingRule(metric="m", mode="max"), [], "m")(
        trial) is True

    class Marks(Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            result["should_checkpoint"] = True

    # with a stopper, such a callback makes every report wait; with nothing that decides,
    # no report does (as before)
    assert verdict_gate(DictStopper({"training_iteration": 5}), FIFOScheduler(), [Marks()],
                        None)(trial) is True
    assert verdict_gate(None, FIFOScheduler(), [Marks()], None) is None


def test_dict_and_iteration_stoppers_wait_only_where_they_fire():
    trial = Trial("fn", trial_id="t", config={})
    stopper = CombinedStopper(DictStopper({"training_iteration": 8, "acc": 0.9}),
                              MaximumIterationStopper(20))
    gate = verdict_gate(stopper, FIFOScheduler(), [], None)(trial)
    results = [{"training_iteration": i, "acc": 0.1 * (i % 10)} for i in range(1, 8)]
    # 7 results, none reaches 8 or acc 0.9; done / should_checkpoint always wait
    assert _asks(gate, results) == [False] * 7
    assert _asks(gate, [{"training_iteration": 8, "acc": 0.0}]) == [True]
    assert _asks(gate, [{"training_iteration": 1, "acc": 0.95}]) == [True]
    assert _asks(gate, [{"training_iteration": 1, "acc": 0.0, "done": True}]) == [True]
    assert _asks(gate, [{"training_iteration": 1, "acc": 0.0, "should_checkpoint": 1}]) == [
        True]
    # a key the worker's row lacks (the driver might add it), or one that does not compare
    assert _asks(gate, [{"training_iteration": 1}]) == [True]
    assert _asks(gate, [{"training_iteration": 1, "acc": "high"}]) == [True]
    # MaximumIterationStopper counts a trial's results across its jobs: 20 in all, of
    # which 15 already seen -> this job's 5th report is the one that may stop it
    for _ in range(15):
        stopper(trial.trial_id, {"training_iteration": 0, "acc": 0.0})
    gate = verdict_gate(stopper, FIFOScheduler(), [], None)(trial)
    quiet = [{"training_iteration": 1, "acc": 0.0}] * 6
    assert _asks(gate, quiet) == [False, False, False, False, True, True]


def test_asha_gate_waits_at_every_result_asha_decides_on():
    """Random trials through a real ASHAScheduler (one bracket and three, integer and
    jumping float progress, stop_last_trials both ways): each STOP it returns is at a
    result the gate made wait; and most results do not wait."""
    rng = random.Random(25)
    decided = waited = total = 0
    for case in range(60):
        floats = case % 2 == 1
        sched = ASHAScheduler(
            time_attr="t", metric="loss", mode="min", max_t=27 if not floats else 20.0,
            grace_period=1, reduction_factor=rng.choice([2, 3]),
            brackets=1 + case % 3, stop_last_trials=case % 4 != 3, seed=case)
        gate_of = verdict_gate(None, sched, [], "loss")
        assert gate_of is not None
        for k in range(8):
            trial = Trial("fn", trial_id=f"{case}_{k}", config={})
            sched.on_trial_add(trial)
            gate = gate_of(trial)
            assert isinstance(gate, VerdictGate)
            judged: set[int] = set()
            t = 0.0
            for n in range(1, 40):
                t = t + (rng.uniform(0.1, 4.0) if floats else 1)
                result = {"t": t, "loss": rng.random() if rng.random() > 0.05 else None,
                          "training_iteration": n}
                asks = gate.asks(result, n, judged)
                decision = sched.on_trial_result(trial, result)
                total += 1
                waited += asks
                if decision.action is not Action.CONTINUE:
                    decided += 1
                    assert asks, (case, k, n, result, decision)
                    sched.on_trial_complete(trial, result)
                    break
    assert decided > 100  # the check saw many decisions
    assert waited < total / 2, (waited, total)  # and most results went on without a verdict


def test_trial_local_stoppers_run_next_to_the_trial_and_ask_only_where_they_fire():
    """Issue 25: a stopper declared ``trial_local`` (TrialPlateauStopper, or a user's) is
    copied into the gate when the trial starts; the copy sees every report and asks exactly
    where the tuner's stopper, seeing the same results, stops the trial."""
    from tandem.tune.stopper import Stopper, TrialPlateauStopper

    class Rises(Stopper):
        trial_local = True

        def __init__(self):
            self.rises: dict[str, int] = {}
            self.last: dict[str, float] = {}

        def __call__(self, trial_id, result):
            prev = self.last.get(trial_id)
            self.last[trial_id] = result["score"]
            if prev is not None and result["score"] > prev:
                self.rises[trial_id] = self.rises.get(trial_id, 0) + 1
            return self.rises.get(trial_id, 0) >= 2

    rng = random.Random(7)
    for make in (lambda: TrialPlateauStopper("score", std=0.05, num_results=3,
                                             grace_period=3),
                 Rises,
                 lambda: CombinedStopper(DictStopper({"training_iteration": 30}), Rises())):
        stopper = make()
        gate_of = verdict_gate(stopper, FIFOScheduler(), [], None)
        asked = decided = 0
        for t in range(40):
            trial = Trial("fn", trial_id=f"t{t}", config={})
            gate = gate_of(trial)
            assert isinstance(gate, VerdictGate) and gate.local
            copies = [functools.partial(s, trial.trial_id) for s in gate.load_local()]
            judged: set[int] = set()
            level = rng.random()
            for i in range(1, 41):
                level += rng.choice([-0.2, 0.0, 0.0, 0.01, 0.3]) * rng.random()
                result = {"training_iteration": i, "score": round(level, 3)}
                asks = gate.asks(dict(result), i, judged, copies)
                stop = stopper(trial.trial_id, dict(result))  # the tuner's, same order
                asked += asks
                if stop:
                    assert asks, (type(stopper).__name__, t, i)  # decided where it waited
                    decided += 1
                    break
        # one question per stopped trial, none elsewhere
        assert decided >= 10 and asked == decided, (type(stopper).__name__, decided, asked)


def test_a_trial_local_stopper_that_does_not_pickle_makes_every_report_wait():
    import threading

    from tandem.tune.stopper import Stopper

    class Holds(Stopper):
        trial_local = True

        def __init__(self):
            self.lock = threading.Lock()  # does not pickle

    trial = Trial("fn", trial_id="t", config={})
    assert verdict_gate(Holds(), FIFOScheduler(), [], None)(trial) is True
