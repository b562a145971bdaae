"""README "Tuning": a Tuner over a function, with ASHA."""

from tandem import tune
from tandem.tune.schedulers import ASHAScheduler


def objective(config):
    for i in range(10):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1 / (i + 1)})


results = tune.Tuner(
    objective,
    param_space={"x": tune.grid_search([0.0, 0.3, 0.9])},
    tune_config=tune.TuneConfig(metric="loss", mode="min",
                                scheduler=ASHAScheduler(max_t=10, grace_period=2)),
    run_config=tune.RunConfig(name="tuner_function", verbose=0),
).fit()
print("ERRORS", results.num_errors)
print("TRIALS", len(results))
print("BEST", results.get_best_result().config["x"])
df = results.get_dataframe()
print("COLUMNS", "config/x" in df.columns and "trial_id" in df.columns)
