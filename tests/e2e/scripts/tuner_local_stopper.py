"""Stoppers that decide a trial from its own results (``Stopper.trial_local``) run next to
the trial, on a train server too (issue 25): a stop still happens at the result that made
it, and only that result waits for the tuner's verdict. Run with TANDEM_ADDRESS set (on a
server) and without (embedded); the test compares the two."""

import os
import sys

from _verdicts import controllers, rows  # beside this script

import tandem
from tandem import tune
from tandem.train import RunConfig
from tandem.tune.stopper import Stopper, TrialPlateauStopper


def tight(config):
    for i in range(100_000):
        tune.report({"i": i, "plateau": max(0, 10 - i) + config["x"]})


class ThirdQuarter(Stopper):
    """Stops a trial at its 3rd report whose ``i`` is a multiple of 4 (i = 8, iteration 9):
    state per trial, built from the trial's results in order."""

    trial_local = True

    def __init__(self):
        self.seen = {}

    def __call__(self, trial_id, result):
        if result["i"] % 4 == 0:
            self.seen[trial_id] = self.seen.get(trial_id, 0) + 1
        return self.seen.get(trial_id, 0) >= 3


tandem.init(address=os.environ.get("TANDEM_ADDRESS"))
storage = sys.argv[1]
for name, stop in (("custom", ThirdQuarter()),
                   # "plateau" is constant from i = 10: 3 equal values at i = 10, 11, 12
                   ("plateau", TrialPlateauStopper("plateau", std=0.01, num_results=3,
                                                   grace_period=3))):
    rg = tune.Tuner(tight, param_space={"x": tune.grid_search([1, 2])},
                    run_config=RunConfig(storage_path=storage, name=name, verbose=0,
                                         stop=stop)).fit()
    got = [rows(r.path) for r in rg]
    # complete and in order: iterations 1..k, each once
    print(name.upper() + "_IN_ORDER", all(r == list(range(1, len(r) + 1)) for r in got))
    print(name.upper() + "_ROWS", sorted(len(r) for r in got))
    print(name.upper() + "_LAST", sorted(r.metrics["i"] for r in rg))
    print(name.upper() + "_QUESTIONS", controllers[-1].verdict_questions)
    print(name.upper() + "_ERRORS", rg.num_errors)
