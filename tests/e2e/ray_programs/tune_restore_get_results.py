# Ray Tune's "Analyzing Tune experiment results" guide, shrunk: run an experiment, then, in a
# later session, `tune.Tuner.restore(experiment_path, trainable=...)` and read its
# `get_results()` without calling fit() again. A trial that never reported has
# `result.metrics == {}`, as in Ray. Only the imports differ from Ray's.
import os
import sys

from tandem import tune


def train_mnist(config):
    if config["lr"] > 0.5:
        return  # never reports
    for i in range(3):
        tune.report({"mean_accuracy": config["lr"] * (i + 1), "step": i})


storage_path = os.environ.get("TANDEM_STORAGE_PATH", os.path.expanduser("~/tandem_results"))
exp_name = "tune_analyzing_results"
experiment_path = os.path.join(storage_path, exp_name)

if sys.argv[1:] == ["run"]:
    tuner = tune.Tuner(
        train_mnist,
        param_space={"lr": tune.grid_search([0.001, 0.01, 0.1, 0.9])},
        run_config=tune.RunConfig(name=exp_name, storage_path=storage_path),
        tune_config=tune.TuneConfig(mode="max", metric="mean_accuracy"),
    )
    tuner.fit()
    print("experiment at", experiment_path)
else:
    print(f"Loading results from {experiment_path}...")
    restored_tuner = tune.Tuner.restore(experiment_path, trainable=train_mnist)
    result_grid = restored_tuner.get_results()
    print("Number of results:", len(result_grid))
    best = result_grid.get_best_result()
    print("Best config:", best.config, "metrics:", {k: best.metrics[k] for k in ("mean_accuracy",)})
    assert best.config == {"lr": 0.1}, best.config
    silent = [r for r in result_grid if r.config["lr"] == 0.9][0]
    print("metrics of the trial that never reported:", silent.metrics)
    assert silent.metrics == {}, silent.metrics
    df = result_grid.get_dataframe()
    print(df[["config/lr", "mean_accuracy"]].to_string())
