"""A Tuner on a train server: a stop criterion and a scheduler's decision take effect at
the result that triggered them (the workers wait there for the tuner, on the client)."""

import os
import sys

from _verdicts import controllers, rows  # beside this script

import tandem
from tandem import tune
from tandem.train import RunConfig
from tandem.tune.schedulers import ASHAScheduler, FIFOScheduler
from tandem.tune.schedulers.base import Decision


def tight(config):
    for i in range(100_000):
        tune.report({"i": i})


class PauseAt(FIFOScheduler):
    """Stops a trial at iteration k (as a scheduler decides on one result)."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def on_trial_result(self, trial, result):
        if result["training_iteration"] == self.k:
            return Decision.stop(f"decided at {self.k}")
        return Decision.continue_()


def metric(config):
    for i in range(100_000):
        tune.report({"loss": config["x"] + 1.0 / (i + 1)})


tandem.init(address=os.environ["TANDEM_ADDRESS"])
storage = sys.argv[1]
rg = tune.Tuner(tight, param_space={"x": tune.grid_search([1, 2])},
                run_config=RunConfig(storage_path=storage, name="stop8", verbose=0,
                                     stop={"training_iteration": 8})).fit()
print("STOP_ROWS", sorted(len(rows(r.path)) for r in rg))
print("STOP_LAST", sorted(r.metrics["i"] for r in rg))
print("STOP_FRAME", sorted(len(r.metrics_dataframe) for r in rg))
print("STOP_QUESTIONS", controllers[-1].verdict_questions)
rg = tune.Tuner(tight, tune_config=tune.TuneConfig(scheduler=PauseAt(5)),
                run_config=RunConfig(storage_path=storage, name="sched5", verbose=0)).fit()
print("SCHED_ROWS", rows(rg[0].path))
print("SCHED_QUESTIONS", controllers[-1].verdict_questions)
print("ERRORS", rg.num_errors)
# ASHA decides only where a trial reaches a rung (1, 3, 9 = max_t): the other reports go on
# without a verdict; one trial at a time, so the 2nd and 3rd are judged against the 1st
rg = tune.Tuner(metric, param_space={"x": tune.grid_search([1, 2, 0])},
                tune_config=tune.TuneConfig(
                    metric="loss", mode="min", max_concurrent_trials=1,
                    scheduler=ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3)),
                run_config=RunConfig(storage_path=storage, name="asha", verbose=0)).fit()
print("ASHA_ROWS", [len(rows(r.path)) for r in rg])
print("ASHA_QUESTIONS", controllers[-1].verdict_questions)
