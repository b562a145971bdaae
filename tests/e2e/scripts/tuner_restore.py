"""README "Tuning": Tuner.restore(path, trainable) resumes an experiment in a new process.

First run (`first`): one of three trials fails. Second run (`restore`, another process):
the experiment is restored with restart_errored=True and the failed trial runs again."""

import os
import sys

from tandem import tune

mode, marker = sys.argv[1], sys.argv[2]
path = os.path.join(os.environ["TANDEM_STORAGE_PATH"], "restorable")


def objective(config):
    if config["x"] == 2 and not os.path.exists(config["marker"]):
        raise ValueError("x=2 fails on the first run")
    for i in range(3):
        tune.report({"loss": config["x"] + 1.0 / (i + 1)})


if mode == "first":
    grid = tune.Tuner(objective, param_space={"x": tune.grid_search([0, 1, 2]),
                                              "marker": marker},
                      tune_config=tune.TuneConfig(metric="loss", mode="min"),
                      run_config=tune.RunConfig(name="restorable", verbose=0)).fit()
    print("FIRST", grid.num_errors, grid.num_terminated)
else:
    open(marker, "w").close()
    print("CAN_RESTORE", tune.Tuner.can_restore(path))
    grid = tune.Tuner.restore(path, objective, restart_errored=True).fit()
    print("RESTORED", grid.num_errors, grid.num_terminated,
          sorted(r.config["x"] for r in grid))
