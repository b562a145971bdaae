"""A Tuner on a train server: a stop criterion and a scheduler's decision take effect at
the result that triggered them (the workers wait there for the tuner, on the client)."""

import json
import os
import sys

import tandem
from tandem import tune
from tandem.train import RunConfig
from tandem.tune.schedulers import FIFOScheduler
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


def rows(path):
    with open(os.path.join(path, "result.json")) as f:
        return [json.loads(line)["training_iteration"] for line in f if line.strip()]


tandem.init(address=os.environ["TANDEM_ADDRESS"])
storage = sys.argv[1]
rg = tune.Tuner(tight, param_space={"x": tune.grid_search([1, 2])},
                run_config=RunConfig(storage_path=storage, name="stop8", verbose=0,
                                     stop={"training_iteration": 8})).fit()
print("STOP_ROWS", sorted(len(rows(r.path)) for r in rg))
print("STOP_LAST", sorted(r.metrics["i"] for r in rg))
print("STOP_FRAME", sorted(len(r.metrics_dataframe) for r in rg))
rg = tune.Tuner(tight, tune_config=tune.TuneConfig(scheduler=PauseAt(5)),
                run_config=RunConfig(storage_path=storage, name="sched5", verbose=0)).fit()
print("SCHED_ROWS", rows(rg[0].path))
print("ERRORS", rg.num_errors)
