# Ray Tune's MedianStoppingRule in the form its user guide shows (a function trainable, the
# scheduler in TuneConfig), with hard_stop=False so poor trials are paused and resumed later.
# Only the imports differ from Ray's. The trainable keeps no checkpoint, so a resumed trial
# starts over: Ray restarts its training_iteration count too, and the experiment ends.
import json
import os
import sys
import time

from tandem import tune
from tandem.tune.schedulers import MedianStoppingRule


def objective(config):
    for step in range(20):
        score = config["a"] + config["b"] * 0.01 * step
        time.sleep(0.05)  # a training step
        tune.report({"mean_accuracy": score, "step": step})


tuner = tune.Tuner(
    objective,
    tune_config=tune.TuneConfig(
        metric="mean_accuracy",
        mode="max",
        num_samples=8,
        scheduler=MedianStoppingRule(grace_period=3, hard_stop=False),
    ),
    param_space={"a": tune.uniform(0, 1), "b": tune.uniform(0, 5)},
    run_config=tune.RunConfig(name="median_stopping", verbose=1),
)
results = tuner.fit()
print("Best config:", results.get_best_result().config)
for r in results:
    with open(os.path.join(r.path, "result.json")) as f:
        its = [json.loads(line)["training_iteration"] for line in f if line.strip()]
    if len(its) != len(set(its)) or max(its) > 20:
        sys.exit(f"{r.path}: training_iteration rows {its}")
print("every trial's rows: distinct iterations, at most 20")
