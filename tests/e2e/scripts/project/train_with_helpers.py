"""docs/server.md "from Python": a job whose code imports the user's own module, sent to
the train server with runtime_env={"working_dir": "."}; then a Tuner on the same server."""

import os

import helpers

import tandem
from tandem import train, tune
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

tandem.init(address=os.environ["TANDEM_ADDRESS"], runtime_env={"working_dir": "."})


def loop(config):
    for step in range(3):
        train.report({"step": step, "lr": helpers.lr_schedule(step),
                      "cwd_has_helpers": os.path.exists("helpers.py")})


handle = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="with_helpers")).fit(block=False)
print("JOB_ID", handle.job_id)
rows = list(handle.results())
result = handle.wait(timeout=60)
print("LRS", [round(r["lr"], 3) for r in rows], result.metrics["cwd_has_helpers"])


def objective(config):
    tune.report({"loss": helpers.lr_schedule(config["s"])})


grid = tune.Tuner(objective, param_space={"s": tune.grid_search([0, 1, 4])},
                  tune_config=tune.TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="tune_on_server", verbose=0)).fit()
print("TUNE", grid.num_errors, grid.get_best_result().config["s"])
